"""The exit-code contract of `--xfer-check` (loadgen/README.md), against real servers:

| run                                             | exit |
| ----------------------------------------------- | ---- |
| every check passes, no failed call               | 0    |
| a check fails (local, or on a distributed master) | 3    |
| a check has nothing to measure                   | 3    |
| failed calls, a ratio check that allows them     | 0    |
| failed calls, no check (Locust's own rule)       | 1    |

Failed calls are made real: xferd-go with `--max-chunk=64KiB` refuses every upload of 128 KiB chunks
(invalid_argument), while echo calls succeed.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator

import pytest

from tests.loadgen.support import ROOT, free_port, locust_cmd, run_locust, summary_counts
from tests.support.servers import RunningServer, running_server

RUN_S = 3
BASE = ["--headless", "-r", "4", "-t", f"{RUN_S}s", "--xfer-metrics-port", "0", "--only-summary"]


@pytest.fixture(scope="module")
def strict_server() -> Iterator[RunningServer]:
    with running_server("xferd-go", ["--store=mem", "--max-chunk=64KiB"]) as s:
        yield s


def _locust(server: RunningServer, *args: str) -> subprocess.CompletedProcess[str]:
    return run_locust([*BASE, "--host", server.target("grpc"), "-u", "2", *args], timeout=RUN_S + 60)


def _measured(stderr: str, check: str) -> str:
    m = re.search(rf"xfer-check (PASS|FAIL): {re.escape(check)} \((.*)\)", stderr)
    assert m, stderr[-3000:]
    return f"{m.group(1)} {m.group(2)}"


def test_passing_checks_exit_0_and_print_units(strict_server: RunningServer) -> None:
    r = _locust(strict_server, "--xfer-mix", "echo:1", "--xfer-check", "failures==0,p95<10s,rps>1,cpu<=300%")
    assert r.returncode == 0, r.stderr[-3000:]
    assert re.fullmatch(r"PASS measured \d+ calls", _measured(r.stderr, "failures==0"))
    assert re.fullmatch(r"PASS measured [\d.]+ ms", _measured(r.stderr, "p95<10s"))
    assert re.fullmatch(r"PASS measured [\d.]+ calls/s", _measured(r.stderr, "rps>1"))
    assert re.fullmatch(r"PASS measured \d+\.\d\d cores", _measured(r.stderr, "cpu<=300%"))


def test_failing_latency_check_exits_3_in_milliseconds(strict_server: RunningServer) -> None:
    r = _locust(strict_server, "--xfer-mix", "echo:1", "--xfer-check", "p95<1us")
    assert r.returncode == 3, r.stderr[-3000:]
    verdict = _measured(r.stderr, "p95<1us")
    assert re.fullmatch(r"FAIL measured [\d.]+ ms", verdict), verdict  # the unit printed, not bare seconds


def test_check_with_no_samples_fails(strict_server: RunningServer) -> None:
    r = _locust(strict_server, "--xfer-mix", "echo:1", "--xfer-check", "failures==0,p95(Download)<10s")
    assert r.returncode == 3, r.stderr[-3000:]
    assert "xfer-check FAIL: p95(Download)<10s (no Download calls measured)" in r.stderr
    assert "xfer-check PASS: failures==0" in r.stderr


def test_ratio_check_passes_despite_failures(strict_server: RunningServer) -> None:
    r = _locust(strict_server, "--xfer-mix", "echo:1,upload:1", "--xfer-chunk", "128KiB", "--xfer-sizes", "256KiB",
                "--xfer-check", "failure_ratio<90%")
    assert r.returncode == 0, r.stderr[-3000:]
    assert re.fullmatch(r"PASS measured [\d.]+%", _measured(r.stderr, "failure_ratio<90%"))
    assert "invalid_argument" in r.stderr  # Locust's failure table: the uploads really failed


def test_failures_without_checks_exit_1(strict_server: RunningServer) -> None:
    r = _locust(strict_server, "--xfer-mix", "echo:1,upload:1", "--xfer-chunk", "128KiB", "--xfer-sizes", "256KiB")
    assert r.returncode == 1, r.stderr[-3000:]
    assert "xfer-check" not in r.stderr


def test_failing_check_on_a_distributed_master_exits_3(strict_server: RunningServer) -> None:
    mport = free_port()
    master = subprocess.Popen(
        locust_cmd("--master", "--expect-workers", "1", "--master-bind-host", "127.0.0.1",
                   "--master-bind-port", str(mport), *BASE, "--host", strict_server.target("grpc"), "-u", "2",
                   "--xfer-mix", "echo:1", "--xfer-check", "requests<1"),
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    worker = subprocess.Popen(
        locust_cmd("--worker", "--master-host", "127.0.0.1", "--master-port", str(mport), "--xfer-metrics-port", "0"),
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        _out, err = master.communicate(timeout=RUN_S + 60)
        worker.wait(timeout=30)
    finally:
        for p in (master, worker):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert master.returncode == 3, err[-3000:]
    m = re.search(r"xfer-check FAIL: requests<1 \(measured (\d+) calls\)", err)
    assert m and int(m.group(1)) > 0, err[-3000:]
    # The check judged the workers' calls, the same ones the master's summary counts.
    assert summary_counts(err)["operations"] == int(m.group(1))
