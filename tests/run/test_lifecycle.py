"""The sweep's process lifecycle with the real servers (build/bin/xferd-go, build/bin/xferd-c) under the real
loadgen/ locustfile: a server killed mid-cell or failing to start fails only its cell, with its stderr tail;
a metrics source that cannot answer fails only its run; Ctrl-C stops cleanly and still writes what was
measured; children are pinned and in their own process groups; no process is ever left behind.

Missing binaries (or a missing Prometheus, which scripts/bootstrap.sh installs) are failures, not skips.
Every wait is bounded and polls something real (a file, a process, a port, /metrics); none sleeps for a
fixed time in place of readiness."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import yaml

from tests.support.runs import experiment_file, processes_mentioning, running, stray_children
from xferbench.analysis.row import RunRow
from xferbench.config.servers import SERVERS
from xferbench.measure.scrape import scrape
from xferbench.measure.sources import PromQLSource
from xferbench.measure.targets import FileSDRegistry
from xferbench.report import artifacts
from xferbench.run import sweep
from xferbench.run.matrix import Run, schedule
from xferbench.run.process import Server, live_pids, parse_ready_line
from xferbench.run.progress_protocol import NullProgress
from xferbench.tools import stack

ROOT = Path(__file__).resolve().parents[2]
GEN_CPU = (os.cpu_count() or 1) - 1  # the generator's CPU; the server gets CPU 0


def _experiment_head(name: str, repeats: int) -> str:
    """The [experiment] and [load] tables of every experiment here: 1 s of warm-up, then 2 s of a small mixed
    load over the frame transport."""
    return f"""
[experiment]
name = "{name}"
repeats = {repeats}
warmup_s = 1
[load]
users = 2
spawn_rate = 2
duration_s = 2
mix = "upload:1,download:1,echo:2"
sizes = "64KiB"
chunk = "16KiB"
transport = "frame"
"""


def _disk_server(tmp_path: Path, server: str, label: str, *args: str, load: str = "") -> str:
    """A [[servers]] entry for the experiment TOML, its disk store in a folder of its own (named after the
    label) under tmp_path; load, if given, is its [servers.load] table's body."""
    entry = f'[[servers]]\nserver = "{server}"\nlabel = "{label}"\n'
    if args:
        entry += f"args = {json.dumps(list(args))}\n"
    entry += f'[servers.flags]\nstore = "disk:{tmp_path}/store-{label}"\n'
    return entry + (f"[servers.load]\n{load}\n" if load else "")


def _row_pids(rows: list[RunRow]) -> list[int]:
    return [pid for r in rows for pid in (r.pids or {}).values()]


def _gone(pids: list[int]) -> list[int]:
    """The pids that are still running (the runner reaps its children, so a reaped pid is gone)."""
    alive = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
    return alive


class Watch(NullProgress):
    """Progress hook, called by the runner about once a second while a run's load is on. At each run's first
    call it records, for every child the runner has live, its CPU affinity, process group, session and name.
    In the victim cell, once the client has counted completed requests and the server's own /metrics counts
    requests too, it SIGKILLs the real server."""

    def __init__(self, run_dir: Path, victim: str) -> None:
        self.run_dir = run_dir
        self.victim = victim
        self.seen: dict[str, dict[int, tuple[set[int], int, int, str]]] = {}
        self.killed: dict[str, int] = {}
        self.server_requests_at_kill: float | None = None

    def live(self, run: Run, elapsed: float, total: float, qps: float | None, p95: float | None) -> None:
        name = run.cell.name
        if name not in self.seen:
            info = {}
            for pid in live_pids():
                with contextlib.suppress(OSError, psutil.Error):
                    info[pid] = (os.sched_getaffinity(pid), os.getpgid(pid), os.getsid(pid), psutil.Process(pid).name())
            self.seen[name] = info
        if name != self.victim or name in self.killed or not qps:
            return
        log = self.run_dir / "logs" / f"{run.cell.slug}.r{run.repeat}.server.log"
        ready = parse_ready_line(log.read_text().splitlines()[0], run.cell.server)
        assert ready is not None, log.read_text()
        snap = scrape(f"http://{ready['metrics']}/metrics", timeout=2)
        served = snap.sum("xfer_requests_total") if snap is not None else None
        if not served:
            return  # not yet counted by the server: try at the next tick
        (pid,) = [p for p, v in self.seen[name].items() if v[3] == run.cell.server]
        self.server_requests_at_kill = served
        os.kill(pid, signal.SIGKILL)
        self.killed[name] = pid


