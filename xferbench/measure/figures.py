"""Row fields and per-second series from the snapshots of one run's measured window.

Both metric sources (the built-in scraper and PromQL) hand over lists of `Snapshot`s, so every figure
below is computed by one piece of code whichever source was used. The row's figures travel as `Figures`
(xferbench/analysis/row.py): a key that is no RunRow figure is a type error here, not a key in the row's `extra`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

from xferbench.analysis.metrics import GEN_IDLE_MIN_CORES, GEN_SATURATED_CORES
from xferbench.analysis.row import Figures
from xferbench.config.series import OURS, Requests, Selector
from xferbench.measure.scrape import (
    LabelTest,
    Snapshot,
    bucket_delta,
    counter_delta,
    counter_growth,
    first_bucket_bound,
    quantile,
)
from xferbench.measure.tree import Sample as TreeSample
from xferbench.measure.tree import Window as TreeWindow

# loadgen's per-chunk records (loadgen/_recorder.py): by name, since any other method (a user's own, via
# [load] call or locustfile) is a whole operation, whatever its name ends with
CHUNK_METHODS = ("UploadChunk", "DownloadChunk")


def generator_saturated(gen_cpu_cores: float | None, gen_idle_cores: float | None) -> bool:
    return (gen_cpu_cores is not None and gen_cpu_cores > GEN_SATURATED_CORES) or (
        gen_idle_cores is not None and gen_idle_cores < GEN_IDLE_MIN_CORES)


def _ok(d: dict[str, str]) -> bool:
    """A call's outcome is its `code` label: "ok" or PROTOCOL.md's error code (ours say so too: series.OURS)."""
    return d.get("code") == "ok"


def _op(d: dict[str, str]) -> bool:
    """A whole client operation (Upload, Download, Echo), not a per-chunk record (UploadChunk, DownloadChunk)
    that loadgen also keeps: client QPS and percentiles count each call once."""
    return d.get("method", "") not in CHUNK_METHODS


def _op_not_ok(d: dict[str, str]) -> bool:
    return _op(d) and not _ok(d)


def _rate(a: Snapshot, b: Snapshot, name: str, pred: LabelTest | None = None) -> float | None:
    dt = b.t - a.t
    d = counter_growth(a, b, name, pred)
    if d is None or dt <= 0:
        return None
    return d / dt


def _hq(a: Snapshot, b: Snapshot, name: str, q: float, pred: LabelTest | None = None) -> float | None:
    return quantile(q, bucket_delta(a.buckets(name, pred), b.buckets(name, pred)))


def _resolved_quantiles(a: Snapshot, b: Snapshot, name: str, pred: LabelTest | None,
                        wanted: dict[Literal["server_p95_s", "server_p99_s"], float]) -> Figures:
    """The server's latency quantiles from its histogram, each with its value, or None and its bound in
    `bounds` when it lies in the first bucket (scrape.first_bucket_bound): a user's histogram may start
    at 5 ms, where an interpolated P95 of a 200 µs call would read 4.75 ms."""
    buckets = bucket_delta(a.buckets(name, pred), b.buckets(name, pred))
    out: Figures = {}
    bounds: dict[str, float] = {}
    for key, q in wanted.items():
        bound = first_bucket_bound(q, buckets)
        out[key] = None if bound is not None else quantile(q, buckets)
        if bound is not None:
            bounds[key] = bound
    if bounds:
        out["bounds"] = bounds
    return out


def _series(snaps: list[Snapshot], name: str) -> list[float]:
    return [v for v in (s.sum(name) for s in snaps) if v is not None]


def window(snaps: list[Snapshot], t_from: float, t_to: float, slack: float = 0.5) -> list[Snapshot]:
    """The snapshots within `slack` of [t_from, t_to], from the one nearest t_from to the one nearest t_to. A
    starved machine's ticks come irregularly, so two scrapes may lie within the slack of one end: taking the
    outer one made the server's span up to a second longer or shorter than the client's, and its counts (and
    so CPU per request) those of another span (a fifth off, seen on a loaded machine)."""
    inside = [s for s in snaps if t_from - slack <= s.t <= t_to + slack]
    while len(inside) > 2 and abs(inside[1].t - t_from) < abs(inside[0].t - t_from):
        inside.pop(0)
    while len(inside) > 2 and abs(inside[-2].t - t_to) < abs(inside[-1].t - t_to):
        inside.pop()
    return inside


def _no_client_figures() -> Figures:
    """client_figures' keys, every one None: what a window too short to measure gives."""
    return {"client_qps": None, "client_bytes_per_s": None, "client_upload_bytes_per_s": None,
            "client_download_bytes_per_s": None, "client_p50_s": None, "client_p95_s": None, "client_p99_s": None,
            "client_requests": None, "client_failures": None, "client_failure_rate": None, "gen_cpu_cores": None,
            "client_users": None}


