"""A stand-in loadgen with the real one's options and client metrics, doing no I/O (runner tests only)."""

from __future__ import annotations

import time

from locust import User, events, task
from prometheus_client import Counter, Gauge, Histogram, start_http_server

BUCKETS = (
    0.0001,
    0.00015,
    0.0002,
    0.0003,
    0.0005,
    0.0007,
    0.001,
    0.0015,
    0.002,
    0.003,
    0.005,
    0.007,
    0.01,
    0.015,
    0.02,
    0.03,
    0.05,
    0.07,
    0.1,
    0.15,
    0.2,
    0.3,
    0.5,
    0.7,
    1,
    1.5,
    2,
    3,
    5,
    7,
    10,
)
REQS = Counter("xfer_client_requests", "", ["transport", "method", "result"])
DUR = Histogram("xfer_client_request_duration_seconds", "", ["transport", "method"], buckets=BUCKETS)
BYTES = Counter("xfer_client_transfer_bytes", "", ["direction"])
USERS = Gauge("xfer_client_users", "")


@events.init_command_line_parser.add_listener
def _options(parser) -> None:
    for opt, default in (
        ("--xfer-profile", "steady"),
        ("--xfer-mix", ""),
        ("--xfer-sizes", ""),
        ("--xfer-chunk", ""),
        ("--xfer-inflight", "1"),
        ("--xfer-verify", "on"),
        ("--xfer-rate", ""),
        ("--xfer-metrics-port", "0"),
    ):
        parser.add_argument(opt, default=default)


@events.init.add_listener
def _init(environment, **_kw) -> None:
    start_http_server(int(environment.parsed_options.xfer_metrics_port), addr="127.0.0.1")


class FakeUser(User):
    def on_start(self) -> None:
        USERS.inc()

    @task
    def echo(self) -> None:
        t = time.perf_counter()
        time.sleep(0.005)
        DUR.labels("frame", "Echo").observe(time.perf_counter() - t)
        REQS.labels("frame", "Echo", "ok").inc()
        BYTES.labels("upload").inc(1024)
