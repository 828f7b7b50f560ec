"""A Locust plugin for a user's own locustfile: every request Locust counts, as loadgen's client metrics.

The runner (`[load] locustfile`, xferbench/generator.py) loads it beside the user's file
(`-f USER.py,loadgen/_request_metrics.py`) and gives it `--xfer-metrics-port`. It listens to Locust's
`request` event, the one Locust's own statistics are made of, so whatever users the file holds (HttpUser,
FastHttpUser, a plain User firing the event) their calls become xfer_client_requests_total and
xfer_client_request_duration_seconds under the request's name (the `method` label) and type (`transport`),
code "ok" or "error", plus process_cpu_seconds_total and xfer_client_users: the families the runner
scrapes every second, so its window, percentiles and CPU per request work as for loadgen's users.

Not named like a locustfile (it starts with `_`), so `locust -f loadgen/` does not load it. It runs in
one process only: the runner refuses `processes` with a locustfile.
"""

from __future__ import annotations

from typing import Any

from locust import events

from loadgen._exporter import ClientCollector, app, gauge, registry, serve_first_free
from loadgen._recorder import Recorder

FLAG = "--xfer-metrics-port"
_recorder = Recorder()
_users: list[Any] = []  # the environment's runner, once there is one


def _options(parser: Any, **_kw: Any) -> None:
    parser.add_argument(
        FLAG,
        dest="xfer_metrics_port",
        type=int,
        default=0,
        help="Port of this process's client /metrics (the runner's scrape target)",
    )


def _on_request(
    request_type: str, name: str, response_time: float, exception: BaseException | None = None, **_kw: Any
) -> None:
    _recorder.observe(str(request_type), str(name), (response_time or 0.0) / 1000.0, "ok" if exception is None else "error")


def _gauges() -> list[Any]:
    runner = _users[0] if _users else None
    return [gauge("xfer_client_users", "Locust users running.", float(runner.user_count if runner else 0))]


def _on_init(environment: Any, runner: Any = None, **_kw: Any) -> None:
    environment.events.request.add_listener(_on_request)
    if runner is not None:
        _users.append(runner)
    own = registry(ClientCollector(lambda: _recorder.total, _gauges), with_process=True)
    serve_first_free("127.0.0.1", [environment.parsed_options.xfer_metrics_port], app(own, own, lambda: {}))


events.init_command_line_parser.add_listener(_options)
events.init.add_listener(_on_init)