def _client_counts(a: Snapshot, b: Snapshot) -> Figures:
    """Whole operations, failed ones, their rate and failure share between two client snapshots."""
    out: Figures = {}
    dt = b.t - a.t
    # loadgen exports a method's series from its first completed call (a window from the load's first second,
    # or 10 MiB transfers slower than the warm-up), counted from 0
    req = counter_growth(a, b, "xfer_client_requests_total", _op)
    fail = counter_growth(a, b, "xfer_client_requests_total", _op_not_ok)
    out["client_requests"] = req
    out["client_failures"] = (fail or 0.0) if req is not None else None
    if req is not None and dt > 0:
        out["client_qps"] = req / dt
        out["client_failure_rate"] = (fail or 0.0) / req if req else 0.0
    return out


def _client_methods(a: Snapshot, b: Snapshot) -> dict[str, dict[str, float | None]]:
    """Each method's (chunk records included) rate and percentiles, in the order the last snapshot holds them."""
    methods: dict[str, dict[str, float | None]] = {}
    for (n, ls), _v in b.samples.items():
        m = dict(ls).get("method")
        if n == "xfer_client_requests_total" and m and m not in methods:

            def is_m(d: dict[str, str], m: str = m) -> bool:
                return d.get("method") == m

            methods[m] = {
                "qps": _rate(a, b, "xfer_client_requests_total", is_m),
                "p50_s": _hq(a, b, "xfer_client_request_duration_seconds", 0.5, is_m),
                "p95_s": _hq(a, b, "xfer_client_request_duration_seconds", 0.95, is_m),
                "p99_s": _hq(a, b, "xfer_client_request_duration_seconds", 0.99, is_m),
            }
    return methods


def client_figures(win: list[Snapshot]) -> Figures:
    """Client QPS, bytes/s, P50/P95/P99 (from histograms), failures and generator CPU over the window."""
    out = _no_client_figures()
    if len(win) < 2:
        return out
    a, b = win[0], win[-1]
    out.update(_client_counts(a, b))
    out["client_bytes_per_s"] = _rate(a, b, "xfer_client_transfer_bytes_total")
    out["client_upload_bytes_per_s"] = _rate(
        a, b, "xfer_client_transfer_bytes_total", lambda d: d.get("direction") == "upload"
    )
    out["client_download_bytes_per_s"] = _rate(
        a, b, "xfer_client_transfer_bytes_total", lambda d: d.get("direction") == "download"
    )
    out["client_p50_s"] = _hq(a, b, "xfer_client_request_duration_seconds", 0.5, _op)
    out["client_p95_s"] = _hq(a, b, "xfer_client_request_duration_seconds", 0.95, _op)
    out["client_p99_s"] = _hq(a, b, "xfer_client_request_duration_seconds", 0.99, _op)
    out["client_methods"] = _client_methods(a, b)
    out["gen_cpu_cores"] = _rate(a, b, "process_cpu_seconds_total")
    users = _series(win, "xfer_client_users")
    out["client_users"] = max(users) if users else None
    return out


