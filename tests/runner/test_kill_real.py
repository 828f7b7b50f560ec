"""The real xferd-go, killed with SIGKILL in the middle of a cell under the real loadgen: that cell fails
with the server's stderr tail, the next cell completes, and no process is left behind. Needs
build/bin/xferd-go (a failure, not a skip, when it is missing)."""

from __future__ import annotations

import os
import signal
import threading
import time
import tomllib
from pathlib import Path

import psutil

from xferbench import experiment as xe
from xferbench import runner

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_real_server_killed_mid_cell(tmp_path: Path) -> None:
    exp = xe.parse(
        tomllib.loads("""
[experiment]
repeats = 1
warmup_s = 1
[load]
users = 4
duration_s = 4
mix = "upload:1,download:1,echo:1"
sizes = "64KiB"
transport = "frame"
[[servers]]
server = "xferd-go"
[servers.flags]
pool = ["on", "off"]
"""),
        "kill.toml",
        "kill",
    )
    assert Path(exp.cells[0].binary).exists(), "build/bin/xferd-go is not built: run `make build`"
    killed: list[int] = []
    stop = threading.Event()

    def killer() -> None:
        # Bounded: find the first xferd-go child, let it serve 2.5 s of load, SIGKILL it.
        deadline = time.monotonic() + 60
        while not stop.is_set() and time.monotonic() < deadline:
            kids = [p for p in psutil.Process().children() if p.name() == "xferd-go"]
            if kids:
                stop.wait(2.5)
                os.kill(kids[0].pid, signal.SIGKILL)
                killed.append(kids[0].pid)
                return
            stop.wait(0.05)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    try:
        res = runner.sweep(exp, tmp_path / "run")
    finally:
        stop.set()
        t.join(timeout=10)
    assert killed, "the server was never seen"
    first, second = res.rows
    assert first["status"] == "failed", first
    assert "exited with status -9 during the run" in first["error"]
    assert first["stderr_tail"] and any("xferd-go ready" in line for line in first["stderr_tail"])
    assert first["pids"]["server"] == killed[0]
    assert second["status"] == "ok" and second["client_qps"] > 0 and second["server_qps"] > 0
    pids = [p for r in res.rows for p in r["pids"].values()]
    assert not [p for p in pids if _alive(p)], "processes left behind"
    assert not psutil.Process().children(recursive=True)
