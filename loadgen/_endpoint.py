"""This Locust process's metrics endpoint: its registries (client figures, process figures, who it is) and
the port it serves them on (workers take the first free one after the master's)."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from prometheus_client.core import GaugeMetricFamily

from loadgen import _exporter
from loadgen._process import XferProcess

log = logging.getLogger("xfer")
WORKER_PORT_SPAN = 100  # workers try PORT+1 .. PORT+100


def info(xfer: XferProcess) -> list[Any]:
    """Who this process is: role, pid, users; on a master, its workers and their URLs."""
    gauges = [
        _exporter.gauge("xfer_client_info", "This Locust process: role (local, master, worker) and pid.", 1,
                        role=xfer.role, pid=str(os.getpid()), transport=xfer.transport, profile=xfer.config.profile),
        _exporter.gauge("xfer_client_users", "Locust users running in this process.", xfer.users_here()),
    ]
    if xfer.role == "master":
        runner = xfer.environment.runner
        gauges.append(_exporter.gauge("xfer_client_cluster_users", "Users running on all workers (master only).",
                                      runner.user_count if runner else 0))
        workers = GaugeMetricFamily("xfer_client_worker_info", "A worker and the URL of its /metrics (master only).",
                                    labels=("worker", "url"))
        for worker, url in sorted(xfer.workers.urls.items()):
            workers.add_metric([worker, url], 1)
        gauges.append(workers)
    return gauges


def _cluster_users(xfer: XferProcess) -> list[Any]:
    runner = xfer.environment.runner
    return [_exporter.gauge("xfer_client_users", "Locust users running in the cluster.",
                            runner.user_count if runner else 0)]


def start(xfer: XferProcess) -> None:
    """Builds the registries and serves them; ValueError when no port could be bound."""
    own = _exporter.registry(_exporter.ClientCollector(lambda: xfer.recorder.total, lambda: info(xfer)), True)
    xfer.registry = own
    port, host = xfer.config.metrics_port, xfer.config.metrics_host
    if port is None:
        return
    if xfer.role == "worker":
        ports = [0] if port == 0 else list(range(port + 1, min(65536, port + 1 + WORKER_PORT_SPAN)))
    else:
        ports = [port]
    cluster_snap = xfer.workers.cluster_total if xfer.role == "master" else lambda: xfer.recorder.total
    cluster = _exporter.registry(_exporter.ClientCollector(cluster_snap, lambda: _cluster_users(xfer)), False)
    wsgi = _exporter.app(own, cluster, lambda: {"role": xfer.role, "self": xfer.metrics_url,
                                                "workers": xfer.workers.urls})
    try:
        bound = _exporter.serve_first_free(host, ports, wsgi)
    except OSError as e:
        if xfer.role == "worker":
            raise ValueError(f"--xfer-metrics-port {port}: no free port for this worker in {ports[0]}..{ports[-1]} "
                             f"({e})") from None
        raise ValueError(f"--xfer-metrics-port {port}: cannot bind {host}:{port} ({e}); "
                         "pick another port, 0 for any free one, or off") from None
    xfer.metrics_url = f"http://{host}:{bound}/metrics"
    log.info("xfer client metrics (%s) at %s", xfer.role, xfer.metrics_url)
    sys.stderr.write(f"xfer-metrics role={xfer.role} pid={os.getpid()} url={xfer.metrics_url}\n")