def _no_server_figures() -> Figures:
    """server_figures' keys, every one None, in the order the row's scrape_check has always listed them."""
    return {"server_qps": None, "server_p95_s": None, "server_p99_s": None, "server_errors": None,
            "server_cpu_cores": None, "server_bytes_per_s": None, "rss_peak_bytes": None, "rss_mean_bytes": None,
            "gc_pauses": None, "gc_pause_total_s": None, "gc_pause_p99_s": None, "gc_cpu_share": None,
            "heap_inuse_mean_bytes": None, "alloc_allocated_bytes": None, "alloc_resident_bytes": None,
            "alloc_resident_peak_bytes": None, "alloc_committed_bytes": None, "server_requests": None,
            "server_cpu_per_request_s": None, "server_cpu_per_gib_s": None, "gc_pause_per_request_s": None}


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _server_traffic(a: Snapshot, b: Snapshot, cpu: float | None, rq: Requests) -> Figures:
    """Requests, errors, latency, bytes and CPU between two server snapshots (`cpu`: the seconds it used; `rq`:
    the series that count and time its requests)."""
    out: Figures = {}
    dt = b.t - a.t
    ctr = rq.counter
    out["server_qps"] = _rate(a, b, ctr.name, ctr)
    if b.sum(ctr.name, ctr) is not None and rq.errors is not None:
        out["server_errors"] = counter_growth(a, b, ctr.name, rq.is_error) or 0.0
    if rq.latency is not None:
        out.update(_resolved_quantiles(a, b, rq.latency.name, rq.latency, {"server_p95_s": 0.95, "server_p99_s": 0.99}))
    out["server_cpu_cores"] = cpu / dt if cpu is not None and dt > 0 else None
    out["server_bytes_per_s"] = _rate(a, b, "xfer_transfer_bytes_total")
    return out


def _server_cost(a: Snapshot, b: Snapshot, cpu: float | None, client_requests: float | None, ctr: Selector
                 ) -> tuple[Figures, float | None]:
    """CPU per request and per GiB moved, and the request count the per-request figures divide by."""
    # Cost per unit of work: what the server spent, whoever set the pace. It holds when the generator is
    # the bottleneck, and under a fixed offered load it is the figure that differs between configurations.
    out: Figures = {}
    req = counter_growth(a, b, ctr.name, ctr)
    moved = counter_growth(a, b, "xfer_transfer_bytes_total")
    out["server_requests"] = req
    if req is None and b.sum(ctr.name, ctr) is None:
        req = client_requests
    if cpu is not None and req:
        out["server_cpu_per_request_s"] = cpu / req
    if cpu is not None and moved:
        out["server_cpu_per_gib_s"] = cpu / (moved / (1 << 30))
    return out, req


def _go_gc(win: list[Snapshot], cpu: float | None, req: float | None) -> Figures:
    """Go GC pauses (count, total, P99), its share of the server's CPU and its pause per request."""
    a, b = win[0], win[-1]
    pauses: float | None = None
    total: float | None = None
    # Go GC: pauses from the summary's count/sum; P99 from the runtime/metrics pause histogram when exported.
    n = counter_growth(a, b, "go_gc_duration_seconds_count")
    if n is not None:
        pauses = n
        total = counter_growth(a, b, "go_gc_duration_seconds_sum")
    out: Figures = {}
    if b.buckets("go_sched_pauses_total_gc_seconds"):
        out["gc_pause_p99_s"] = _hq(a, b, "go_sched_pauses_total_gc_seconds", 0.99)
        if pauses is None:
            cnt = b.buckets("go_sched_pauses_total_gc_seconds")
            cnt0 = a.buckets("go_sched_pauses_total_gc_seconds")
            pauses = max(cnt.values()) - (max(cnt0.values()) if cnt0 else 0.0)
    elif n is not None:
        mx = [v for s in win if (v := s.get("go_gc_duration_seconds", quantile="1")) is not None]
        out["gc_pause_p99_s"] = max(mx) if mx and n else None  # the summary's max: an upper bound
    out["gc_pauses"] = pauses
    out["gc_pause_total_s"] = total
    gc_cpu = counter_growth(a, b, "go_cpu_classes_gc_total_cpu_seconds_total")
    if gc_cpu is not None and cpu:
        out["gc_cpu_share"] = gc_cpu / cpu
    if total is not None and req:
        out["gc_pause_per_request_s"] = total / req
    return out


def _memory(win: list[Snapshot], whole: list[Snapshot]) -> Figures:
    """RSS (peak over the whole run, mean over the window), the Go heap and the allocator's own figures."""
    rss_all = _series(whole, "process_resident_memory_bytes")
    res_all = _series(whole, "xfer_allocator_resident_bytes")
    return {
        "rss_peak_bytes": max(rss_all) if rss_all else None,
        "rss_mean_bytes": _mean(_series(win, "process_resident_memory_bytes")),
        "heap_inuse_mean_bytes": _mean(_series(win, "go_memstats_heap_inuse_bytes")),
        "alloc_allocated_bytes": _mean(_series(win, "xfer_allocator_allocated_bytes")),
        "alloc_resident_bytes": _mean(_series(win, "xfer_allocator_resident_bytes")),
        "alloc_resident_peak_bytes": max(res_all) if res_all else None,
        # mimalloc measures neither of those, only what it committed (servers/c/README.md, "Statistics").
        "alloc_committed_bytes": _mean(_series(win, "xfer_allocator_committed_bytes")),
    }


