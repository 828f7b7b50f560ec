"""A Locust plugin for a user's own locustfile: every request Locust counts, as loadgen's client metrics.

The runner (`[load] locustfile`, xferbench/run/generators.py) loads it beside the user's file
(`-f USER.py,loadgen/_request_metrics.py`) and gives it `--xfer-metrics-port`. It listens to Locust's
`request` event, the one Locust's own statistics are made of, so whatever users the file holds (HttpUser,
FastHttpUser, a plain User firing the event) their calls become xfer_client_requests_total and
xfer_client_request_duration_seconds under the request's name (the `method` label) and type (`transport`),
code "ok" or "error", plus process_cpu_seconds_total and xfer_client_users: the families the runner
scrapes every second, so its window, percentiles and CPU per request work as for loadgen's users.

`--xfer-final-stats PATH` writes Locust's own totals of the whole run (requests, failures, rps and the
50/95/99th percentiles in seconds) as JSON when Locust quits, after its users stopped: Locust rewrites its
`--csv` files only every second and not at the end, so they miss the run's last second.

With `--processes N` each process serves its own (workers on the first free ports after the master's), and
the master lists its workers' URLs on `/workers`, as loadgen's processes do: the runner adds them all up.
Not named like a locustfile (it starts with `_`), so `locust -f loadgen/` does not load it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from locust import events
from locust.runners import MasterRunner, WorkerRunner

from loadgen._exporter import ClientCollector, app, gauge, registry, serve_first_free
from loadgen._recorder import Recorder

FLAG = "--xfer-metrics-port"
FINAL_FLAG = "--xfer-final-stats"
_recorder = Recorder()
_state: dict[str, Any] = {}  # this process's runner and the URL of its /metrics
_workers: dict[str, str] = {}  # on a master: worker id -> its /metrics URL (what the runner reads on /workers)
URL_KEY = "xfer_request_metrics_url"
WORKER_PORT_SPAN = 100


def _options(parser: Any, **_kw: Any) -> None:
    parser.add_argument(
        FLAG,
        dest="xfer_metrics_port",
        type=int,
        default=0,
        help="Port of this process's client /metrics (the runner's scrape target)",
    )
    parser.add_argument(
        FINAL_FLAG,
        dest="xfer_final_stats",
        default="",
        help="Write Locust's totals of the whole run to this JSON file when it quits",
    )


def _on_request(
    request_type: str, name: str, response_time: float, exception: BaseException | None = None, **_kw: Any
) -> None:
    _recorder.observe(str(request_type), str(name), (response_time or 0.0) / 1000.0, "ok" if exception is None else "error")


def _gauges() -> list[Any]:
    # a master's runner counts its workers' users, which the runner adds up from the workers themselves
    runner = _state.get("runner")
    here = 0 if runner is None or isinstance(runner, MasterRunner) else runner.user_count
    return [gauge("xfer_client_users", "Locust users running in this process.", float(here))]


def _on_report_to_master(client_id: str, data: dict[str, Any], **_kw: Any) -> None:
    data[URL_KEY] = _state.get("url")


def _on_worker_report(client_id: str, data: dict[str, Any], **_kw: Any) -> None:
    if url := data.get(URL_KEY):
        _workers[client_id] = url


def final_stats(total: Any) -> dict[str, float | None]:
    """Locust's aggregated entry (`stats.total`) as the runner reads it; percentiles in seconds."""
    none = not total.num_requests

    def pct(q: float) -> float | None:
        return None if none else total.get_response_time_percentile(q) / 1000.0

    return {"requests": float(total.num_requests), "failures": float(total.num_failures),
            "rps": float(total.total_rps), "p50_s": pct(0.5), "p95_s": pct(0.95), "p99_s": pct(0.99)}


def _on_quit(**_kw: Any) -> None:
    runner, path = _state.get("runner"), _state.get("final_path")
    if runner is None or not path or isinstance(runner, WorkerRunner):  # a master holds every worker's stats
        return
    tmp = Path(f"{path}.tmp")
    tmp.write_text(json.dumps(final_stats(runner.stats.total)))
    tmp.replace(path)  # whole or absent: never a partial file


def _on_init(environment: Any, runner: Any = None, **_kw: Any) -> None:
    environment.events.request.add_listener(_on_request)
    environment.events.quit.add_listener(_on_quit)
    _state["runner"] = runner
    _state["final_path"] = str(environment.parsed_options.xfer_final_stats or "")
    port = int(environment.parsed_options.xfer_metrics_port)
    ports = [port]
    if isinstance(runner, WorkerRunner):  # as loadgen's workers: the first free port after the master's
        ports = list(range(port + 1, min(65536, port + 1 + WORKER_PORT_SPAN)))
        environment.events.report_to_master.add_listener(_on_report_to_master)
    elif isinstance(runner, MasterRunner):
        environment.events.worker_report.add_listener(_on_worker_report)
    own = registry(ClientCollector(lambda: _recorder.total, _gauges), with_process=True)
    role = "master" if isinstance(runner, MasterRunner) else "worker" if isinstance(runner, WorkerRunner) else "local"
    bound = serve_first_free("127.0.0.1", ports, app(own, own, lambda: {"role": role, "workers": dict(_workers)}))
    _state["url"] = f"http://127.0.0.1:{bound}/metrics"


events.init_command_line_parser.add_listener(_options)
events.init.add_listener(_on_init)
