"""build/bin/xferload against real xferd-go and xferd-c processes: every method runs ~1 s with a --max-calls
bound, its figures are consistent, and the server's own xfer_requests_total grew by exactly the calls the
driver reports."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import pytest

from tests.loadgen.support import fetch, parse_prom, total
from tests.support.servers import BIN, RunningServer

XFERLOAD = BIN / "xferload"
RUN_TIMEOUT_S = 60.0
CHUNK = 256 * 1024
FILE_SIZE = 2 * 1024 * 1024  # 8 chunks per file
CONNS, INFLIGHT = 2, 3


def xferload(*args: str) -> subprocess.CompletedProcess[str]:
    if not XFERLOAD.exists():
        raise FileNotFoundError(f"{XFERLOAD} is not built; run `make build`")
    return subprocess.run([str(XFERLOAD), *args], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)


def run_json(server: RunningServer, *args: str) -> dict[str, Any]:
    out = xferload("--addr", server.addr("frame"), *args)
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def frame_requests(server: RunningServer) -> float:
    return total(parse_prom(fetch(server.metrics_url)), "xfer_requests_total", transport="frame")


def requests_after(server: RunningServer, expected: float, deadline_s: float = 5.0) -> float:
    """The server's frame request count once it reaches `expected` (a server may count a call just after
    writing its answer), or whatever it is at the deadline; then once more, so an overshoot is seen too."""
    end = time.monotonic() + deadline_s
    while frame_requests(server) < expected and time.monotonic() < end:
        time.sleep(0.02)
    return frame_requests(server)


METHODS = {
    "echo": ["--method", "echo", "--size", "1000", "--max-calls", "3000"],
    "upload": ["--method", "upload", "--chunk", str(CHUNK), "--file-size", str(FILE_SIZE), "--max-calls", "400"],
    "download": ["--method", "download", "--chunk", str(CHUNK), "--file-size", str(FILE_SIZE), "--max-calls", "400"],
    "download-gen": ["--method", "download", "--chunk", str(CHUNK), "--name", "gen:2MiB:5", "--max-calls", "400"],
    # 16 entries of a 4-byte key and a 4-byte value: 128 bytes per call.
    "meta": ["--method", "meta", "--entries", "16", "--entry-size", "4-4", "--max-calls", "3000"],
}


@pytest.mark.parametrize("method", list(METHODS))
def test_each_method_is_counted_exactly_by_the_server(server: RunningServer, method: str) -> None:
    before = frame_requests(server)
    r = run_json(server, *METHODS[method], "--conns", str(CONNS), "--inflight", str(INFLIGHT), "--duration", "1s")

    assert r["calls"] > 0
    assert r["errors"] == {}, r
    assert r["conns"] == CONNS and r["inflight"] == INFLIGHT and r["seconds"] > 0
    assert 0 < r["latency_us"]["p50"] <= r["latency_us"]["p99"] <= r["latency_us"]["max"]
    assert r["cpu_seconds"] > 0
    if method == "echo":
        assert r["bytes"] == r["calls"] * 1000
    elif method == "meta":
        assert r["bytes"] == r["calls"] * 128
    elif method == "upload":
        # Each worker's calls are UploadBegin, 8 chunks, UploadCommit, again: the calls that are not chunks
        # are two per file, give or take the file each worker has in progress.
        chunks, rest = divmod(r["bytes"], CHUNK)
        assert rest == 0 and chunks > 0
        assert abs((r["calls"] - chunks) - 2 * chunks / (FILE_SIZE // CHUNK)) <= 2 * CONNS * INFLIGHT, r
    else:
        assert r["bytes"] == r["calls"] * CHUNK
    assert r["setup_calls"] == (FILE_SIZE // CHUNK + 2 if method == "download" else 0)

    expected = before + r["calls"] + r["warmup_calls"] + r["setup_calls"]
    assert requests_after(server, expected) == expected


def test_server_errors_are_counted_by_code(server: RunningServer) -> None:
    before = frame_requests(server)
    r = run_json(server, "--method", "download", "--name", "missing.bin", "--max-calls", "20", "--inflight", "2")
    assert r["calls"] == 20
    assert r["errors"] == {"not_found": 20}
    assert r["bytes"] == 0
    assert requests_after(server, before + 20) == before + 20
    assert server.alive()


def test_bad_flag_and_refused_connection_exit_with_a_message() -> None:
    bad = xferload("--method", "echo", "--inflight", "0")
    assert bad.returncode == 2 and "-inflight" in bad.stderr and bad.stdout == ""
    bad = xferload("--method", "meta", "--entry-size", "8-4")
    assert bad.returncode == 2 and "-entry-size" in bad.stderr and "8-4" in bad.stderr
    refused = xferload("--method", "echo", "--addr", "127.0.0.1:1")
    assert refused.returncode == 1 and "cannot connect to 127.0.0.1:1" in refused.stderr