def test_failing_cells_fail_alone(tmp_path: Path) -> None:
    """Four cells of real servers: xferd-c SIGKILLed under load, xferd-c refusing a flag value, xferd-go whose
    frame port the test holds, and a healthy xferd-go; only the healthy one succeeds, every failure carries
    its cause and the server's own words, and the sweep writes every artifact."""
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    busy_addr = f"127.0.0.1:{busy.getsockname()[1]}"
    servers = [
        # 20 s is an upper bound for the victim: its run ends when the kill is noticed, at the tick after it
        _disk_server(tmp_path, "xferd-c", "dies", load="duration_s = 20"),
        _disk_server(tmp_path, "xferd-c", "badflag", "--alloc=nope"),
        _disk_server(tmp_path, "xferd-go", "portbusy", f"--frame-addr={busy_addr}"),
        _disk_server(tmp_path, "xferd-go", "ok"),
    ]
    exp = experiment_file(
        tmp_path / "lifecycle.toml",
        _experiment_head("lifecycle", 1) + f"""
[pinning]
server = [0]
generator = [{GEN_CPU}]
{"".join(servers)}""",
    )
    run_dir = tmp_path / "run"
    watch = Watch(run_dir, victim="dies/frame")
    before = set(live_pids())
    try:
        res = sweep.sweep(exp, run_dir, progress=watch)
    finally:
        busy.close()
    s = artifacts.write_all(run_dir)
    by = {r.cell: r for r in res.rows}
    assert sorted(by) == sorted(["dies/frame", "badflag/frame", "portbusy/frame", "ok/frame"])

    dead = by["dies/frame"]
    assert watch.killed, f"the server was never seen serving: {dead}"
    assert watch.server_requests_at_kill and watch.server_requests_at_kill > 0
    assert dead.status == "failed", dead
    assert dead.error and "xferd-c exited with status -9 during the run" in dead.error
    assert dead.pids and dead.pids["server"] == watch.killed["dies/frame"]
    assert any(line.startswith("xferd-c ready ") for line in dead.stderr_tail or []), dead.stderr_tail
    assert dead.timeseries and (run_dir / dead.timeseries).stat().st_size > 0  # what was measured before the death is kept

    badflag = by["badflag/frame"]
    assert badflag.status == "failed" and badflag.ready is None
    assert badflag.error and "xferd-c exited with status 2 before it was ready" in badflag.error, badflag
    assert any("xferd-c: error: --alloc nope" in line for line in badflag.stderr_tail or []), badflag.stderr_tail

    portbusy = by["portbusy/frame"]
    assert portbusy.status == "failed" and portbusy.ready is None
    assert portbusy.error and "xferd-go exited with status 1 before it was ready" in portbusy.error, portbusy
    assert any(busy_addr in line and "address already in use" in line for line in portbusy.stderr_tail or []), (
        portbusy.stderr_tail
    )

    ok = by["ok/frame"]
    assert ok.status == "ok", (ok.error, ok.stderr_tail)
    assert (ok.client_qps or 0) > 0 and (ok.server_qps or 0) > 0 and (ok.rss_peak_bytes or 0) > 0
    assert not [w for w in ok.warnings if "exited with status" in w], ok.warnings

    # Pinning and process groups, as seen while each cell's load was on.
    for cell in ("dies/frame", "ok/frame"):
        seen = watch.seen[cell]
        pids = by[cell].pids or {}
        assert seen[pids["server"]][:3] == ({0}, pids["server"], pids["server"]), seen
        assert seen[pids["locust"]][:3] == ({GEN_CPU}, pids["locust"], pids["locust"]), seen

    for f in ("runs.jsonl", "summary.csv", "summary.md", "report.html", "experiment.json"):
        assert (run_dir / f).stat().st_size > 0, f
    md = (run_dir / "summary.md").read_text()
    assert all(f"`{name}`" in md for name in by), md
    assert {c.name: c.n_failed for c in s.cells} == {
        "dies/frame": 1,
        "badflag/frame": 1,
        "portbusy/frame": 1,
        "ok/frame": 0,
    }

    assert len(_row_pids(res.rows)) == 4  # server + locust of the two cells whose server started
    assert not _gone(_row_pids(res.rows)), "processes left behind"
    assert set(live_pids()) <= before
    assert not stray_children()
    assert not processes_mentioning(str(tmp_path)), "orphans left behind"


