"""CallUser (--xfer-call) against a real xferd-go: a unary, a client-streaming and a server-streaming method found
by the server's reflection, and one from a .proto file compiled at start. Every call Locust recorded, by status
code, equals what the server counted (its own xfer_requests_total) once the run has ended. Each run has an
xferd-go of its own and goes through the session's `runs` (tests/loadgen/harness.py), two at a time.
"""

from __future__ import annotations

import base64
import json
import math
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.loadgen.harness import Runs, in_background, runs_for
from tests.loadgen.support import Sample, fetch, parse_prom, run_locust, settled_metrics, summary_counts
from tests.support.servers import running_server
from xfer.v1 import file_transfer_pb2

RUN_S = 1  # counts are compared, not rates: a second of calls is as telling as more
COMMON = ["--headless", "-u", "2", "-r", "2", "-t", f"{RUN_S}s", "--xfer-metrics-port", "0", "--json"]
ECHO = "xfer.v1.FileTransfer/Echo"


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return runs_for(request, tmp_path_factory)


@dataclass
class Run:
    proc: subprocess.CompletedProcess[str]
    method: str
    served: dict[str, float]  # code -> calls of `method` the server counted during the run
    client: list[Sample]  # the client's metrics, dumped at exit

    def recorded(self) -> dict[str, float]:
        """code -> calls of `method` in the client's xfer_client_requests_total."""
        return _by_code(self.client, "xfer_client_requests_total", self.method)

    def stats(self) -> dict[str, Any]:
        """Locust's own --json statistics of `method`."""
        (entry,) = [e for e in json.loads(self.proc.stdout) if e["name"] == self.method]
        return dict(entry)


