"""gRPC users on the grpc.aio loop thread (--xfer-grpc-engine aio, several calls in flight per user) against a real
xferd-go: every call the server answered is one request in Locust's statistics with its own timing, and a call
that failed is one failure with its status code.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.loadgen.support import ROOT, Sample, parse_prom, run_locust, settled_metrics, total
from tests.support.servers import RunningServer, running_server

RUN_S = 4
COMMON = ["--headless", "--xfer-metrics-port", "0", "--json", "-t", f"{RUN_S}s"]


@pytest.fixture(scope="module")
def go_server() -> Iterator[RunningServer]:
    with running_server("xferd-go", ["--store=mem"]) as s:
        yield s


@pytest.fixture(scope="module")
def small_chunk_server() -> Iterator[RunningServer]:
    with running_server("xferd-go", ["--store=mem", "--max-chunk", "1024"]) as s:
        yield s


def _served(server: RunningServer, method: str, code: str | None = None) -> float:
    labels = {"transport": "grpc", "method": method, **({"code": code} if code else {})}
    return total(settled_metrics(server.metrics_url), "xfer_requests_total", **labels)


def _locust(server: RunningServer, tmp_path: Path, *args: str, rc: int = 0,
            ) -> tuple[dict[str, dict[str, object]], list[Sample], str]:
    """Runs one Locust process; returns its --json stats by name, its client metrics dumped at exit and its
    stderr (Locust's tables)."""
    r = run_locust([*COMMON, "--host", server.target("grpc"), "--xfer-metrics-dump", str(tmp_path), *args],
                   timeout=RUN_S + 60)
    assert r.returncode == rc, r.stderr[-3000:]
    (dump,) = tmp_path.glob("local-*.prom")
    return {e["name"]: e for e in json.loads(r.stdout)}, parse_prom(dump.read_text()), r.stderr


@pytest.mark.parametrize("engine,inflight", [("aio", "1"), ("aio", "8"), ("gevent", "1")])
def test_echo_requests_equal_server_calls(go_server: RunningServer, tmp_path: Path, engine: str,
                                          inflight: str) -> None:
    before = _served(go_server, "Echo")
    stats, client, _err = _locust(go_server, tmp_path, "-u", "6", "-r", "6", "--xfer-mix", "echo:1",
                            "--xfer-grpc-engine", engine, "--xfer-grpc-inflight", inflight)
    grown = _served(go_server, "Echo") - before
    echo = stats["Echo"]
    n = int(echo["num_requests"])  # type: ignore[call-overload]
    if engine == "aio":  # a stopping user waits for its calls in flight and reports them
        assert n == grown > 0, (n, grown)
    else:  # a blocking call killed at the stop reached the server but is not reported: one per user at most
        assert 0 < n <= grown <= n + 6, (n, grown)
    assert echo["num_failures"] == 0
    # Each call's own time went to Locust and to the client histogram alike: the same sum over the same calls.
    assert total(client, "xfer_client_request_duration_seconds_count", method="Echo") == n
    client_sum = total(client, "xfer_client_request_duration_seconds_sum", method="Echo")
    assert math.isclose(float(echo["total_response_time"]) / 1000.0, client_sum, rel_tol=1e-6), client_sum  # type: ignore[arg-type]
    assert 0 < float(echo["min_response_time"]) <= float(echo["max_response_time"]) < RUN_S * 1000  # type: ignore[arg-type]


def test_echo_failures_counted_per_call_with_code(small_chunk_server: RunningServer, tmp_path: Path) -> None:
    before = _served(small_chunk_server, "Echo", "invalid_argument")
    stats, client, err = _locust(small_chunk_server, tmp_path, "-u", "4", "-r", "4", "--xfer-mix", "echo:1",
                                 "--xfer-echo-size", "2KiB", rc=1)  # Locust's exit code when calls failed
    refused = _served(small_chunk_server, "Echo", "invalid_argument") - before
    echo = stats["Echo"]
    assert echo["num_requests"] == echo["num_failures"] == refused > 0, (echo, refused)
    assert total(client, "xfer_client_requests_total", method="Echo", code="invalid_argument") == refused
    # Locust's error report: each failure under its status code and the server's own message
    report = re.findall(r"^\s*(\d+)\s+grpc Echo: (\w+): (.*?)\s*$", err, re.M)
    assert report == [(str(int(refused)), "invalid_argument", "payload length 2048 exceeds limit 1024")], err[-2000:]


def test_streams_in_flight_verified(go_server: RunningServer, tmp_path: Path) -> None:
    """Uploads and downloads, 3 of each user's in flight at once, chunk by chunk: every CRC-32 checked."""
    up_before, down_before = _served(go_server, "Upload"), _served(go_server, "Download")
    stats, client, _err = _locust(go_server, tmp_path, "-u", "4", "-r", "4", "--xfer-mix", "upload:1,download:1",
                            "--xfer-sizes", "100KiB,1MiB,3000000", "--xfer-chunk", "64KiB",
                            "--xfer-grpc-inflight", "3")
    for method, before in (("Upload", up_before), ("Download", down_before)):
        assert stats[method]["num_requests"] == _served(go_server, method) - before > 0, method
        assert stats[method]["num_failures"] == 0, method
        assert total(client, "xfer_client_verifications_total", method=method, result="ok") == stats[method]["num_requests"]
        assert total(client, "xfer_client_verifications_total", method=method, result="mismatch") == 0
        chunks = total(client, "xfer_client_requests_total", method=f"{method}Chunk")
        assert chunks >= float(stats[method]["num_requests"])  # type: ignore[arg-type]


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


def test_one_loop_thread_per_process() -> None:
    """Users starting at the same moment share one loop, and a coroutine runs on the loop's own OS thread."""
    r = subprocess.run([sys.executable, "-c", ONE_LOOP], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["1", "True"], r.stdout + r.stderr[-2000:]
