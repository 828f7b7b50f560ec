
"""Writes the Grafana dashboards in deploy/grafana/dashboards/ (run it after changing this file).

The JSON files are committed; tests/deploy checks that they equal this script's output and evaluates every
panel query against a real Prometheus. Queries use the recording rules of deploy/prometheus/rules/ where
one exists, and every server query can be narrowed by the `config` label those rules attach.

    .venv/bin/python deploy/grafana/gen_dashboards.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "dashboards"
DS = {"type": "prometheus", "uid": "xferbench-prometheus"}  # provisioning/datasources/prometheus.yml

# Filters shared by the panels; the variables are defined in `variables()`.
SRV = 'server=~"$server", config=~"$config"'
SRV_T = 'server=~"$server", config=~"$config", transport=~"$transport"'
CONFIG = 'instance:xfer_build_info:config{server=~"$server", config=~"$config"}'
JOIN = f"* on (job, instance) group_left (config) {CONFIG}"

# Grafana's window for rate(): at least four scrape intervals at any zoom, so a rate always has samples.
RATE = "$__rate_interval"
SERVER_BUCKETS = 'xfer_request_duration_seconds_bucket{job="xferd", server=~"$server", transport=~"$transport"}'


def server_quantile(q: float, by: str) -> str:
    """The servers' q-quantile request duration, from their histograms, grouped by the labels in by."""
    return f"histogram_quantile({q}, sum by ({by}, le) (rate({SERVER_BUCKETS}[{RATE}]) {JOIN}))"


def target(expr: str, legend: str, ref: str, *, instant: bool = False) -> dict[str, Any]:
    return {"datasource": DS, "refId": ref, "expr": expr, "legendFormat": legend,
            "range": not instant, "instant": instant}


def panel(title: str, unit: str, targets: list[tuple[str, str]], *, kind: str = "timeseries",
          desc: str = "", instant: bool = False, thresholds: list[tuple[str, float | None]] | None = None,
          w: int = 12, h: int = 8) -> dict[str, Any]:
    steps = [{"color": c, "value": v} for c, v in (thresholds or [("green", None)])]
    p: dict[str, Any] = {
        "type": kind,
        "title": title,
        "description": desc,
        "datasource": DS,
        "gridPos": {"h": h, "w": w, "x": 0, "y": 0},
        "fieldConfig": {"defaults": {"unit": unit, "thresholds": {"mode": "absolute", "steps": steps}},
                        "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["mean", "max"]},
                    "tooltip": {"mode": "multi", "sort": "desc"}},
        "targets": [target(e, lg, chr(ord("A") + i), instant=instant) for i, (e, lg) in enumerate(targets)],
    }
    if kind == "bargauge":
        p["options"] = {"orientation": "horizontal", "displayMode": "gradient", "showUnfilled": True,
                        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}}
    if thresholds and kind == "timeseries":
        p["fieldConfig"]["defaults"]["custom"] = {"thresholdsStyle": {"mode": "line"}}
    return p


def row(title: str, panels: list[dict[str, Any]], *, collapsed: bool = False) -> list[dict[str, Any]]:
    """A row and its panels; a collapsed row holds its panels inside itself, as Grafana stores it."""
    r = {"type": "row", "title": title, "collapsed": collapsed, "gridPos": {"h": 1, "w": 24, "x": 0, "y": 0},
         "panels": []}
    if collapsed:
        r["panels"] = panels
        return [r]
    return [r, *panels]


