"""Scraping arithmetic: text parsing, histogram quantiles, window figures; and the PromQL source's
query_range conversion gives the same row fields as the scraper."""

from __future__ import annotations

import math

import pytest

from xferbench.measure import figures
from xferbench.measure.scrape import Snapshot, bucket_delta, first_bucket_bound, parse_text, quantile
from xferbench.measure.sources import matrix_to_snapshots

BOUNDS = (0.001, 0.002, 0.005, 0.01)


def expo(t: float, n_ok: float, n_err: float, lat: dict[float, float], rss: float, gc: float, cpu: float) -> str:
    lines = [
        "# TYPE xfer_requests_total counter",
        f'xfer_requests_total{{transport="grpc",method="Echo",code="ok"}} {n_ok}',
        f'xfer_requests_total{{transport="grpc",method="Echo",code="internal"}} {n_err}',
        "# TYPE xfer_request_duration_seconds histogram",
    ]
    cum = 0.0
    for b in BOUNDS:
        cum += lat.get(b, 0.0)
        lines.append(f'xfer_request_duration_seconds_bucket{{transport="grpc",method="Echo",le="{b}"}} {cum}')
    lines += [
        f'xfer_request_duration_seconds_bucket{{transport="grpc",method="Echo",le="+Inf"}} {cum}',
        f'xfer_request_duration_seconds_count{{transport="grpc",method="Echo"}} {cum}',
        f'xfer_request_duration_seconds_sum{{transport="grpc",method="Echo"}} {cum * 0.002}',
        "# TYPE process_resident_memory_bytes gauge",
        f"process_resident_memory_bytes {rss}",
        "# TYPE process_cpu_seconds_total counter",
        f"process_cpu_seconds_total {cpu}",
        "# TYPE go_gc_duration_seconds summary",
        'go_gc_duration_seconds{quantile="1"} 0.0005',
        f"go_gc_duration_seconds_sum {gc * 0.0001}",
        f"go_gc_duration_seconds_count {gc}",
        "# TYPE python_info gauge",
        'python_info{version="3"} 1',
    ]
    return "\n".join(lines) + "\n"


def snaps() -> list[Snapshot]:
    return [
        parse_text(expo(0, 0, 0, {}, 10e6, 0, 0), t=100.0),
        parse_text(expo(1, 100, 0, {0.001: 100}, 20e6, 2, 0.5), t=101.0),
        parse_text(expo(2, 1000, 10, {0.001: 500, 0.002: 400, 0.005: 100}, 30e6, 12, 1.5), t=103.0),
    ]


def test_parse_keeps_only_wanted_families() -> None:
    s = snaps()[1]
    assert s.sum("xfer_requests_total") == 100
    assert s.sum("process_cpu_seconds_total") == 0.5  # counter: kept although the parser strips "_total"
    assert s.sum("python_info") is None
    assert s.buckets("xfer_request_duration_seconds")[math.inf] == 100


def test_quantile_interpolates_like_prometheus() -> None:
    cum = {0.001: 50.0, 0.002: 100.0, math.inf: 100.0}
    assert quantile(0.5, cum) == pytest.approx(0.001)
    assert quantile(0.75, cum) == pytest.approx(0.0015)
    assert quantile(0.25, cum) == pytest.approx(0.0005)
    assert quantile(0.99, {0.001: 0.0, math.inf: 10.0}) == 0.001  # in +Inf: the highest finite bound
    assert quantile(0.5, {}) is None and quantile(0.5, {1.0: 0.0}) is None
    assert bucket_delta({1.0: 5}, {1.0: 8}) == {1.0: 3} and bucket_delta({1.0: 5}, {1.0: 2}) == {1.0: 2}


