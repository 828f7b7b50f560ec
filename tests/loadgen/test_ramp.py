"""Scripted ramp: 1 -> 20 users over 15 s, 30 s in all, against every (server, transport), verify on.

Asserts zero failures, calls of every method, every checksum verified, client and server request counts
agreeing within the in-flight margin (calls cut off when Locust stops its users), and RSS (and for Go,
GC-pause) series on the server's /metrics, scraped every second during the run. Another, short run with an
impossible --xfer-check must exit non-zero.

XFER_RAMP_SECONDS sets the run's length (the ramp is always the first half).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.loadgen.support import Scraper, failed, parse_prom, run_locust, settled_metrics, total
from tests.support.servers import RunningServer, running_server, server_transports

RUN_S = int(os.environ.get("XFER_RAMP_SECONDS", "30"))
USERS = 20
SIZES = ("64KiB", "256KiB", "1MiB")
CHUNK = 256 << 10
MAX_CHUNKS = math.ceil((1 << 20) / CHUNK)
TOP = ("Upload", "Download", "Echo")


@pytest.fixture(params=server_transports(), ids=lambda p: f"{p[0]}-{p[1]}")
def target(request: pytest.FixtureRequest) -> Iterator[tuple[RunningServer, str]]:
    name, transport = request.param
    with running_server(name) as server:
        yield server, transport


def _client(samples, method: str, code: str | None = None) -> float:
    labels = {"method": method} | ({"code": code} if code else {})
    return total(samples, "xfer_client_requests_total", **labels)


def _server(samples, transport: str, method: str) -> float:
    return total(samples, "xfer_requests_total", transport=transport, method=method)


@pytest.mark.slow
def test_ramp(target: tuple[RunningServer, str], tmp_path: Path) -> None:
    server, transport = target
    scraper = Scraper(server.metrics_url).start()
    try:
        r = run_locust([
            "--headless", "--host", server.target(transport), "-u", str(USERS), "-r", "1", "-t", f"{RUN_S}s",
            "--xfer-profile", "ramp", "--xfer-verify", "on", "--xfer-sizes", ",".join(SIZES),
            "--xfer-chunk", str(CHUNK), "--xfer-inflight", "4", "--xfer-metrics-port", "0",
            "--xfer-metrics-dump", str(tmp_path), "--xfer-check", "failures==0", "--only-summary",
        ], timeout=RUN_S + 90)
    finally:
        scraper.stop()
    assert r.returncode == 0, r.stderr[-4000:]
    assert server.alive()
    (dump,) = tmp_path.glob("local-*.prom")
    client = parse_prom(dump.read_text())
    srv = settled_metrics(server.metrics_url)

    # zero failures, every method called, every checksum verified
    assert failed(client) == 0
    for m in (*TOP, "UploadChunk", "DownloadChunk"):
        assert _client(client, m) > 0, m
    for m in TOP:
        verified = total(client, "xfer_client_verifications_total", method=m, result="ok")
        assert verified == _client(client, m, "ok"), m
    assert total(client, "xfer_client_verifications_total", result="mismatch") == 0

    # client vs server counts: the server also counts calls Locust cut off when it stopped its users
    # (at most one per user in flight; for chunks, at most one file's chunks per user).
    if transport == "grpc":
        pairs = [("Upload", "Upload", USERS), ("Download", "Download", USERS), ("Echo", "Echo", USERS)]
    else:
        pairs = [("Upload", "UploadBegin", USERS), ("Upload", "UploadCommit", USERS),
                 ("UploadChunk", "UploadChunk", USERS * MAX_CHUNKS),
                 ("DownloadChunk", "Read", USERS * MAX_CHUNKS), ("Echo", "Echo", USERS)]
    for client_m, server_m, margin in pairs:
        c, s = _client(client, client_m), _server(srv, transport, server_m)
        assert 0 <= s - c <= margin, (client_m, c, server_m, s, margin)

    # server memory (and for Go, GC pause) series, one scrape a second
    series = [samples for _t, samples in scraper.scrapes]
    assert len(series) >= RUN_S * 0.75, (len(series), scraper.errors[-3:])
    rss = [total(s, "process_resident_memory_bytes") for s in series]
    assert all(v > 0 for v in rss), rss
    if server.kind.name == "xferd-go":
        pauses = [total(s, "go_sched_pauses_total_gc_seconds_count")
                  or total(s, "go_gc_duration_seconds_count") for s in series]
        assert pauses[-1] > pauses[0] and pauses == sorted(pauses), pauses


def test_impossible_check_fails(tmp_path: Path) -> None:
    with running_server("xferd-go") as server:
        r = run_locust([
            "--headless", "--host", server.target("grpc"), "-u", "2", "-r", "2", "-t", "3s",
            "--xfer-sizes", "64KiB", "--xfer-metrics-port", "0", "--only-summary",
            "--xfer-check", "failures==0,p99<1us",
        ], timeout=60)
    assert r.returncode == 3, r.stderr[-3000:]
    assert "xfer-check PASS: failures==0" in r.stderr
    assert "xfer-check FAIL: p99<1us" in r.stderr
