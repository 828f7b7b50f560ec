"""build/bin/grpcxfer, the bench's gRPC transfer client, against a real xferd-go: whole uploads and downloads
that pass their size and CRC-32 checks, each counted once by the server, and bad input refused in one line."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.loadgen.support import fetch, parse_prom, total
from tests.support.servers import BIN, RunningServer, running_server

GRPCXFER = BIN / "grpcxfer"
RUN_TIMEOUT_S = 60.0
METHODS = ("Upload", "Download")
FILE = ["--file-size", "2MiB", "--chunk", "256KiB"]


@pytest.fixture(scope="module")
def xferd_go() -> Iterator[RunningServer]:
    with running_server("xferd-go", ["--store=mem"]) as s:
        yield s


def grpcxfer(*args: str) -> subprocess.CompletedProcess[str]:
    if not GRPCXFER.exists():
        raise FileNotFoundError(f"{GRPCXFER} is not built; run `make build`")
    return subprocess.run([str(GRPCXFER), *args], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)


def served(server: RunningServer, until: dict[str, float] | None = None) -> dict[str, float]:
    """The server's OK gRPC Upload and Download counts; with `until`, once they reach it or 5 s have passed
    (a server counts a call as its handler returns, which may be just after the client read the last answer)."""
    end = time.monotonic() + 5.0
    while True:
        samples = parse_prom(fetch(server.metrics_url))
        got = {m: total(samples, "xfer_requests_total", transport="grpc", method=m, code="ok") for m in METHODS}
        if until is None or all(got[m] >= until[m] for m in got) or time.monotonic() > end:
            return got
        time.sleep(0.02)


def run_json(server: RunningServer, *args: str) -> dict[str, Any]:
    out = grpcxfer("--addr", server.addr("grpc"), "--duration", "1s", "--conns", "2", "--streams", "2", *args)
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    assert result["errors"] == {} and result["calls"] > 0, result
    assert result["conns"] == 2 and result["streams"] == 2 and result["seconds"] >= 1.0
    assert result["cpu_cores"] > 0 and result["mb_per_s"] > 0
    return result


def test_uploads_are_whole_and_counted_once(xferd_go: RunningServer) -> None:
    before = served(xferd_go)
    r = run_json(xferd_go, "--method", "upload", *FILE)
    assert r["bytes"] == r["calls"] * (2 << 20)
    after = served(xferd_go, {"Upload": before["Upload"] + r["calls"], "Download": before["Download"]})
    assert after["Upload"] - before["Upload"] == r["calls"]
    assert after["Download"] == before["Download"]


def test_download_of_its_own_upload(xferd_go: RunningServer) -> None:
    before = served(xferd_go)
    r = run_json(xferd_go, "--method", "download", *FILE)
    assert r["bytes"] == r["calls"] * (2 << 20)
    after = served(xferd_go, {"Upload": before["Upload"] + 1, "Download": before["Download"] + r["calls"]})
    assert after["Upload"] - before["Upload"] == 1  # the file it reads, uploaded first
    assert after["Download"] - before["Download"] == r["calls"]


def test_download_of_generated_content_checks_its_crc(xferd_go: RunningServer) -> None:
    # A size that is not a multiple of the chunk: the last chunk is short, and the CRC covers it.
    r = run_json(xferd_go, "--method", "download", "--name", "gen:1000000:7", "--chunk", "256KiB")
    assert r["bytes"] == r["calls"] * 1_000_000


def test_a_missing_file_fails_the_run_naming_the_code(xferd_go: RunningServer) -> None:
    out = grpcxfer("--addr", xferd_go.addr("grpc"), "--method", "download", "--name", "missing.bin", "--duration", "300ms")
    assert out.returncode == 1 and out.stdout == ""
    assert "no download ended OK" in out.stderr and "NotFound" in out.stderr, out.stderr
    assert xferd_go.alive()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--method", "upload"], "--addr is required"),
        (["--addr", "127.0.0.1:1", "--method", "echo"], "--method must be upload or download"),
        (["--addr", "127.0.0.1:1", "--method", "upload", "--chunk", "0"], "must be at least 1 byte"),
        (["--addr", "127.0.0.1:1", "--method", "upload", "--duration", "1 minute"], "-duration"),
        (["--addr", "127.0.0.1:1", "--method", "upload", "--conns", "0"], "at least 1"),
        (["--addr", "127.0.0.1:1", "--method", "upload", "extra"], 'unexpected argument "extra"'),
    ],
)
def test_bad_flags_exit_2_with_a_message(args: list[str], says: str) -> None:
    out = grpcxfer(*args)
    assert out.returncode == 2 and out.stdout == "", out
    assert says in out.stderr, out.stderr