def layout(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Gives every panel an id and a grid position: rows full width, panels filling lines left to right."""
    x = y = line_h = 0
    next_id = 1

    def place(p: dict[str, Any]) -> None:
        nonlocal x, y, line_h, next_id
        g = p["gridPos"]
        if p["type"] == "row":
            y += line_h
            x, line_h = 0, 0
            g.update(x=0, y=y)
            y += 1
        else:
            if x + g["w"] > 24:
                y += line_h
                x, line_h = 0, 0
            g.update(x=x, y=y)
            x += g["w"]
            line_h = max(line_h, g["h"])
        p["id"] = next_id
        next_id += 1

    for it in items:
        place(it)
        if it["type"] == "row" and it["collapsed"]:
            saved = (x, y, line_h)
            for p in it["panels"]:
                place(p)
            x, y, line_h = saved
    return items


def query_var(name: str, label: str, query: str, *, include_all: bool = True) -> dict[str, Any]:
    return {
        "name": name, "label": label, "type": "query", "datasource": DS,
        "query": {"query": query, "refId": f"{name}-var"}, "definition": query,
        "refresh": 2, "sort": 1, "multi": True, "includeAll": include_all, "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]}, "options": [], "hide": 0,
    }


def variables(*, transport: bool = True) -> list[dict[str, Any]]:
    v = [
        query_var("server", "server", "label_values(xfer_build_info, server)"),
        query_var("config", "configuration",
                  'label_values(instance:xfer_build_info:config{server=~"$server"}, config)'),
    ]
    if transport:
        v.append(query_var("transport", "transport",
                           'label_values(xfer_requests_total{server=~"$server"}, transport)'))
    return v


def dashboard(uid: str, title: str, desc: str, panels: list[dict[str, Any]], *,
              transport: bool = True) -> dict[str, Any]:
    return {
        "uid": uid, "title": title, "description": desc, "tags": ["xferbench"],
        "editable": True, "graphTooltip": 1, "schemaVersion": 39, "version": 1,
        "time": {"from": "now-15m", "to": "now"}, "refresh": "5s", "timezone": "",
        "templating": {"list": variables(transport=transport)},
        "annotations": {"list": []}, "links": [
            {"title": "xferbench", "type": "dashboards", "tags": ["xferbench"], "asDropdown": True}],
        "panels": layout(panels),
    }


def overview() -> dict[str, Any]:
    client_t = 'transport=~"$transport"'
    return dashboard("xferbench-overview", "xferbench — overview",
                     "Client (Locust) and server side by side: QPS, latency, bytes/s, errors, memory, GC, CPU.", [
        *row("Throughput and latency: client vs server", [
            panel("QPS: client vs server", "reqps", [
                (f"sum by (transport) (transport_method_code:xfer_client_requests:rate1m{{{client_t}}})",
                 "client {{transport}}"),
                (f"sum by (server, config, transport) (instance_transport_method:xfer_requests:rate1m{{{SRV_T}}})",
                 "server {{server}} {{transport}} {{config}}"),
            ], desc="Client: every Locust process summed. Server: completed calls (a frame upload is "
                    "begin + chunks + commit; a gRPC upload is one stream)."),
            panel("P95 / P99 latency, all methods: client vs server", "s", [
                (f"histogram_quantile(0.95, sum by (transport, le) (rate(xfer_client_request_duration_seconds_bucket"
                 f"{{job=\"locust\", {client_t}}}[{RATE}])))", "client P95 {{transport}}"),
                (f"histogram_quantile(0.99, sum by (transport, le) (rate(xfer_client_request_duration_seconds_bucket"
                 f"{{job=\"locust\", {client_t}}}[{RATE}])))", "client P99 {{transport}}"),
                (server_quantile(0.95, "server, config, transport"), "server P95 {{server}} {{transport}} {{config}}"),
                (server_quantile(0.99, "server, config, transport"), "server P99 {{server}} {{transport}} {{config}}"),
            ], desc="From histograms (client buckets equal the servers'), never from Locust's rounded samples."),
            panel("P95 by method: client vs server", "s", [
                (f"transport_method:xfer_client_request_duration_seconds:p95_1m{{{client_t}}}",
                 "client {{transport}} {{method}}"),
                (f"instance_transport_method:xfer_request_duration_seconds:p95_1m{{{SRV_T}}}",
                 "server {{server}} {{transport}} {{method}} {{config}}"),
            ]),
            panel("P99 by method: client vs server", "s", [
                (f"transport_method:xfer_client_request_duration_seconds:p99_1m{{{client_t}}}",
                 "client {{transport}} {{method}}"),
                (f"instance_transport_method:xfer_request_duration_seconds:p99_1m{{{SRV_T}}}",
                 "server {{server}} {{transport}} {{method}} {{config}}"),
            ]),
            panel("Payload bytes/s: client vs server", "Bps", [
                ("direction:xfer_client_transfer_bytes:rate1m", "client {{direction}}"),
                (f"sum by (server, config, direction) (instance_direction:xfer_transfer_bytes:rate1m{{{SRV}}})",
                 "server {{server}} {{direction}} {{config}}"),
            ]),
            panel("Errors/s: client vs server", "reqps", [
                (f'sum by (transport, method) (transport_method_code:xfer_client_requests:rate1m'
                 f'{{{client_t}, code!="ok"}}) or sum by (transport, method) '
                 f'(transport_method_code:xfer_client_requests:rate1m{{{client_t}}}) * 0',
                 "client {{transport}} {{method}}"),
                (f"sum by (server, config, transport, method) "
                 f"(instance_transport_method:xfer_request_errors:rate1m{{{SRV_T}}})",
                 "server {{server}} {{transport}} {{method}} {{config}}"),
            ], thresholds=[("green", None), ("red", 0.001)]),
            panel("Server errors by code (time range)", "short", [
                ('sum by (server, transport, method, code) (increase(xfer_requests_total{job="xferd", '
                 'server=~"$server", transport=~"$transport", code!="ok"}[$__range]))',
                 "{{server}} {{transport}} {{method}} {{code}}"),
            ], kind="table", instant=True, desc="Every non-ok code the servers answered in the selected range."),
            panel("Locust users, connections, calls in flight", "short", [
                ("sum(xfer_client_users)", "users (all Locust processes)"),
                (f"xfer_connections{{job=\"xferd\", server=~\"$server\"}} {JOIN}", "connections {{server}} {{config}}"),
                (f"xfer_inflight_requests{{job=\"xferd\", server=~\"$server\"}} {JOIN}",
                 "in flight {{server}} {{config}}"),
            ]),
        ]),
        *row("Memory", [
            panel("Server RSS", "bytes", [
                (f"instance:process_resident_memory_bytes:current{{{SRV}}}", "{{server}} {{config}}"),
            ]),
            panel("Go heap", "bytes", [
                (f'go_memstats_heap_alloc_bytes{{job="xferd", server=~"$server"}} {JOIN}',
                 "heap alloc {{server}} {{config}}"),
                (f'go_memstats_heap_sys_bytes{{job="xferd", server=~"$server"}} {JOIN}',
                 "heap sys {{server}} {{config}}"),
                (f'go_memstats_next_gc_bytes{{job="xferd", server=~"$server"}} {JOIN}',
                 "next GC target {{server}} {{config}}"),
            ]),
            panel("Allocator: allocated vs resident (xferd-c)", "bytes", [
                (f'xfer_allocator_allocated_bytes{{job="xferd", server=~"$server"}} {JOIN}',
                 "allocated {{server}} {{config}}"),
                (f'xfer_allocator_resident_bytes{{job="xferd", server=~"$server"}} {JOIN}',
                 "resident {{server}} {{config}}"),
            ], desc="From the active allocator's own statistics (mallinfo2, jemalloc stats, tcmalloc "
                    "properties, mi_process_info, the pool's counters)."),
            panel("Buffer pool: gets vs new buffers per second", "ops", [
                (f'sum by (server, config) (rate(xfer_buffer_pool_gets_total{{job="xferd", server=~"$server"}}'
                 f"[{RATE}]) {JOIN})", "gets {{server}} {{config}}"),
                (f'sum by (server, config) (rate(xfer_buffer_pool_news_total{{job="xferd", server=~"$server"}}'
                 f"[{RATE}]) {JOIN})", "new {{server}} {{config}}"),
            ], desc="With the pool on, new buffers should be a small fraction of gets."),
        ]),
        *row("Go GC", [
            panel("GC cycles per second", "ops", [
                (f"instance:go_gc_cycles:rate1m{{{SRV}}}", "{{server}} {{config}}"),
            ]),
            panel("Stop-the-world pause: share of time and P99", "s", [
                (f"instance:go_sched_pauses_total_gc_seconds:p99_1m{{{SRV}}}", "pause P99 {{server}} {{config}}"),
                (f'go_gc_duration_seconds{{job="xferd", server=~"$server", quantile="1"}} {JOIN}',
                 "longest recent pause {{server}} {{config}}"),
                (f"instance:go_gc_pause_seconds:rate1m{{{SRV}}}", "pause seconds per second {{server}} {{config}}"),
            ]),
        ], collapsed=True),
        *row("CPU", [
            panel("Server CPU (cores)", "short", [
                (f"instance:process_cpu_seconds:rate1m{{{SRV}}}", "{{server}} {{config}}"),
            ]),
            panel("Load generator CPU per Locust process (cores)", "short", [
                ("instance:locust_process_cpu_seconds:rate1m", "{{instance}}"),
            ], thresholds=[("green", None), ("red", 0.9)],
               desc="Above ~0.9 of a core a Locust process is saturated and the client figures understate "
                    "the server."),
        ]),
    ])


def allocators() -> dict[str, Any]:
    return dashboard("xferbench-allocators", "xferbench — allocator comparison",
                     "Configurations side by side (allocator, pool, GOGC, GOMEMLIMIT from xfer_build_info).", [
        *row("Side by side (selected time range)", [
            panel("QPS by configuration", "reqps", [
                (f"sum by (config) (instance_transport_method:xfer_requests:rate1m{{{SRV_T}}})", "{{config}}"),
            ], kind="bargauge", w=8),
            panel("P99 latency by configuration", "s", [
                (server_quantile(0.99, "config"), "{{config}}"),
            ], kind="bargauge", w=8),
            panel("Peak RSS by configuration", "bytes", [
                (f"max by (config) (max_over_time(instance:process_resident_memory_bytes:max1m{{{SRV}}}[$__range]))",
                 "{{config}}"),
            ], kind="bargauge", w=8),
            panel("Requests per CPU-second by configuration", "short", [
                (f"sum by (config) (instance_transport_method:xfer_requests:rate1m{{{SRV_T}}}) / "
                 f"sum by (config) (instance:process_cpu_seconds:rate1m{{{SRV}}})", "{{config}}"),
            ], kind="bargauge", w=8, desc="Work done per unit of server CPU: higher is cheaper."),
            panel("Allocator resident / allocated (xferd-c)", "percentunit", [
                (f'sum by (config) (xfer_allocator_resident_bytes{{job="xferd", server=~"$server"}} {JOIN}) / '
                 f'sum by (config) (xfer_allocator_allocated_bytes{{job="xferd", server=~"$server"}} {JOIN})',
                 "{{config}}"),
            ], kind="bargauge", w=8, desc="Memory held per byte in use: fragmentation and caching overhead."),
            panel("Payload bytes/s per MiB of RSS", "short", [
                (f"sum by (config) (instance_direction:xfer_transfer_bytes:rate1m{{{SRV}}}) / "
                 f"(sum by (config) (instance:process_resident_memory_bytes:current{{{SRV}}}) / 1048576)",
                 "{{config}}"),
            ], kind="bargauge", w=8),
        ]),
        *row("Over time, one line per configuration", [
            panel("P95 latency", "s", [
                (server_quantile(0.95, "config"), "{{config}}"),
            ]),
            panel("RSS", "bytes", [
                (f"max by (config) (instance:process_resident_memory_bytes:current{{{SRV}}})", "{{config}}"),
            ]),
            panel("Allocator resident bytes (xferd-c)", "bytes", [
                (f'max by (config) (xfer_allocator_resident_bytes{{job="xferd", server=~"$server"}} {JOIN})',
                 "{{config}}"),
            ]),
            panel("Server CPU (cores)", "short", [
                (f"sum by (config) (instance:process_cpu_seconds:rate1m{{{SRV}}})", "{{config}}"),
            ]),
        ]),
    ])


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, d in (("overview.json", overview()), ("allocators.json", allocators())):
        (OUT / name).write_text(json.dumps(d, indent=2) + "\n")


if __name__ == "__main__":
    main()