def server_figures(win: list[Snapshot], whole: list[Snapshot] | None = None,
                   client_requests: float | None = None, requests: Requests | None = None) -> Figures:
    """Server QPS and P95, errors, CPU, RSS (peak over the whole run, mean over the window), Go GC and
    allocator figures over the window. Figures a server does not export stay None. `requests` names the
    series that count and time its requests (a command server's [servers.requests]; default: ours,
    xfer_requests_total and xfer_request_duration_seconds). The per-request figures divide by the server's own
    count, or by `client_requests` when it keeps none (a command server exporting only the Go runtime's or
    process_* series)."""
    rq = requests or OURS
    out = _no_server_figures()
    if len(win) < 2:
        return out
    a, b = win[0], win[-1]
    cpu = counter_growth(a, b, "process_cpu_seconds_total")
    out.update(_server_traffic(a, b, cpu, rq))
    cost, req = _server_cost(a, b, cpu, client_requests, rq.counter)
    out.update(cost)
    out.update(_memory(win, whole or win))
    out.update(_go_gc(win, cpu, req))
    return out


def connection_figures(client: list[Snapshot], server: list[Snapshot], time_wait: list[int]) -> Figures:
    """Connections over the window: accepted per second by the server (xfer_connections_accepted_total),
    opened and re-opened per second by the client (loadgen's --xfer-connections counts), and the peak of
    TIME_WAIT sockets on the server's port sampled each second over the whole phase. None where not exported
    (a client that made no connection yet exports no connection counters)."""
    out: Figures = {"conns_accepted_per_s": None, "conns_opened_per_s": None, "reconnects_per_s": None,
                    "time_wait_peak": None}
    if len(server) >= 2:
        out["conns_accepted_per_s"] = _rate(server[0], server[-1], "xfer_connections_accepted_total")
    if len(client) >= 2:
        out["conns_opened_per_s"] = _rate(client[0], client[-1], "xfer_client_connections_opened_total")
        out["reconnects_per_s"] = _rate(client[0], client[-1], "xfer_client_reconnects_total")
    out["time_wait_peak"] = max(time_wait) if time_wait else None
    return out


def tls_figures(server: list[Snapshot], client: list[Snapshot], cost: Figures) -> Figures:
    """A TLS load's figures over the window's snapshots: handshakes completed per second and the share of them that
    resumed a session, by the server's count (xfer_tls_handshakes_total, xfer_tls_resumed_handshakes_total) where it
    keeps one, else by the client's (xfer_client_tls_handshakes_total: a server nobody here wrote, which exports no
    such series; grpcio does not tell whether it resumed, so over gRPC the share stays None); `tls_counted_by` says
    which. Then the server's CPU per handshake (its cores over that rate: `cost`'s server_cpu_cores, the whole
    tree's) and the bytes its TLS library holds per open TLS connection (xferd-c's xfer_tls_allocated_bytes over
    xfer_tls_connections, both means, where at least one connection was open on average: the process's RSS over a
    connection per call said nothing of a connection). Each None where its divisor is 0 or nobody counts it."""
    out: Figures = {"tls_handshakes_per_s": None, "tls_resumed_share": None, "server_cpu_per_handshake_s": None,
                    "tls_bytes_per_conn": None, "tls_counted_by": None}
    if len(server) >= 2 and server[-1].sum("xfer_tls_handshakes_total") is not None:
        out.update(_handshakes(server, "xfer_tls_handshakes_total", "server",
                               lambda s: s.sum("xfer_tls_resumed_handshakes_total")))
    elif len(client) >= 2 and client[-1].sum("xfer_client_tls_handshakes_total") is not None:
        def resumed(s: Snapshot) -> float | None:
            if s.sum("xfer_client_tls_handshakes_total", lambda d: d.get("resumed") == "unknown"):
                return None  # some handshakes' outcome is unknown (gRPC): no share
            return s.sum("xfer_client_tls_handshakes_total", lambda d: d.get("resumed") == "true") or 0.0

        out.update(_handshakes(client, "xfer_client_tls_handshakes_total", "client", resumed))
    rate = out["tls_handshakes_per_s"]
    cores = cost.get("server_cpu_cores")
    if rate and cores is not None:
        out["server_cpu_per_handshake_s"] = cores / rate
    conns = _mean(_series(server, "xfer_tls_connections"))
    held = _mean(_series(server, "xfer_tls_allocated_bytes"))
    if conns is not None and conns >= 1 and held is not None:
        out["tls_bytes_per_conn"] = held / conns
    return out


