"""SIGINT (Ctrl-C) and SIGTERM to a real `xferbench run`: during a duet, during a capacity search, and a second
Ctrl-C while the runner is cleaning up after the first.

Whatever the phase, the runner must exit with the documented status 130 ("interrupted", README and
`xferbench run --help`), leave no server and no Locust behind, and present nothing partial as complete:
runs.jsonl holds whole JSON lines, the interrupted runs are rows with status "interrupted" and no figures,
experiment.json says `"interrupted": true`, and every report written says "Interrupted".

Each signal is sent once the run is demonstrably in its phase, polled from the run directory and /proc:
both servers of a duet ready and both Locusts running; a capacity search's first step measured and its
second step's Locust running; the server refusing new connections (its listener closes at SIGTERM) while
it lives on, draining calls the test holds in flight, i.e. the runner is inside its cleanup, stopping it.
Nothing sleeps for a fixed time. The loads are long (30 s): a run is always stopped mid-way, never ends."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from py_client import frame as pframe
from tests.support.runs import experiment_file, processes_mentioning, running
from xfer.v1 import frame_pb2
from xferbench.measure.scrape import scrape
from xferbench.run.process import STOP_GRACE_S, parse_ready_line

ROOT = Path(__file__).resolve().parents[2]
PHASE_DEADLINE_S = 120.0  # reaching the phase on a loaded 2-core machine
EXIT_DEADLINE_S = 60.0  # from the (last) signal to the runner's exit
GONE_DEADLINE_S = 10.0  # for children to vanish after the runner exits (the kernel's parent-death SIGKILL)

HEAD = """
[experiment]
name = "{name}"
repeats = 2
warmup_s = 1
duet = {duet}
{pinning}[load]
users = 2
spawn_rate = 2
duration_s = 30
transport = "frame"
"""
OPEN = 'rate = "10"\nmix = "echo:1"\n'
# Unpinned: on a machine that others load, a pinned generator CPU can show no idle time, and the search
# would stop after its first step as "generator-bound"; unpinned, only Locust's own CPU counts.
NO_PINNING = '[pinning]\nmode = "none"\n'
CAPACITY = 'mode = "capacity"\nrate = "10"\nslo_p99 = "1s"\nmix = "echo:1"\n'


def _servers(tmp_path: Path, server: str, axis: str, values: list[str], args: list[str] | None = None) -> str:
    entry = f'[[servers]]\nserver = "{server}"\nlabel = "s"\n'
    if args:
        entry += f"args = {json.dumps(args)}\n"
    return entry + f'[servers.flags]\nstore = "disk:{tmp_path}/store"\n{axis} = {json.dumps(values)}\n'


class Run:
    """A real `python -m xferbench run` in its own process, every descendant it starts recorded."""

    def __init__(self, exp_path: Path, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.out_path = run_dir.parent / "out.txt"
        self.out = open(self.out_path, "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "xferbench", "run", str(exp_path), "--out", str(run_dir)],
                                     cwd=ROOT, stdout=self.out, stderr=subprocess.STDOUT)
        self.seen: dict[int, psutil.Process] = {}
        self.cmdlines: dict[int, str] = {}  # as seen while they ran

    def children(self) -> list[psutil.Process]:
        kids = []
        with contextlib.suppress(psutil.Error):
            kids = psutil.Process(self.proc.pid).children(recursive=True)
        for p in kids:
            self.seen.setdefault(p.pid, p)
            with contextlib.suppress(psutil.Error):  # refreshed: a child seen between fork and exec changes;
                if cmdline := " ".join(p.cmdline()):  # kept: a zombie's (an exited, unreaped child's) is empty
                    self.cmdlines[p.pid] = cmdline
        return kids

    def locusts(self) -> list[psutil.Process]:
        out = []
        for p in self.children():
            with contextlib.suppress(psutil.Error):
                if "locust" in " ".join(p.cmdline()) and running(p):
                    out.append(p)
        return out

    def until(self, cond: Callable[[], bool], what: str, poll_s: float = 0.05) -> None:
        """Polls cond (and records children) until it holds; the runner must not exit first."""
        deadline = time.monotonic() + PHASE_DEADLINE_S
        while not cond():
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=poll_s)  # the poll interval; returns at once if the runner exits
            assert self.proc.poll() is None, f"the runner exited before {what}:\n{self.text()[-3000:]}"
            assert time.monotonic() < deadline, f"never reached: {what}\n{self.text()[-3000:]}"

    def signal(self, sig: int) -> None:
        assert self.proc.poll() is None, "the runner is gone: the signal would land nowhere"
        self.proc.send_signal(sig)

    def finish(self) -> int:
        try:
            code = self.proc.wait(timeout=EXIT_DEADLINE_S)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.out.close()
        return code

    def text(self) -> str:
        if not self.out.closed:
            self.out.flush()
        return self.out_path.read_text(errors="replace")

    def server_ready(self, stem: str, server: str) -> dict[str, str] | None:
        log = self.run_dir / "logs" / f"{stem}.server.log"
        if not log.exists():
            return None
        for line in log.read_text(errors="replace").splitlines():
            if (ready := parse_ready_line(line, server)) is not None:
                return ready
        return None


def _describe(p: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        return f"{p.pid}: {' '.join(p.cmdline())}"
    return f"{p.pid}: gone"


def _check_clean_interruption(run: Run, code: int, tmp_path: Path, cells: list[str], reports: bool = True
                              ) -> list[dict]:
    """The documented end of an interrupted run; returns its rows. `reports=False`: a second Ctrl-C may stop
    the runner before it writes rows or reports; whatever it did write must still say "interrupted"."""
    text = run.text()
    assert code == 130, f"exit status {code}:\n{text[-3000:]}"
    # No server, no Locust left: every descendant the scans saw, and anything naming the store.
    deadline = time.monotonic() + GONE_DEADLINE_S
    while (left := [_describe(p) for p in run.seen.values() if running(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)  # poll interval: the kernel kills the runner's children as it exits
    assert not left, f"left running: {left}"
    assert not processes_mentioning(str(tmp_path)), "orphans left behind"
    assert any("locust" in c for c in run.cmdlines.values()), f"no Locust was seen: {run.cmdlines}"
    # Nothing partial presented as complete.
    lines = (run.run_dir / "runs.jsonl").read_text().splitlines()
    rows = [json.loads(x) for x in lines]  # whole lines only
    assert rows or not reports, "no row was written"
    assert all(r["status"] == "interrupted" for r in rows), [(r["cell"], r["status"], r["error"]) for r in rows]
    assert sorted(r["cell"] for r in rows) == (sorted(cells) if rows else [])
    for r in rows:
        assert r["error"] == "stopped by Ctrl-C / SIGTERM", r
        assert all(r.get(k) is None for k in ("client_qps", "server_qps", "server_cpu_per_request_s", "timeseries",
                                              "capacity_rps", "capacity_status", "capacity_steps")), r
    meta = json.loads((run.run_dir / "experiment.json").read_text())
    assert meta["interrupted"] is True and meta["finished_at"], meta
    assert meta["rounds"] == (1 if rows else 0), meta  # the sweep stopped in its first round
    written = {f: (run.run_dir / f).exists() for f in ("summary.md", "report.html", "summary.csv")}
    if reports:
        assert all(written.values()), written
    if written["summary.md"]:
        assert "**Interrupted**" in (run.run_dir / "summary.md").read_text()
    if written["report.html"]:
        assert "<b>Interrupted</b>" in (run.run_dir / "report.html").read_text()
    if not written["summary.csv"]:
        return rows
    with open(run.run_dir / "summary.csv", encoding="utf-8") as f:
        head, *table = [line.rstrip("\r\n").split(",") for line in f]
    assert len(table) == len(set(cells))
    for line in table:
        row = dict(zip(head, line, strict=True))
        assert (row["runs_ok"], row["runs_failed"]) == ("0", "0"), row
        assert all(v == "" for k, v in row.items() if k.endswith("_center")), row  # no figure from a cut run
    return rows


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_during_a_duet(tmp_path: Path, sig: int) -> None:
    exp_path = tmp_path / "duet.toml"
    exp = experiment_file(exp_path, HEAD.format(name="sigduet", duet="true", pinning="") + OPEN
                          + _servers(tmp_path, "xferd-c", "alloc", ["glibc", "pool"]))
    assert exp.duet and len(exp.cells) == 2
    base, other = exp.cell(exp.baseline), next(c for c in exp.cells if c.name != exp.baseline)
    stems = [f"{c.slug}.r1.with-{other.slug}" for c in (base, other)]
    run = Run(exp_path, tmp_path / "run")
    try:
        # In the duet: both servers printed their ready lines and both Locusts run, at once.
        run.until(lambda: all(run.server_ready(s, "xferd-c") for s in stems) and len(run.locusts()) == 2,
                  "both runs of the duet under load")
        run.signal(sig)
    finally:
        code = run.finish()
    _check_clean_interruption(run, code, tmp_path, [base.name, other.name])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_during_a_capacity_search(tmp_path: Path, sig: int) -> None:
    exp_path = tmp_path / "capacity.toml"
    head = HEAD.format(name="sigcap", duet="false", pinning=NO_PINNING).replace("duration_s = 30", "duration_s = 2")
    exp = experiment_file(exp_path, head + CAPACITY + _servers(tmp_path, "xferd-go", "pool", ["on"]))
    (cell,) = exp.cells
    assert cell.load.mode == "capacity"
    stem = f"{cell.slug}.r1"
    run = Run(exp_path, tmp_path / "run")
    try:
        # Mid-search: the first step measured (its series written), the second step's Locust running.
        run.until(lambda: (run.run_dir / "timeseries" / f"{stem}.step1.csv").exists()
                  and (run.run_dir / "logs" / f"{stem}.step2.locust.log").exists() and len(run.locusts()) == 1,
                  "the capacity search's second step")
        run.signal(sig)
    finally:
        code = run.finish()
    _check_clean_interruption(run, code, tmp_path, [cell.name])


def _refuses(addr: str) -> bool:
    host, port = addr.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return False
    except ConnectionRefusedError:
        return True


def test_second_ctrl_c_during_cleanup(tmp_path: Path) -> None:
    """The runner's cleanup made long and visible: the server holds calls whose answers the test does not
    read, so at the runner's SIGTERM it closes its listener and drains (--drain-timeout 60 s, longer than
    the runner's STOP_GRACE_S). The second Ctrl-C lands while the runner waits for that server."""
    exp_path = tmp_path / "twice.toml"
    head = HEAD.format(name="sigtwice", duet="false", pinning="").replace("repeats = 2", "repeats = 1")
    exp = experiment_file(exp_path, head + OPEN + _servers(tmp_path, "xferd-go", "pool", ["on"],
                                                           ["--drain-timeout=60s", "--write-timeout=120s"]))
    (cell,) = exp.cells
    stem = f"{cell.slug}.r1"
    run = Run(exp_path, tmp_path / "run")
    held: socket.socket | None = None
    try:
        run.until(lambda: run.server_ready(stem, "xferd-go") is not None and len(run.locusts()) == 1,
                  "the run under load")
        ready = run.server_ready(stem, "xferd-go")
        assert ready is not None
        (server_pid,) = [p.pid for p in run.children() if p.name() == "xferd-go"]
        # Calls in flight: 16 pipelined Reads of 4 MiB whose answers are never read (64 MiB: more than the
        # socket buffers hold), so the server cannot finish them.
        host, port = ready["frame"].rsplit(":", 1)
        held = socket.create_connection((host, int(port)), timeout=10)
        held.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
        for k in range(16):
            body = frame_pb2.ReadRequest(name=f"gen:{64 << 20}:1", offset=k * (4 << 20), length=4 << 20)
            held.sendall(pframe.encode_request(k + 1, "Xfer.Read", body.SerializeToString()))

        def inflight() -> bool:
            snap = scrape(f"http://{ready['metrics']}/metrics", timeout=2)
            return snap is not None and (snap.sum("xfer_inflight_requests") or 0) >= 1

        run.until(inflight, "a Read in flight on the server")
        t_first = time.monotonic()
        run.signal(signal.SIGINT)
        # Cleanup under way: the runner stopped Locust and sent the server SIGTERM (its listener is closed),
        # and is waiting for it; the server lives on, draining the held calls.
        run.until(lambda: not run.locusts() and _refuses(ready["frame"]) and psutil.pid_exists(server_pid)
                  and running(psutil.Process(server_pid)), "the runner stopping the draining server")
        t_second = time.monotonic()
        run.signal(signal.SIGINT)
    finally:
        code = run.finish()
    t_exit = time.monotonic()
    _check_clean_interruption(run, code, tmp_path, [cell.name])
    # The second Ctrl-C was obeyed: had the runner ignored it, it would have waited out its grace for the
    # draining server (STOP_GRACE_S from its SIGTERM, which followed the first Ctrl-C) before exiting.
    assert t_exit < t_first + STOP_GRACE_S, (
        f"the runner exited {t_exit - t_first:.1f} s after the first Ctrl-C and {t_exit - t_second:.1f} s after the "
        f"second: it waited out its {STOP_GRACE_S:g} s grace for the server")
    # The server went with the runner: the held connection is closed, its calls never answered in full.
    assert held is not None
    held.settimeout(GONE_DEADLINE_S)
    with contextlib.suppress(ConnectionResetError):
        while held.recv(1 << 20):
            pass
    held.close()


