"""gRPC users on the grpc.aio loop thread (several calls in flight per user) against a real xferd-go: every
call the server answered is one request in Locust's statistics with its own timing, and a call that failed is
one failure with its status code. Each run has an xferd-go of its own (what it answered is what that run
asked) and goes through the session's `runs` (tests/loadgen/harness.py), two at a time.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.loadgen.harness import Runs, in_background, runs_for
from tests.loadgen.support import ROOT, Sample, fetch, parse_prom, run_locust, settled_metrics, total
from tests.support.servers import running_server

# Every check below is a count or a sum over the same calls: a second of calls is as telling as more.
RUN_S = 1
COMMON = ["--headless", "--xfer-metrics-port", "0", "--json", "-t", f"{RUN_S}s"]
MAX_CALL_MS = 4000  # the bound this test kept with 4 s runs: a call time in the wrong unit (us, ns) exceeds it


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return runs_for(request, tmp_path_factory)


@dataclass
class Run:
    """One Locust process against an xferd-go of its own."""

    proc: subprocess.CompletedProcess[str]
    served: dict[str, float]  # calls the server answered during the run, per "method" or "method code"
    dumps: list[str]  # the client's metrics, dumped at exit (one file expected)

    def checked(self, rc: int = 0) -> tuple[dict[str, dict[str, Any]], list[Sample], str]:
        """Its --json stats by name, its client metrics dumped at exit and its stderr (Locust's tables),
        once its exit code is seen to be `rc`."""
        assert self.proc.returncode == rc, self.proc.stderr[-3000:]
        (dump,) = self.dumps
        return {e["name"]: e for e in json.loads(self.proc.stdout)}, parse_prom(dump), self.proc.stderr


def _served(samples: list[Sample], method: str, code: str | None = None) -> float:
    labels = {"transport": "grpc", "method": method, **({"code": code} if code else {})}
    return total(samples, "xfer_requests_total", **labels)


def _run(tmp: Path, server_args: list[str], counted: list[tuple[str, str | None]], *args: str) -> Run:
    """Runs one Locust process against a new xferd-go; counts what the server answered meanwhile of each
    (method, code) in `counted`."""
    with running_server("xferd-go", ["--store=mem", *server_args]) as server:
        before = parse_prom(fetch(server.metrics_url))  # no client knows this server yet
        r = run_locust([*COMMON, "--host", server.target("grpc"), "--xfer-metrics-dump", str(tmp), *args],
                       timeout=RUN_S + 60)
        after = settled_metrics(server.metrics_url)
    served = {" ".join(filter(None, mc)): _served(after, *mc) - _served(before, *mc) for mc in counted}
    return Run(r, served, [p.read_text() for p in tmp.glob("local-*.prom")])


@pytest.mark.parametrize("inflight", ["1", "8"])
@in_background(lambda tmp, inflight: _run(
    tmp, [], [("Echo", None)], "-u", "6", "-r", "6", "--xfer-mix", "echo:1", "--xfer-grpc-inflight", inflight))
def test_echo_requests_equal_server_calls(runs: Runs, request: pytest.FixtureRequest, inflight: str) -> None:
    run = runs[request.node]
    stats, client, _err = run.checked()
    grown = run.served["Echo"]
    echo = stats["Echo"]
    n = int(echo["num_requests"])
    assert n == grown > 0, (n, grown)  # a stopping user waits for its calls in flight and reports them
    assert echo["num_failures"] == 0
    # Each call's own time went to Locust and to the client histogram alike: the same sum over the same calls.
    assert total(client, "xfer_client_request_duration_seconds_count", method="Echo") == n
    client_sum = total(client, "xfer_client_request_duration_seconds_sum", method="Echo")
    assert math.isclose(float(echo["total_response_time"]) / 1000.0, client_sum, rel_tol=1e-6), client_sum
    assert 0 < float(echo["min_response_time"]) <= float(echo["max_response_time"]) < MAX_CALL_MS


@in_background(lambda tmp: _run(tmp, ["--max-chunk", "1024"], [("Echo", "invalid_argument")],
                                "-u", "4", "-r", "4", "--xfer-mix", "echo:1", "--xfer-echo-size", "2KiB"))
def test_echo_failures_counted_per_call_with_code(runs: Runs, request: pytest.FixtureRequest) -> None:
    run = runs[request.node]
    stats, client, err = run.checked(rc=1)  # Locust's exit code when calls failed
    refused = run.served["Echo invalid_argument"]
    echo = stats["Echo"]
    assert echo["num_requests"] == echo["num_failures"] == refused > 0, (echo, refused)
    assert total(client, "xfer_client_requests_total", method="Echo", code="invalid_argument") == refused
    # Locust's error report: each failure under its status code and the server's own message
    report = re.findall(r"^\s*(\d+)\s+grpc Echo: (\w+): (.*?)\s*$", err, re.M)
    assert report == [(str(int(refused)), "invalid_argument", "payload length 2048 exceeds limit 1024")], err[-2000:]


@in_background(lambda tmp: _run(tmp, [], [("Upload", None), ("Download", None)],
                                "-u", "4", "-r", "4", "--xfer-mix", "upload:1,download:1",
                                "--xfer-sizes", "100KiB,1MiB,3000000", "--xfer-chunk", "64KiB",
                                "--xfer-grpc-inflight", "3"))
def test_streams_in_flight_verified(runs: Runs, request: pytest.FixtureRequest) -> None:
    """Uploads and downloads, 3 of each user's in flight at once, chunk by chunk: every CRC-32 checked."""
    run = runs[request.node]
    stats, client, _err = run.checked()
    for method in ("Upload", "Download"):
        assert stats[method]["num_requests"] == run.served[method] > 0, method
        assert stats[method]["num_failures"] == 0, method
        assert total(client, "xfer_client_verifications_total", method=method, result="ok") == stats[method]["num_requests"]
        assert total(client, "xfer_client_verifications_total", method=method, result="mismatch") == 0
        chunks = total(client, "xfer_client_requests_total", method=f"{method}Chunk")
        assert chunks >= float(stats[method]["num_requests"])


ONE_LOOP = """
import locust  # gevent's monkey-patching, as in every Locust process
import asyncio, threading
import gevent
from loadgen import _aioloop

async def where():
    await asyncio.sleep(0)
    return _aioloop.loop_thread().threading.get_ident()

starts = [gevent.spawn(_aioloop.loop_thread) for _ in range(20)]  # users starting together
gevent.joinall(starts, timeout=30, raise_error=True)
loops = {id(g.value) for g in starts}
ran_on = _aioloop.loop_thread().call(where, 10)
print(len(loops), ran_on != _aioloop.loop_thread().threading.get_ident())
"""


@in_background(lambda tmp: subprocess.run([sys.executable, "-c", ONE_LOOP], cwd=ROOT, capture_output=True, text=True,
                                         timeout=60))
def test_one_loop_thread_per_process(runs: Runs, request: pytest.FixtureRequest) -> None:
    """Users starting at the same moment share one loop, and a coroutine runs on the loop's own OS thread."""
    r = runs[request.node]
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["1", "True"], r.stdout + r.stderr[-2000:]