def test_metrics_source_error_fails_only_that_run(tmp_path: Path) -> None:
    """Server figures through PromQL from a real Prometheus that is down for the first run (its address is a
    bound socket that does not listen: connections are refused) and up from the second run on. The first
    run fails with the source's error and leaves no scrape target behind; the second succeeds."""
    stack.prometheus_binary()  # a missing Prometheus is a failure (scripts/bootstrap.sh installs it)
    exp = experiment_file(
        tmp_path / "promdown.toml",
        _experiment_head("promdown", 2) + f"""
[[servers]]
server = "xferd-go"
[servers.flags]
store = "disk:{tmp_path}/store"
""",
    )
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # holds the port; never listens
    listen = f"127.0.0.1:{closed.getsockname()[1]}"
    wd = tmp_path / "prom"
    targets = wd / "targets"
    targets.mkdir(parents=True)
    services: dict[str, list[str]] = {"xferd-go": [], "xferd-c": [], "locust-master": [], "locust-worker": []}
    cfg = stack.local_config(services=services, prometheus_addr=listen, targets_dir=targets, scrape_interval="1s")
    (wd / "prometheus.yml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    source = PromQLSource(f"http://{listen}", register=FileSDRegistry(targets))

    proms: list[stack.Prometheus] = []
    left_after_first: list[str] = []

    def on_row(row: RunRow) -> None:
        if proms:
            return
        left_after_first.extend(sorted(p.name for p in targets.iterdir()))
        closed.close()  # Prometheus comes up, on the address the source was given, between the two runs
        proms.append(stack.start_prometheus(wd / "prometheus.yml", wd / "data", listen, wd / "prometheus.log"))

    try:
        res = sweep.sweep(exp, tmp_path / "run", source=source, on_row=on_row)
    finally:
        closed.close()
        for p in proms:
            p.stop()
    first, second = res.rows
    assert first.status == "failed", first
    assert first.error and first.error.startswith(f"PromQLError: Prometheus at http://{listen}: "), first.error
    assert "Connection refused" in first.error, first.error
    assert first.ready is not None and first.pids and "locust" not in first.pids  # the server was up; no load started
    assert left_after_first == [], "the failed run left its scrape target registered"
    assert second.status == "ok", (second.error, second.stderr_tail)
    assert second.source == "promql" and (second.server_qps or 0) > 0
    assert second.scrape_check and second.scrape_check["server_qps"] > 0  # the built-in scraper ran alongside
    assert list(targets.iterdir()) == []
    assert not _gone(_row_pids(res.rows)), "processes left behind"
    assert not processes_mentioning(str(tmp_path)), "orphans left behind"


def test_ctrl_c_stops_cleanly_and_writes_what_was_measured(tmp_path: Path) -> None:
    """SIGINT to a real `xferbench run` once the first run's row is written and the second run's server and
    Locust are up: exit status 130, the measured row and an `interrupted` row written, the report rendered,
    the rest of the sweep not run, and every process the run started gone."""
    exp_path = tmp_path / "ctrlc.toml"
    exp = experiment_file(
        exp_path,
        _experiment_head("ctrlc", 2) + f"""
[[servers]]
server = "xferd-go"
[servers.flags]
pool = ["on", "off"]
store = "disk:{tmp_path}/store"
""",
    )
    assert len(exp.cells) * exp.repeats == 4
    run_dir = tmp_path / "run"
    rows = run_dir / "runs.jsonl"
    second_cell = schedule(exp)[1].cell  # rounds run in a seeded shuffled order
    second = f"{second_cell.slug}.r1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "xferbench", "run", str(exp_path), "--out", str(run_dir)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    seen: dict[int, psutil.Process] = {}

    def second_run_under_way() -> bool:
        """Records the run's children (a /proc scan); true once the first row is written, the second run's
        server has printed its ready line, and a Locust is among the children."""
        with contextlib.suppress(psutil.Error):
            for p in psutil.Process(proc.pid).children(recursive=True):
                seen.setdefault(p.pid, p)
        if not rows.exists() or rows.read_text().count("\n") < 1:
            return False
        log = run_dir / "logs" / f"{second}.server.log"
        if not log.exists() or "xferd-go ready " not in log.read_text():
            return False
        with contextlib.suppress(psutil.Error):
            return any("locust" in " ".join(p.cmdline()) for p in psutil.Process(proc.pid).children(recursive=True))
        return False

    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not second_run_under_way():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.05)  # bounded poll interval; returns at once if the run exits early
            assert proc.poll() is None, proc.communicate()[0].decode(errors="replace")
        assert second_run_under_way(), "the second run never started"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = out.decode(errors="replace")
    assert proc.returncode == 130, text
    lines = [json.loads(x) for x in rows.read_text().splitlines()]
    assert [r["status"] for r in lines] == ["ok", "interrupted"], [(r["status"], r["error"]) for r in lines]
    assert lines[0]["client_qps"] > 0 and lines[0]["server_qps"] > 0
    assert lines[1]["cell"] == second_cell.name and "stopped by Ctrl-C" in lines[1]["error"]
    assert json.loads((run_dir / "experiment.json").read_text())["interrupted"] is True
    assert (run_dir / "report.html").stat().st_size > 0 and (run_dir / "summary.csv").stat().st_size > 0
    assert "Interrupted" in (run_dir / "summary.md").read_text()
    assert "report.html" in text
    names = {p.name() for p in seen.values() if running(p)}
    assert not names, f"left running after Ctrl-C: {names}"
    # The scan saw what it checks: the first run's server and Locust, and the second run's too.
    assert lines[0]["pids"]["server"] in seen and lines[0]["pids"]["locust"] in seen, (lines[0]["pids"], seen)
    assert len(seen) >= 4, seen
    assert not processes_mentioning(str(tmp_path)), "orphans left behind"


