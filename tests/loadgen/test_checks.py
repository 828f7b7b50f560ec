"""The exit-code contract of `--xfer-check` (loadgen/README.md), against real servers:

| run                                             | exit |
| ----------------------------------------------- | ---- |
| every check passes, no failed call               | 0    |
| a check fails (local, or on a distributed master) | 3    |
| a check has nothing to measure                   | 3    |
| failed calls, a ratio check that allows them     | 0    |
| failed calls, no check (Locust's own rule)       | 1    |

Failed calls are made real: xferd-go with `--max-chunk=64KiB` refuses every upload of 128 KiB chunks
(invalid_argument), while echo calls succeed. Each run has such a server of its own and goes through the
session's `runs` (tests/loadgen/harness.py), two at a time.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.loadgen.harness import Runs, in_background, runs_for
from tests.loadgen.support import ROOT, free_port, locust_cmd, run_locust, summary_counts
from tests.support.servers import running_server

RUN_S = 1  # the checks judge whatever the run measured: exit codes and units, never speeds
BASE = ["--headless", "-r", "4", "-t", f"{RUN_S}s", "--xfer-metrics-port", "0", "--only-summary"]
STRICT = ["--store=mem", "--max-chunk=64KiB"]
FAILING_UPLOADS = ["--xfer-mix", "echo:1,upload:1", "--xfer-chunk", "128KiB", "--xfer-sizes", "256KiB"]


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return runs_for(request, tmp_path_factory)


def _locust(*args: str) -> subprocess.CompletedProcess[str]:
    """One Locust process against a strict xferd-go of its own."""
    with running_server("xferd-go", STRICT) as server:
        return run_locust([*BASE, "--host", server.target("grpc"), "-u", "2", *args], timeout=RUN_S + 60)


def _measured(stderr: str, check: str) -> str:
    m = re.search(rf"xfer-check (PASS|FAIL): {re.escape(check)} \((.*)\)", stderr)
    assert m, stderr[-3000:]
    return f"{m.group(1)} {m.group(2)}"


@in_background(lambda tmp: _locust("--xfer-mix", "echo:1", "--xfer-check", "failures==0,p95<10s,rps>1,cpu<=300%"))
def test_passing_checks_exit_0_and_print_units(runs: Runs, request: pytest.FixtureRequest) -> None:
    r = runs[request.node]
    assert r.returncode == 0, r.stderr[-3000:]
    assert re.fullmatch(r"PASS measured \d+ calls", _measured(r.stderr, "failures==0"))
    assert re.fullmatch(r"PASS measured [\d.]+ ms", _measured(r.stderr, "p95<10s"))
    assert re.fullmatch(r"PASS measured [\d.]+ calls/s", _measured(r.stderr, "rps>1"))
    assert re.fullmatch(r"PASS measured \d+\.\d\d cores", _measured(r.stderr, "cpu<=300%"))


@in_background(lambda tmp: _locust("--xfer-mix", "echo:1", "--xfer-check", "p95<1us"))
def test_failing_latency_check_exits_3_in_milliseconds(runs: Runs, request: pytest.FixtureRequest) -> None:
    r = runs[request.node]
    assert r.returncode == 3, r.stderr[-3000:]
    verdict = _measured(r.stderr, "p95<1us")
    assert re.fullmatch(r"FAIL measured [\d.]+ ms", verdict), verdict  # the unit printed, not bare seconds


@in_background(lambda tmp: _locust("--xfer-mix", "echo:1", "--xfer-check", "failures==0,p95(Download)<10s"))
def test_check_with_no_samples_fails(runs: Runs, request: pytest.FixtureRequest) -> None:
    r = runs[request.node]
    assert r.returncode == 3, r.stderr[-3000:]
    assert "xfer-check FAIL: p95(Download)<10s (no Download calls measured)" in r.stderr
    assert "xfer-check PASS: failures==0" in r.stderr


@in_background(lambda tmp: _locust(*FAILING_UPLOADS, "--xfer-check", "failure_ratio<90%"))
def test_ratio_check_passes_despite_failures(runs: Runs, request: pytest.FixtureRequest) -> None:
    r = runs[request.node]
    assert r.returncode == 0, r.stderr[-3000:]
    assert re.fullmatch(r"PASS measured [\d.]+%", _measured(r.stderr, "failure_ratio<90%"))
    assert "invalid_argument" in r.stderr  # Locust's failure table: the uploads really failed


@in_background(lambda tmp: _locust(*FAILING_UPLOADS))
def test_failures_without_checks_exit_1(runs: Runs, request: pytest.FixtureRequest) -> None:
    r = runs[request.node]
    assert r.returncode == 1, r.stderr[-3000:]
    assert "xfer-check" not in r.stderr


def _distributed(tmp: Path) -> tuple[int | None, str]:
    """A master with one worker against a strict xferd-go of its own: the master's exit code and stderr."""
    with running_server("xferd-go", STRICT) as server:
        mport = free_port()
        master = subprocess.Popen(
            locust_cmd("--master", "--expect-workers", "1", "--master-bind-host", "127.0.0.1",
                       "--master-bind-port", str(mport), *BASE, "--host", server.target("grpc"), "-u", "2",
                       "--xfer-mix", "echo:1", "--xfer-check", "requests<1"),
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        worker = subprocess.Popen(
            locust_cmd("--worker", "--master-host", "127.0.0.1", "--master-port", str(mport),
                       "--xfer-metrics-port", "0"),
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        try:
            _out, err = master.communicate(timeout=RUN_S + 60)
            worker.wait(timeout=30)
        finally:
            for p in (master, worker):
                if p.poll() is None:
                    p.kill()
                    p.wait()
    return master.returncode, err


@in_background(_distributed)
def test_failing_check_on_a_distributed_master_exits_3(runs: Runs, request: pytest.FixtureRequest) -> None:
    returncode, err = runs[request.node]
    assert returncode == 3, err[-3000:]
    m = re.search(r"xfer-check FAIL: requests<1 \(measured (\d+) calls\)", err)
    assert m and int(m.group(1)) > 0, err[-3000:]
    # The check judged the workers' calls, the same ones the master's summary counts.
    assert summary_counts(err)["operations"] == int(m.group(1))