def test_second_ctrl_c_during_a_duets_cleanup(tmp_path: Path) -> None:
    """The first Ctrl-C during a duet kills both runs' processes at once (runner.kill_everything) and the
    runner then waits for the duet's threads; the duet's rows are written only after. The second Ctrl-C is
    sent the moment one of the duet's servers is seen dead (a pidfd wakes the test) while no row is written
    yet: the runner is inside that cleanup. This window is short (a fraction of a second); if the test loses
    the race the signal lands later in the cleanup, and every check below holds for any landing point."""
    exp_path = tmp_path / "duet.toml"
    exp = experiment_file(exp_path, HEAD.format(name="sigduet2", duet="true", pinning="") + OPEN
                          + _servers(tmp_path, "xferd-c", "alloc", ["glibc", "pool"]))
    base, other = exp.cell(exp.baseline), next(c for c in exp.cells if c.name != exp.baseline)
    stems = [f"{c.slug}.r1.with-{other.slug}" for c in (base, other)]
    run = Run(exp_path, tmp_path / "run")
    fds: list[int] = []
    try:
        run.until(lambda: all(run.server_ready(s, "xferd-c") for s in stems) and len(run.locusts()) == 2,
                  "both runs of the duet under load")
        servers = [p.pid for p in run.children() if p.name() == "xferd-c"]
        assert len(servers) == 2, run.cmdlines
        fds = [os.pidfd_open(pid) for pid in servers]
        run.signal(signal.SIGINT)
        ready, _, _ = select.select(fds, [], [], PHASE_DEADLINE_S)  # readable once that process has ended
        assert ready, "the first Ctrl-C did not stop the duet's servers"
        rows_before = (run.run_dir / "runs.jsonl").read_text()
        run.signal(signal.SIGINT)
    finally:
        for fd in fds:
            os.close(fd)
        code = run.finish()
    print(f"second Ctrl-C {'inside' if rows_before == '' else 'after'} the duet's cleanup")
    _check_clean_interruption(run, code, tmp_path, [base.name, other.name], reports=False)