def test_server_process_pinned_in_its_own_group() -> None:
    """The runner's Server on the real xferd-c: pinned, its own session and process group (the terminal's
    Ctrl-C does not reach it; the runner stops it), registered while it lives, exit 0 on the group SIGTERM."""
    spec = SERVERS["xferd-c"]
    binary = os.environ.get(spec.binary_env) or str(ROOT / "build" / "bin" / spec.name)
    assert Path(binary).exists(), f"{binary} is not built: run `make build`"
    s = Server(spec.name, [binary, *spec.port0_flags, "--store=mem"], dict(os.environ), cpus=[0])
    pid = s.proc.pid
    try:
        assert s.ready_line.startswith("xferd-c ready ") and s.ready["store"] == "mem"
        assert os.sched_getaffinity(pid) == {0}
        assert os.getpgid(pid) == pid and os.getsid(pid) == pid != os.getsid(0)
        assert pid in live_pids()
        snap = scrape(f"http://{s.addr('metrics')}/metrics", timeout=2)
        assert snap is not None and snap.label_values("xfer_build_info")["server"] == "xferd-c"
    finally:
        code = s.stop()
    assert code == 0, list(s.tail)
    assert s.stop() == 0  # a second stop only reports
    assert pid not in live_pids() and not s.alive()
