"""Client metrics as Prometheus families (a prometheus_client Collector) and the HTTP endpoint serving them.

Paths: `/metrics` (this process), `/metrics/cluster` (on a master: the merge of its workers' last
reports; elsewhere the same as /metrics) and `/workers` (JSON: this process's role, URL and its workers').
Served by gevent's WSGI server, since Locust runs on gevent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from gevent.pywsgi import WSGIServer
from prometheus_client import CollectorRegistry, ProcessCollector, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from loadgen._recorder import BOUNDS, Snapshot

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
LABELS = ("transport", "method")


def _le(bound: float) -> str:
    return repr(float(bound))


def families(snap: Snapshot) -> Iterator[CounterMetricFamily | HistogramMetricFamily]:
    """The xfer_client_* families of a snapshot (names and labels: docs/DESIGN.md)."""
    calls = CounterMetricFamily("xfer_client_requests_total", "Calls made, by outcome: code is ok or the "
                                "PROTOCOL.md status code the call failed with.", labels=(*LABELS, "code"))
    durations = HistogramMetricFamily(
        "xfer_client_request_duration_seconds", "Call durations (ok and failed), from the intended start in "
        "open-loop mode; Upload/Download are whole transfers, *Chunk one chunk each.", labels=LABELS)
    for (t, m), s in sorted(snap.series.items()):
        for code, n in sorted(snap.codes(t, m).items()):
            calls.add_metric([t, m, code], n)
        cum, buckets = 0, []
        for bound, n in zip(BOUNDS, s.prom, strict=False):
            cum += n
            buckets.append((_le(bound), cum))
        buckets.append(("+Inf", s.count))
        durations.add_metric([t, m], buckets, s.sum)
    yield calls
    yield durations
    errors = CounterMetricFamily("xfer_client_errors_total", "Failed calls by code (the server's status "
                                 "code, or the client's).", labels=(*LABELS, "code"))
    for (t, m, c), n in sorted(snap.errors.items()):
        errors.add_metric([t, m, c], n)
    yield errors
    moved = CounterMetricFamily("xfer_client_transfer_bytes_total", "Bytes of completed transfers.",
                                labels=("direction",))
    for d in ("upload", "download"):
        moved.add_metric([d], snap.bytes.get(d, 0))
    yield moved
    checked = CounterMetricFamily("xfer_client_verifications_total", "Checksums (Upload, Download), echo payloads "
                                  "and meta answers checked; result is ok or mismatch.", labels=("method", "result"))
    for (m, r), n in sorted(snap.verified.items()):
        checked.add_metric([m, r], n)
    yield checked
    opened = CounterMetricFamily("xfer_client_connections_opened_total", "Connections this client opened "
                                 "(a TCP connection made; gRPC: a channel that became ready).", labels=("transport",))
    again = CounterMetricFamily("xfer_client_reconnects_total", "Of those, connections re-opened after an error "
                                "or close (--xfer-connections user or pool).", labels=("transport",))
    for t in sorted({t for t, _e in snap.conns}):
        opened.add_metric([t], snap.conns.get((t, "opened"), 0))
        again.add_metric([t], snap.conns.get((t, "reconnect"), 0))
    yield opened
    yield again
    handshakes = CounterMetricFamily("xfer_client_tls_handshakes_total", "TLS handshakes this client made (one per "
                                     "connection); resumed: true, false, or unknown (gRPC: grpcio does not tell).",
                                     labels=("transport", "resumed"))
    tls = dict(snap.tls)
    # Both outcomes from 0 once a transport has a known one, so that rate() sees the first of each.
    for t in {t for t, r in tls if r != "unknown"}:
        for r in ("true", "false"):
            tls.setdefault((t, r), 0)
    for (t, r), n in sorted(tls.items()):
        handshakes.add_metric([t, r], n)
    yield handshakes


class ClientCollector(Collector):
    """Collects the families of `snapshot()` and the gauges of `gauges()` at each scrape."""

    def __init__(self, snapshot: Callable[[], Snapshot], gauges: Callable[[], list[GaugeMetricFamily]]) -> None:
        self._snapshot = snapshot
        self._gauges = gauges

    def collect(self) -> Iterator[CounterMetricFamily | HistogramMetricFamily | GaugeMetricFamily]:
        yield from families(self._snapshot())
        yield from self._gauges()


def gauge(name: str, doc: str, value: float, **labels: str) -> GaugeMetricFamily:
    g = GaugeMetricFamily(name, doc, labels=tuple(labels))
    g.add_metric(list(labels.values()), value)
    return g


def registry(collector: Collector, with_process: bool) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)
    if with_process:
        ProcessCollector(registry=reg)  # process_cpu_seconds_total, process_resident_memory_bytes, ...
    return reg


def app(own: CollectorRegistry, cluster: CollectorRegistry, workers: Callable[[], dict[str, Any]]) -> WSGIApp:
    routes: dict[str, WSGIApp] = {"/metrics": make_wsgi_app(own), "/metrics/cluster": make_wsgi_app(cluster)}

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path in routes:
            return routes[path](environ, start_response)
        if path == "/workers":
            body = json.dumps(workers(), indent=1).encode()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found: try /metrics, /metrics/cluster or /workers\n"]

    return serve


def serve_first_free(host: str, ports: list[int], wsgi: WSGIApp) -> int:
    """Serves `wsgi` on the first port of `ports` that binds and returns it; raises the last OSError if none
    does. The server runs as long as the process (gevent keeps it)."""
    last: OSError | None = None
    for port in ports:
        server = WSGIServer((host, port), wsgi, log=None, error_log=None)
        try:
            server.start()
        except OSError as e:
            last = e
            continue
        return int(server.socket.getsockname()[1])
    raise last or OSError(f"no port to try on {host}")