def test_a_quantile_in_the_first_bucket_is_only_bounded() -> None:
    cum = {0.005: 100.0, 0.01: 100.0, math.inf: 100.0}
    assert quantile(0.95, cum) == pytest.approx(0.00475)  # what interpolation from zero would claim
    assert first_bucket_bound(0.95, cum) == 0.005
    assert first_bucket_bound(0.5, {0.005: 40.0, 0.01: 100.0, math.inf: 100.0}) is None  # resolved: (5, 10] ms
    assert first_bucket_bound(0.5, {}) is None and first_bucket_bound(0.5, {0.005: 0.0, math.inf: 0.0}) is None


def test_server_quantiles_under_the_first_bucket_are_none_with_their_bound() -> None:
    """Every call of the window in the first bucket (≤ 1 ms): no P95 is invented, its bound is kept."""
    s = [parse_text(expo(0, 0, 0, {}, 10e6, 0, 0), t=100.0),
         parse_text(expo(1, 500, 0, {0.001: 500}, 10e6, 0, 0.1), t=102.0)]
    f = figures.server_figures(s, s)
    assert f["server_p95_s"] is None and f["server_p99_s"] is None
    assert f["bounds"] == {"server_p95_s": 0.001, "server_p99_s": 0.001}


def test_server_figures_over_window() -> None:
    s = snaps()
    f = figures.server_figures(s[1:], s)
    assert f["server_qps"] == pytest.approx(910 / 2)
    assert f["server_errors"] == 10
    # Window latencies: 400 in ≤1 ms, 400 in (1,2] ms, 100 in (2,5] ms → P95 inside (2, 5] ms.
    assert 0.002 < f["server_p95_s"] <= 0.005
    assert "bounds" not in f  # resolved: no bound recorded
    assert f["rss_peak_bytes"] == 30e6 and f["rss_mean_bytes"] == 25e6
    assert f["gc_pauses"] == 10 and f["gc_pause_total_s"] == pytest.approx(0.001)
    assert f["server_cpu_cores"] == pytest.approx(0.5)
    assert f["gc_pause_p99_s"] == 0.0005
    assert f["alloc_resident_bytes"] is None  # not exported: stays None
    # The keys, in the order a PromQL run's scrape_check has always held them in runs.jsonl.
    assert list(f) == list(figures.server_figures([])) == [
        "server_qps", "server_p95_s", "server_p99_s", "server_errors", "server_cpu_cores", "server_bytes_per_s",
        "rss_peak_bytes", "rss_mean_bytes", "gc_pauses", "gc_pause_total_s", "gc_pause_p99_s", "gc_cpu_share",
        "heap_inuse_mean_bytes", "alloc_allocated_bytes", "alloc_resident_bytes", "alloc_resident_peak_bytes",
        "alloc_committed_bytes", "server_requests", "server_cpu_per_request_s", "server_cpu_per_gib_s",
        "gc_pause_per_request_s"]


def test_a_counter_born_inside_the_window_counts_from_zero() -> None:
    """A labelled counter is exported from its first increment: a window that opens before the server's first
    request has no xfer_requests_total at its start, and its requests are all of the window's."""
    idle = parse_text("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1\n", t=10.0)
    busy = parse_text(expo(12.0, 600, 4, {0.001: 600}, 20e6, 3, 2.0), t=12.0)
    f = figures.server_figures([idle, busy])
    assert f["server_qps"] == pytest.approx(604 / 2) and f["server_requests"] == 604
    assert f["server_errors"] == 4 and f["server_cpu_cores"] == pytest.approx(0.5)
    assert figures.server_figures([busy, idle])["server_qps"] is None  # gone at the end: nothing to count


def test_the_window_runs_between_the_scrapes_nearest_its_ends() -> None:
    """Late ticks put two scrapes within the slack of each end: the window keeps the nearest, so the server's
    span is the client's."""
    at = [9.6, 10.05, 11.0, 11.9, 12.02, 12.45]
    snaps = [Snapshot(t) for t in at]
    assert [s.t for s in figures.window(snaps, 10.0, 12.0)] == [10.05, 11.0, 11.9, 12.02]
    assert [s.t for s in figures.window(snaps[:2], 10.0, 12.0)] == [9.6, 10.05]  # never fewer than two kept