def _handshakes(win: list[Snapshot], name: str, side: str, resumed: Callable[[Snapshot], float | None]) -> Figures:
    """Handshakes per second over the window by the counter `name`, and the share `resumed` counts of them."""
    a, b = win[0], win[-1]
    done = counter_growth(a, b, name)
    out: Figures = {"tls_handshakes_per_s": _rate(a, b, name), "tls_counted_by": side}
    ra, rb = resumed(a), resumed(b)
    if done and ra is not None and rb is not None:
        out["tls_resumed_share"] = (counter_delta(ra, rb) or 0.0) / done
    return out


def live(prev: Snapshot | None, cur: Snapshot | None) -> tuple[float | None, float | None]:
    """Client QPS and P95 over the last scrape interval, for the progress display."""
    if prev is None or cur is None:
        return None, None
    return (
        _rate(prev, cur, "xfer_client_requests_total", _op),
        _hq(prev, cur, "xfer_client_request_duration_seconds", 0.95, _op),
    )


SERIES_COLUMNS = (
    "t",
    "client_qps",
    "client_p95_s",
    "client_bytes_per_s",
    "gen_cpu_cores",
    "server_qps",
    "server_p95_s",
    "rss_bytes",
    "gc_pauses_per_s",
    "gc_pause_s_per_s",
    "heap_inuse_bytes",
    "alloc_resident_bytes",
    "server_cpu_cores",
)


def series(client: list[Snapshot], server: list[Snapshot], t0: float,
           requests: Requests | None = None, tree: Sequence[TreeSample] = ()) -> list[dict[str, Any]]:
    """Per-interval series (one row per consecutive pair of client snapshots), t relative to t0; `requests`
    as server_figures takes it. The server's CPU and RSS are its whole process tree's where `tree` sampled it
    (every host server: xferbench/measure/tree.py), else what its own /metrics says."""
    rq, rows = requests or OURS, []
    srv = sorted(server, key=lambda s: s.t)
    trees = sorted(tree, key=lambda s: s.t)
    for a, b in itertools.pairwise(client):
        row: dict[str, Any] = dict.fromkeys(SERIES_COLUMNS)
        row["t"] = round(b.t - t0, 3)
        row["client_qps"] = _rate(a, b, "xfer_client_requests_total", _op)
        row["client_p95_s"] = _hq(a, b, "xfer_client_request_duration_seconds", 0.95, _op)
        row["client_bytes_per_s"] = _rate(a, b, "xfer_client_transfer_bytes_total")
        row["gen_cpu_cores"] = _rate(a, b, "process_cpu_seconds_total")
        sa, sb = _nearest(srv, a.t), _nearest(srv, b.t)
        if sa is not None and sb is not None and sb.t > sa.t:
            row["server_qps"] = _rate(sa, sb, rq.counter.name, rq.counter)
            row["server_p95_s"] = _hq(sa, sb, rq.latency.name, 0.95, rq.latency) if rq.latency else None
            row["rss_bytes"] = sb.sum("process_resident_memory_bytes")
            row["gc_pauses_per_s"] = _rate(sa, sb, "go_gc_duration_seconds_count")
            row["gc_pause_s_per_s"] = _rate(sa, sb, "go_gc_duration_seconds_sum")
            row["heap_inuse_bytes"] = sb.sum("go_memstats_heap_inuse_bytes")
            row["alloc_resident_bytes"] = sb.sum("xfer_allocator_resident_bytes")
            row["server_cpu_cores"] = _rate(sa, sb, "process_cpu_seconds_total")
        ta, tb = _nearest(trees, a.t), _nearest(trees, b.t)
        if ta is not None and tb is not None and tb.t > ta.t:
            row["server_cpu_cores"] = (tb.cpu_s - ta.cpu_s) / (tb.t - ta.t)
            row["rss_bytes"] = tb.rss_bytes
        rows.append(row)
    return rows


_Timed = TypeVar("_Timed", Snapshot, TreeSample)