def _by_code(samples: list[Sample], name: str, method: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for n, labels, v in samples:
        if n == name and labels.get("method") == method and labels.get("transport") == "grpc" and v:
            out[labels["code"]] = out.get(labels["code"], 0.0) + v
    return out


def _run(tmp: Path, method: str, *args: str) -> Run:
    """One Locust process of CallUser against a new xferd-go; what the server counted of `method` meanwhile."""
    (run,) = _run_methods(tmp, (method,), *args)
    return run


def _run_methods(tmp: Path, methods: tuple[str, ...], *args: str) -> list[Run]:
    """One Locust process calling `methods` (a mix), seen from each method: the same process, the server's
    counts of that method."""
    with running_server("xferd-go", ["--store=mem"]) as server:
        before = parse_prom(fetch(server.metrics_url))
        r = run_locust(
            [*COMMON, "--host", server.target("grpc"), "--xfer-metrics-dump", str(tmp), *args], timeout=RUN_S + 60
        )
        after = settled_metrics(server.metrics_url)
    dumps = [parse_prom(p.read_text()) for p in tmp.glob("local-*.prom")]
    assert len(dumps) == 1, r.stderr[-3000:]
    runs = []
    for method in methods:
        was, now = _by_code(before, "xfer_requests_total", method), _by_code(after, "xfer_requests_total", method)
        served = {code: n - was.get(code, 0.0) for code, n in now.items() if n - was.get(code, 0.0)}
        runs.append(Run(r, method, served, dumps[0]))
    return runs


def _upload_template(tmp: Path) -> str:
    """A valid upload (header, two chunks, trailer with the content's CRC-32) under a new name per call."""
    content = bytes(range(256)) * 8
    messages = [
        {"header": {"name": "call-{{process}}-{{user}}-{{seq}}", "size": len(content), "chunk_size": 1024}},
        {"chunk": base64.b64encode(content[:1024]).decode()},
        {"chunk": base64.b64encode(content[1024:]).decode()},
        {"trailer": {"crc32": zlib.crc32(content)}},
    ]
    path = tmp / "upload.json"
    path.write_text(json.dumps(messages))
    return f"@{path}"


def _assert_counts_match(run: Run, rc: int = 0) -> dict[str, float]:
    """Locust's requests and failures, the client metrics by code and the server's counts by code agree."""
    assert run.proc.returncode == rc, run.proc.stderr[-3000:]
    assert "Traceback" not in run.proc.stderr, run.proc.stderr[-3000:]
    recorded, stats = run.recorded(), run.stats()
    assert recorded == run.served, (recorded, run.served)
    assert stats["num_requests"] == sum(recorded.values()) > 0, (stats, recorded)
    assert stats["num_failures"] == sum(n for code, n in recorded.items() if code != "ok"), (stats, recorded)
    assert summary_counts(run.proc.stderr)[run.method] == stats["num_requests"]
    return recorded


@in_background(lambda tmp: _run(tmp, "Echo", "--xfer-call", ECHO, "--xfer-data", '{"payload": "{{bytes:64}}"}'))
def test_unary_by_reflection(runs: Runs, request: pytest.FixtureRequest) -> None:
    recorded = _assert_counts_match(runs[request.node])
    assert set(recorded) == {"ok"}


@in_background(
    lambda tmp: _run(tmp, "Upload", "--xfer-call", "xfer.v1.FileTransfer/Upload", "--xfer-data", _upload_template(tmp))
)
def test_client_stream_by_reflection(runs: Runs, request: pytest.FixtureRequest) -> None:
    """Every upload committed: the server checked each one's CRC-32 against its trailer."""
    recorded = _assert_counts_match(runs[request.node])
    assert set(recorded) == {"ok"}


@in_background(
    lambda tmp: _run(
        tmp,
        "Download",
        "--xfer-call",
        "xfer.v1.FileTransfer/Download",
        "--xfer-data",
        '[{"name": "gen:{{key:50000}}:7", "chunk_size": 4096}, {"name": "no-such-file"}]',
    )
)
def test_server_stream_by_reflection(runs: Runs, request: pytest.FixtureRequest) -> None:
    """A list for a server-streaming method: its messages in turn, so every other call is not_found."""
    recorded = _assert_counts_match(runs[request.node], rc=1)  # Locust's exit status when calls failed
    assert set(recorded) == {"ok", "not_found"}, recorded
    assert abs(recorded["ok"] - recorded["not_found"]) <= 2  # each of the 2 users alternates


@in_background(
    lambda tmp: _run(
        tmp,
        "Echo",
        "--xfer-call",
        ECHO,
        "--xfer-data",
        '{"payload": "aGVsbG8="}',
        "--xfer-proto",
        "proto/xfer/v1/file_transfer.proto",
        "--xfer-import-path",
        "proto",
        "--xfer-check",
        "failures==0",
    )
)
def test_unary_from_proto_file(runs: Runs, request: pytest.FixtureRequest) -> None:
    run = runs[request.node]
    recorded = _assert_counts_match(run)
    assert set(recorded) == {"ok"}
    assert "xfer-check PASS: failures==0" in run.proc.stderr, run.proc.stderr[-2000:]


@in_background(
    lambda tmp: _run(
        tmp,
        "ServerReflectionInfo",
        "--xfer-call",
        "grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        "--xfer-data",
        '[{"list_services": ""}, {"file_containing_symbol": "xfer.v1.FileTransfer"}]',
    )
)
def test_bidirectional_stream(runs: Runs, request: pytest.FixtureRequest) -> None:
    """xferd-go's one bidirectional method is reflection itself (which its metrics leave out: not the workload).
    Every call sends both requests and reads both answers: the same bytes each time, more than the descriptor."""
    run = runs[request.node]
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    stats = run.stats()
    n, length = stats["num_requests"], stats["total_content_length"]
    assert n > 0 and stats["num_failures"] == 0 and run.recorded() == {"ok": n}, stats
    assert length % n == 0 and length // n > len(file_transfer_pb2.DESCRIPTOR.serialized_pb), (length, n)


DOWNLOAD = "xfer.v1.FileTransfer/Download"
MIX_WEIGHTS = {"Echo": 3, "Download": 1}


def _mix_data(tmp: Path) -> str:
    """A mix's requests in one file, keyed by method: Download's list alternates by Download's own {{seq}}."""
    path = tmp / "mix.json"
    path.write_text(
        json.dumps(
            {
                ECHO: {"payload": "{{bytes:64}}"},
                DOWNLOAD: [{"name": "gen:{{key:50000}}:7", "chunk_size": 4096}, {"name": "no-such-file"}],
            }
        )
    )
    return f"@{path}"


@in_background(
    lambda tmp: _run_methods(
        tmp, ("Echo", "Download"), "--xfer-call", f"{ECHO}:3,{DOWNLOAD}:1", "--xfer-data", _mix_data(tmp)
    )
)
def test_weighted_mix_by_reflection(runs: Runs, request: pytest.FixtureRequest) -> None:
    """Echo:3,Download:1: every call, by method and status, as Locust, the client metrics and the server counted
    it; the methods' shares as weighted; each method's {{seq}} its own."""
    echo, download = runs[request.node]
    echoed = _assert_counts_match(echo, rc=1)  # the not_found Downloads are failures
    downloaded = _assert_counts_match(download, rc=1)
    assert set(echoed) == {"ok"} and set(downloaded) == {"ok", "not_found"}, (echoed, downloaded)
    # If Download took the mix's call numbers, its two requests would come in no order; with its own, each of
    # the 2 users alternates them.
    assert abs(downloaded["ok"] - downloaded["not_found"]) <= 2, downloaded
    # Each call picks Echo with p = 3/4, independently: Echo's count of n calls is binomial. Five standard
    # deviations (a flake once in ~3.5 million runs), plus the calls a user had begun but not ended when the
    # run stopped (a closed loop's count depends a little on which calls were slow): 2 users x 4 in flight.
    n = sum(echoed.values()) + sum(downloaded.values())
    p = MIX_WEIGHTS["Echo"] / sum(MIX_WEIGHTS.values())
    assert n > 100, n
    assert abs(sum(echoed.values()) - p * n) <= 5 * math.sqrt(n * p * (1 - p)) + 2 * 4, (echoed, downloaded)
    total = [e for e in json.loads(echo.proc.stdout) if e["name"] in MIX_WEIGHTS]
    assert len(total) == 2, echo.proc.stdout[-2000:]  # one Locust entry per method, nothing else
