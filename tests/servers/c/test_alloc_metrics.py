"""The allocator layer's own metrics on xferd-c's /metrics (docs/DESIGN.md "Server metrics", servers/c/README.md
"Allocation latency"): the sampled allocation-latency histogram `xfer_alloc_duration_seconds` (one allocation in
`--alloc-sample` timed), `xfer_alloc_failures_total`, and under `--alloc pool` the pool's cross-thread frees and
remote-lock waits. The real server under a short real load, scraped while it runs."""

from __future__ import annotations

import itertools
import subprocess
import threading
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.servers.c.test_xferd_c import NAME, FrameConn, binary
from tests.support.servers import RunningServer, running_server
from xfer.v1 import file_transfer_pb2 as ft

SCRAPE_TIMEOUT_S = 10.0
CONNS = 3
ECHOES = 150  # per connection and round
ROUNDS = 3
SAMPLE = 4
# Threads that allocate through the layer: the I/O thread, the worker, and at most this many others (the
# per-thread sampling counters each leave fewer than SAMPLE allocations untimed).
MAX_ALLOCATING_THREADS = 8


def samples(text: str) -> dict[str, float]:
    """`name{labels}` -> value for every sample, labels in Prometheus's order."""
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in s.labels.items())
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


def scrape_text(server: RunningServer) -> str:
    with urllib.request.urlopen(server.metrics_url, timeout=SCRAPE_TIMEOUT_S) as r:
        body: bytes = r.read()
    return body.decode()


def echo_load(server: RunningServer) -> None:
    """CONNS connections at once, each ECHOES Echo calls; fails the test on a wrong answer."""
    errors: list[str] = []

    def one(k: int) -> None:
        try:
            c = FrameConn(server.addr("frame"))
            for i in range(ECHOES):
                payload = bytes([k, i % 256]) * (32 + i % 200)
                r = c.call("Echo", ft.EchoRequest(payload=payload), ft.EchoResponse, seq=i + 1)
                if r.payload != payload:
                    errors.append(f"conn {k} call {i}: wrong echo")
            c.close()
        except (OSError, AssertionError) as e:  # reported by the assertion below
            errors.append(f"conn {k}: {e!r}")

    threads = [threading.Thread(target=one, args=(k,)) for k in range(CONNS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "load did not finish within 60 s"
    assert not errors, errors


def check_histogram(s: dict[str, float]) -> None:
    """Cumulative buckets, +Inf = _count, a positive sum under a positive count."""
    buckets = sorted(((float(k.split('le="')[1].rstrip('"}')), v) for k, v in s.items()
                      if k.startswith("xfer_alloc_duration_seconds_bucket")), key=lambda b: b[0])
    assert len(buckets) >= 2 and buckets[-1][0] == float("inf")
    values = [v for _, v in buckets]
    assert values == sorted(values), f"buckets not cumulative: {values}"
    assert values[-1] == s["xfer_alloc_duration_seconds_count"]
    assert s["xfer_alloc_duration_seconds_count"] > 0
    assert s["xfer_alloc_duration_seconds_sum"] > 0


def promtool_clean(text: str) -> None:
    out = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), capture_output=True, timeout=30)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()


def test_pool_metrics_under_load_are_sane() -> None:
    """The pool: histogram count is the sampled share of the pool's allocations, sums only grow, cross-thread
    frees happen (the I/O thread allocates a request's buffers, the worker frees some, and back), no failure."""
    args = ["--alloc=pool", f"--alloc-sample={SAMPLE}", "--io-threads=1", "--workers=1"]
    with running_server(NAME, args) as s:
        assert s.ready["alloc_sample"] == str(SAMPLE)
        seen = []
        for _ in range(ROUNDS):
            echo_load(s)
            text = scrape_text(s)
            promtool_clean(text)
            seen.append(samples(text))
        assert s.stop() == 0
    for snap in seen:
        check_histogram(snap)
        assert snap["xfer_alloc_failures_total"] == 0
        gets = snap["xfer_buffer_pool_gets_total"]
        count = snap["xfer_alloc_duration_seconds_count"]
        # each thread times its SAMPLE-th, 2*SAMPLE-th, ... allocation
        assert (gets - MAX_ALLOCATING_THREADS * (SAMPLE - 1)) / SAMPLE <= count <= gets / SAMPLE, (gets, count)
    for a, b in itertools.pairwise(seen):
        for name in ("xfer_alloc_duration_seconds_count", "xfer_alloc_duration_seconds_sum",
                     "xfer_alloc_cross_thread_frees_total", "xfer_alloc_pool_lock_contended_total"):
            assert b[name] >= a[name], f"{name} went down: {a[name]} -> {b[name]}"
        assert b["xfer_alloc_duration_seconds_count"] > a["xfer_alloc_duration_seconds_count"]
        assert b["xfer_alloc_duration_seconds_sum"] > a["xfer_alloc_duration_seconds_sum"]
    assert seen[-1]["xfer_alloc_cross_thread_frees_total"] > 0


def test_malloc_is_timed_too_and_pool_counters_are_pool_only() -> None:
    """Without the pool the histogram times the malloc wrapper; cross-thread frees cannot be told without the
    pool's block owner, so those families are absent rather than zero."""
    with running_server(NAME, ["--alloc-sample=1"]) as s:
        echo_load(s)
        text = scrape_text(s)
        assert s.stop() == 0
    promtool_clean(text)
    snap = samples(text)
    check_histogram(snap)
    # --alloc-sample 1: every allocation is timed, so the count is every allocation the layer served
    assert snap["xfer_alloc_duration_seconds_count"] == snap["xfer_buffer_pool_gets_total"]
    assert "xfer_alloc_cross_thread_frees" not in text and "xfer_alloc_pool_lock_contended" not in text


def test_metrics_off_times_nothing() -> None:
    """--metrics off: no clock on the request path, so no histogram; the pool's own counters stay (no clock)."""
    with running_server(NAME, ["--metrics=off", "--alloc=pool", "--alloc-sample=1"]) as s:
        assert s.ready["alloc_sample"] == "0"
        echo_load(s)
        text = scrape_text(s)
        assert s.stop() == 0
    promtool_clean(text)
    assert "xfer_alloc_duration_seconds" not in text and "xfer_alloc_failures_total" not in text
    assert "xfer_alloc_cross_thread_frees_total" in text


@pytest.mark.parametrize(("value", "words"), [("abc", "is not an unsigned 32-bit integer"),
                                              ("16777217", "want 0 ... 16777216")])
def test_bad_alloc_sample_is_refused_naming_it(value: str, words: str) -> None:
    r = subprocess.run([binary(), "--alloc-sample", value], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2
    assert "alloc-sample" in r.stderr and words in r.stderr, r.stderr
