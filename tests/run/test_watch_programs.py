"""The watches as the runner sends them to a host (xferbench/run/programs.py): one `python -c` text that runs under a
Python without xferbench, answers "stat" with the host's own counters (xferbench/measure/hoststat.py's sample,
beside the fields the runner read before), and ends what it watches when its input closes. Run here, without ssh:
what ssh adds is tests/run/test_host_figures.py's."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from typing import Any

import pytest

from xferbench.measure import hoststat
from xferbench.run import programs, remote_watch
from xferbench.run.generators import WORKER_WATCH
from xferbench.run.remoteserver import SERVER_WATCH

BARE = shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3"  # the system's Python: no xferbench


@pytest.fixture(scope="module")
def bare_python() -> str:
    r = subprocess.run([BARE, "-I", "-c", "import xferbench"], capture_output=True, text=True, timeout=30, cwd="/")
    assert r.returncode != 0 and "No module named 'xferbench'" in r.stderr, "this Python must lack xferbench"
    return BARE


def ask(proc: subprocess.Popen[str], line: str) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    while True:  # the server watch says {"pid"} first
        got = json.loads(proc.stdout.readline())
        if "pid" not in got:
            return dict(got)


def start(python: str, text: str, *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [python, "-I", "-c", text, *argv],
        cwd="/",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def check_host(host: Any) -> None:
    assert isinstance(host, dict) and set(hoststat.PARTS) <= set(host), host
    assert all("error" not in host[p] for p in hoststat.PARTS), host
    assert host["cpu_ids"] and host["cpu"]["idle"] > 0 and host["net"]["interfaces"] is not None, host


@pytest.mark.parametrize("which", ["worker", "server"])
def test_a_watch_runs_without_xferbench_and_answers_stat_with_the_host(which: str, bare_python: str) -> None:
    text = WORKER_WATCH if which == "worker" else SERVER_WATCH
    proc = start(bare_python, text, "sleep", "30")
    try:
        got = ask(proc, "stat")
        check_host(got["host"])
        if which == "worker":  # what the saturation check read before the host's sample came with it
            assert got["cpus"] == len(got["host"]["cpu_ids"]) and got["t"] == got["host"]["mono"], got
            cpu = got["host"]["cpu"]
            assert got["idle_s"] == pytest.approx(cpu["idle"] + cpu["iowait"]), got
        else:  # the server tree's figures are still there
            assert got["procs"] == 1 and float(got["cpu_s"]) >= 0, got
        a, b = got["host"], ask(proc, "stat")["host"]
        w = hoststat.window(a, b)
        assert w["span_s"] > 0 and all("error" not in w[p] for p in hoststat.PARTS), w
        assert proc.stdin is not None
        t0 = time.monotonic()
        proc.stdin.close()  # the runner gone: the watch ends what it watches, and exits
        code = proc.wait(timeout=15)
        assert time.monotonic() - t0 < 10 and code != 0, code  # `sleep 30` ended by its SIGTERM, well before 30 s
    finally:
        proc.kill()
        proc.wait()


def test_a_program_too_long_for_one_argument_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(programs, "MAX_TEXT", 1000)
    with pytest.raises(ValueError, match=r"xferbench\.run\.remote_watch with xferbench\.measure\.hoststat is \d+ "):
        programs.program(remote_watch, hoststat)
