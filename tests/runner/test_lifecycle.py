"""The sweep's process lifecycle with stand-in servers (deterministic, independent of the real servers'
speed): a server dying mid-cell or failing to start fails only its cell, with its stderr tail; Ctrl-C stops
cleanly and still writes what was measured; no process is ever left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import psutil

from tests.runner.conftest import FAKE_LOADGEN, make_fake_binaries, processes_mentioning
from xferbench import experiment as xe
from xferbench import report, runner
from xferbench.process import live_pids

ROOT = Path(__file__).resolve().parents[2]


def fake_experiment(bins: dict[str, Path], duration: float = 2, repeats: int = 1) -> str:
    return f"""
[experiment]
name = "fake"
repeats = {repeats}
warmup_s = 1
[load]
users = 2
duration_s = {duration}
transport = "frame"
[[servers]]
server = "xferd-go"
binary = "{bins["xferd-go"]}"
[servers.flags]
pool = ["on", "off"]
[[servers]]
server = "xferd-c"
label = "dies"
binary = "{bins["xferd-c"]}"
[servers.env]
FAKE_DIE_AFTER = "1.5"
[[servers]]
server = "xferd-c"
label = "nostart"
binary = "{bins["xferd-c"]}"
[servers.env]
FAKE_FAIL_START = "1"
"""


def test_dead_server_fails_its_cell_only(tmp_path: Path, fake_env: dict[str, Path]) -> None:
    exp = xe.parse(tomllib.loads(fake_experiment(fake_env)), "fake.toml", "fake")
    run_dir = tmp_path / "run"
    res = runner.sweep(exp, run_dir)
    s = report.write_all(run_dir)
    by = {r["cell"]: r for r in res.rows}
    assert set(by) == {"go/frame/pool=on", "go/frame/pool=off", "dies/frame", "nostart/frame"}
    for name in ("go/frame/pool=on", "go/frame/pool=off"):
        assert by[name]["status"] == "ok" and by[name]["client_qps"] > 0 and by[name]["server_qps"] > 0
    dead = by["dies/frame"]
    assert dead["status"] == "failed" and "exited with status 3 during the run" in dead["error"]
    assert any("fake crash" in line for line in dead["stderr_tail"])
    nostart = by["nostart/frame"]
    assert nostart["status"] == "failed" and "before it was ready" in nostart["error"]
    assert any("fake failure" in line for line in nostart["stderr_tail"])
    for f in ("runs.jsonl", "summary.csv", "summary.md", "report.html", "experiment.json"):
        assert (run_dir / f).stat().st_size > 0
    assert "dies/frame" in (run_dir / "summary.md").read_text()
    assert {c.name: c.n_failed for c in s.cells}["dies/frame"] == 1
    assert not live_pids()
    assert not psutil.Process().children(recursive=True)
    assert not processes_mentioning(str(tmp_path))


def test_ctrl_c_stops_cleanly_and_writes_what_was_measured(tmp_path: Path) -> None:
    bins = make_fake_binaries(tmp_path)
    exp_path = tmp_path / "fake.toml"
    exp_path.write_text(fake_experiment(bins, duration=3, repeats=3))
    run_dir = tmp_path / "run"
    env = {**os.environ, "XFERBENCH_LOADGEN": str(FAKE_LOADGEN)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "xferbench", "run", str(exp_path), "--out", str(run_dir)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        # Poll (bounded) until the first row is written and the second run's server is up.
        deadline = time.monotonic() + 60
        rows = run_dir / "runs.jsonl"
        while time.monotonic() < deadline:
            if rows.exists() and rows.read_text().count("\n") >= 1 and processes_mentioning(str(tmp_path)):
                break
            try:
                proc.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                pass
        assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = out.decode(errors="replace")
    assert proc.returncode == 130, text
    lines = [json.loads(x) for x in rows.read_text().splitlines()]
    assert lines[0]["status"] == "ok" and lines[-1]["status"] == "interrupted"
    assert len(lines) < 12
    assert (run_dir / "report.html").exists() and "Interrupted" in (run_dir / "summary.md").read_text()
    assert not processes_mentioning(str(tmp_path)), "orphans left behind"
    assert not processes_mentioning(f"-f {FAKE_LOADGEN}")


def test_pinning_and_process_group() -> None:
    from xferbench.process import spawn, stop

    p = spawn(["sleep", "30"], cpus=[0])
    try:
        assert os.sched_getaffinity(p.pid) == {0}
        assert os.getpgid(p.pid) == p.pid  # its own group: the terminal's Ctrl-C does not reach it
    finally:
        assert stop(p, grace_s=5) == -signal.SIGTERM
    assert p.pid not in live_pids()


def test_metrics_source_error_fails_only_that_run(tmp_path: Path, fake_env: dict[str, Path]) -> None:
    from xferbench.sources import ScrapeSource

    class Broken(ScrapeSource):
        calls = 0

        def begin(self, metrics_addr: str, labels: dict[str, str]) -> None:
            Broken.calls += 1
            if Broken.calls == 1:
                raise RuntimeError("Prometheus is down")
            super().begin(metrics_addr, labels)

    exp = xe.parse(tomllib.loads(fake_experiment(fake_env)), "fake.toml", "fake")
    exp = xe.Experiment(exp.name, "", None, 1, 1.0, exp.baseline, exp.pinning, exp.cells[:2])
    res = runner.sweep(exp, tmp_path / "run", source=Broken())
    assert [r["status"] for r in res.rows] == ["failed", "ok"]
    assert "RuntimeError: Prometheus is down" in res.rows[0]["error"]
    assert not processes_mentioning(str(tmp_path))