def _nearest(snaps: Sequence[_Timed], t: float, slack: float = 0.6) -> _Timed | None:
    best = None
    for s in snaps:
        if abs(s.t - t) <= slack and (best is None or abs(s.t - t) < abs(best.t - t)):
            best = s
    return best


# The server's own process_cpu_seconds_total against the tree's clock: it reads /proc/self/stat (10 ms ticks) at
# its own scrape instants, so it may differ by a few ticks at each end of the window and by this share besides.
SELF_CPU_TOLERANCE = 0.05
SELF_CPU_TOLERANCE_S = 0.04


# The tree's CPU in a window is a value when the clock's step can make it wrong by at most half of it; below that
# (xferbench/measure/tree.py Window.cpu_error_s) it is only bounded.
RESOLVED_STEPS = 2.0
CpuFigure = Literal["server_cpu_cores", "server_cpu_per_request_s", "server_cpu_per_op_s", "server_cpu_per_gib_s"]


def _bound_cpu(out: Figures, measured: Figures, tree: TreeWindow, requests: float | None, client: float | None,
               rate: float | None) -> None:
    """The CPU figures as bounds, each the most it can be given the clock's step, in place of their values."""
    assert tree.cpu_error_s is not None and tree.span_s
    most = (tree.cpu_s or 0.0) + tree.cpu_error_s
    divisors: dict[CpuFigure, float | None] = {"server_cpu_cores": tree.span_s, "server_cpu_per_request_s": requests,
        "server_cpu_per_op_s": client, "server_cpu_per_gib_s": rate * tree.span_s / (1 << 30) if rate else None}
    bounds = dict(measured.get("bounds") or {})
    for key, divisor in divisors.items():
        out[key] = None
        if divisor:
            bounds[key] = most / divisor
    out["bounds"] = bounds


def cost_figures(tree: TreeWindow, measured: Figures, clock: str) -> tuple[Figures, list[str]]:
    """What the server's whole process tree cost over the window (xferbench/measure/tree.py's window figures),
    by the tree's clock, in place of what the server says of its own process: CPU cores; CPU per request over the
    server's own count where it keeps one (`measured`'s server_requests), else the client's (`cpu_requests_from`
    says which); CPU per client operation, always the client's count; CPU per GiB moved; and the server's own
    process_cpu_seconds_total as a cross-check (`cpu_selfreport_ratio`, warned about when a one-process server
    disagrees beyond the tolerance). With the figures, what the row's warnings must say.

    Where the clock's ticks cannot resolve the window's CPU (a light server, on /proc's 10 ms ticks), the CPU
    figures are not values but bounds (`bounds`, shown "≤ X" and never judged): a figure of 0, or one off by more
    than half, would rank servers by the clock's step."""
    out = tree.figures.copy()
    warnings: list[str] = []
    cpu, span = tree.cpu_s, tree.span_s
    if cpu is None or not span:
        return out, warnings  # too few samples of the tree: whatever the server reported stands
    out["cpu_clock"] = clock
    own = measured.get("server_cpu_cores")
    out["server_cpu_cores"] = cores = cpu / span
    by_server = measured.get("server_requests")
    client = measured.get("client_requests")
    requests = by_server or client
    out["cpu_requests_from"] = "server" if by_server else "client" if client else None
    out["server_cpu_per_request_s"] = cpu / requests if requests else None
    out["server_cpu_per_op_s"] = cpu / client if client else None
    rate = measured.get("server_bytes_per_s") or measured.get("client_bytes_per_s")
    out["server_cpu_per_gib_s"] = cpu / (rate * span / (1 << 30)) if rate else None
    if tree.cpu_error_s is not None and cpu < RESOLVED_STEPS * tree.cpu_error_s:
        _bound_cpu(out, measured, tree, requests, client, rate)
    if own is not None and cores > 0:
        out["cpu_selfreport_ratio"] = own / cores
        alone = tree.figures.get("procs_peak") == 1
        off = abs(own - cores) * span
        if alone and off > SELF_CPU_TOLERANCE_S and abs(own / cores - 1) > SELF_CPU_TOLERANCE:
            warnings.append(
                f"the server's own process_cpu_seconds_total says {own:.3f} cores where its {clock} says "
                f"{cores:.3f}: beyond the {SELF_CPU_TOLERANCE:.0%} tolerance (the {clock} figure is the one used)")
    return out, warnings