def test_promql_matrix_gives_same_figures() -> None:
    s = snaps()
    # Build what /api/v1/query_range returns for these snapshots (plus Prometheus' own labels).
    series: dict[tuple, list] = {}
    for snap in s:
        for (name, labels), v in snap.samples.items():
            key = (name, labels)
            series.setdefault(key, []).append([snap.t, str(v)])
    result = [
        {"metric": {"__name__": n, **dict(ls), "instance": "127.0.0.1:9", "job": "xferd"}, "values": vals}
        for (n, ls), vals in series.items()
    ]
    back = matrix_to_snapshots(result)
    assert [b.t for b in back] == [x.t for x in s]
    assert figures.server_figures(back[1:], back) == figures.server_figures(s[1:], s)


def test_client_figures() -> None:
    def c(t: float, ok: float, fail: float, cpu: float) -> Snapshot:
        return parse_text(
            "\n".join(
                [
                    "# TYPE xfer_client_requests_total counter",
                    f'xfer_client_requests_total{{transport="frame",method="Echo",code="ok"}} {ok}',
                    f'xfer_client_requests_total{{transport="frame",method="Echo",code="unavailable"}} {fail}',
                    "# TYPE xfer_client_transfer_bytes_total counter",
                    f'xfer_client_transfer_bytes_total{{direction="upload"}} {ok * 10}',
                    "# TYPE process_cpu_seconds_total counter",
                    f"process_cpu_seconds_total {cpu}",
                    "",
                ]
            ),
            t=t,
        )

    f = figures.client_figures([c(0, 0, 0, 0), c(2, 200, 2, 1.9)])
    assert f["client_qps"] == 101 and f["client_failures"] == 2
    assert f["client_upload_bytes_per_s"] == 1000 and f["gen_cpu_cores"] == pytest.approx(0.95)
    assert f["client_p95_s"] is None  # no histogram exported: no percentile invented


def test_promql_steps_are_retimed_to_scrape_times() -> None:
    from xferbench.measure.sources import retime

    steps = [Snapshot(10.0), Snapshot(11.0), Snapshot(12.0)]
    # Step 12 repeats the sample scraped at 10.4 (a slower scrape): dropped, never a zero-length interval.
    assert [s.t for s in retime(steps, {10.0: 9.4, 11.0: 10.4, 12.0: 10.4})] == [9.4, 10.4]


def _conn_text(accepted: float | None, opened: float, reconnects: float) -> str:
    lines = [] if accepted is None else ["# TYPE xfer_connections_accepted_total counter",
                                         f"xfer_connections_accepted_total {accepted}"]
    return "\n".join([*lines,
                      "# TYPE xfer_client_connections_opened_total counter",
                      f'xfer_client_connections_opened_total{{transport="frame"}} {opened}',
                      "# TYPE xfer_client_reconnects_total counter",
                      f'xfer_client_reconnects_total{{transport="frame"}} {reconnects}', ""])


def test_connection_figures_are_rates_over_the_window_and_the_time_wait_peak() -> None:
    a, b = (parse_text(_conn_text(acc, op, rc), t) for acc, op, rc, t in ((100, 90, 2, 10.0), (400, 390, 6, 12.0)))
    out = figures.connection_figures([a, b], [a, b], [3, 250, 17])
    assert out == {"conns_accepted_per_s": 150.0, "conns_opened_per_s": 150.0, "reconnects_per_s": 2.0,
                   "time_wait_peak": 250}


def test_connection_figures_of_a_server_without_the_counter_are_none() -> None:
    a, b = (parse_text(_conn_text(None, op, 0), t) for op, t in ((5, 10.0), (5, 11.0)))
    out = figures.connection_figures([a, b], [a, b], [])
    assert out["conns_accepted_per_s"] is None and out["time_wait_peak"] is None
    assert out["conns_opened_per_s"] == 0.0 and out["reconnects_per_s"] == 0.0
