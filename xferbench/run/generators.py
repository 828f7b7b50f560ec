"""The load generator of a run (`[load] driver`): Locust with loadgen, or xferload, the native frame driver.

Both are one child process, pinned to the generator's CPUs, that serves the same client families
(xfer_client_*, process_cpu_seconds_total; docs/DESIGN.md) on a metrics port given on its command line; it
is ready when that port answers, scraped every second, and stopped with SIGTERM. They differ only in their
command line, so `Generator` is the process and each driver a subclass giving its `argv`.

What each driver can do is its entry in the driver registry (xferbench/config/drivers.py), which the schema
reads to refuse a load the driver cannot run before any run; GENERATORS below maps an entry's name to its
class. A new driver is one entry there and one subclass here. xferload runs one method per process with a
fixed request: `xferload_args` (xferbench/config/load.py) maps the [load] keys it honours to its flags.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import loadgen
from xferbench.config import LOADGEN_KEYS, ROOT, Load, drivers, xferload_args
from xferbench.config.userload import LOCUSTFILE_HOST, option_args
from xferbench.measure.scrape import Snapshot, fetch, scrape
from xferbench.run.process import (
    READY_TIMEOUT_S,
    STOP_GRACE_S,
    TAIL_LINES,
    ServerStartError,
    free_port,
    port_open,
    spawn,
    stop,
    wait_until,
)

SCRAPE_TIMEOUT_S = 0.8  # within the runner's one-second tick
XFERLOAD = ROOT / "build" / "bin" / "xferload"
REQUEST_METRICS = ROOT / "loadgen" / "_request_metrics.py"  # a user locustfile's client metrics


class Generator:
    """A load generator child, output to a log file; ready when its metrics port answers."""

    name = "generator"
    stats: dict[str, float | None] | None = None  # the generator's own statistics, read once it has stopped

    def __init__(self, host: str, load: Load, metrics_port: int, run_time_s: float, log_path: Path,
                 cpus: Sequence[int] | None = None) -> None:
        self.argv = self.command(host, load, metrics_port, run_time_s) + self.outputs(load, log_path)
        if os.path.isabs(self.argv[0]) and not Path(self.argv[0]).exists():
            raise ServerStartError(f"{self.argv[0]} does not exist; run `make build`", [])
        self.metrics_port = metrics_port
        self.log_path = log_path
        self._log = open(log_path, "wb")
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.proc = spawn(self.argv, env=env, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT, cpus=cpus)

    @staticmethod
    def command(host: str, load: Load, metrics_port: int, run_time_s: float) -> list[str]:
        raise NotImplementedError

    @staticmethod
    def outputs(load: Load, log_path: Path) -> list[str]:
        """Flags naming files the generator writes beside its log."""
        return []

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def scrape(self) -> Snapshot | None:
        """The client families now (None when the scrape failed), as the runner samples them every second."""
        return scrape(self.metrics_url, timeout=SCRAPE_TIMEOUT_S)

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Polls the metrics port until it answers; raises ServerStartError with the output tail if the
        generator exits or the deadline passes."""
        wait_until(lambda: port_open("127.0.0.1", self.metrics_port), self.proc,
                   f"{self.name} (metrics port {self.metrics_port})", timeout_s, self.tail)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, n: int = TAIL_LINES) -> list[str]:
        self._log.flush()
        try:
            return self.log_path.read_text(errors="replace").splitlines()[-n:]
        except OSError:
            return []

    def stop(self, grace_s: float = STOP_GRACE_S) -> int:
        code = stop(self.proc, grace_s=grace_s)
        self._log.close()
        return code


class LocustGenerator(Generator):
    """Locust, alone or distributed (`processes`): then a master, whose own /metrics has no calls, and N workers
    serving theirs on the next free ports, listed on the master's /workers. The master's /metrics/cluster
    merges the workers' reports only every few seconds (Locust's report interval), too coarse for the
    runner's one-second window edges, so each scrape reads the master and every worker and adds them up."""

    name = "locust"

    def __init__(self, host: str, load: Load, metrics_port: int, run_time_s: float, log_path: Path,
                 cpus: Sequence[int] | None = None) -> None:
        self.processes = load.processes
        self.worker_urls: list[str] = []
        # The scrapes of the master and its workers, one thread each, for the generator's life (a scrape a second).
        self._scrapers: ThreadPoolExecutor | None = None
        self.csv_prefix = log_path.with_suffix("") if load.locustfile else None
        super().__init__(host, load, metrics_port, run_time_s, log_path, cpus)

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Alone: its metrics port answers. Distributed: the master lists all its workers too."""
        if self.processes <= 1:
            super().wait_ready(timeout_s)
            return
        wait_until(self._workers_listed, self.proc,
                   f"{self.name} (metrics port {self.metrics_port} and its {self.processes} workers)", timeout_s,
                   self.tail)

    def _workers_listed(self) -> bool:
        try:
            body = fetch(f"http://127.0.0.1:{self.metrics_port}/workers", timeout=SCRAPE_TIMEOUT_S)
            urls = sorted(json.loads(body).get("workers", {}).values())
        except (OSError, ValueError):
            return False
        self.worker_urls = [str(u) for u in urls]
        return len(self.worker_urls) >= self.processes

    def stop(self, grace_s: float = STOP_GRACE_S) -> int:
        code = super().stop(grace_s)
        if self._scrapers is not None:
            self._scrapers.shutdown(wait=True)  # a scrape in flight ends within SCRAPE_TIMEOUT_S
            self._scrapers = None
        if self.csv_prefix is not None:
            self.stats = locust_stats(Path(f"{self.csv_prefix}_final.json"))
        return code

    def scrape(self) -> Snapshot | None:
        if not self.worker_urls:
            return super().scrape()
        # All at once: read one after the other, the last worker's counts would be later than the first's.
        urls = [self.metrics_url, *self.worker_urls]
        if self._scrapers is None:
            self._scrapers = ThreadPoolExecutor(max_workers=len(urls), thread_name_prefix="locust-scrape")
        snaps = list(self._scrapers.map(lambda u: scrape(u, timeout=SCRAPE_TIMEOUT_S), urls))
        if any(s is None for s in snaps):
            return None  # a partial sum would look like a drop in every counter
        total = Snapshot(min(s.t for s in snaps if s is not None))
        for s in snaps:
            assert s is not None
            for key, v in s.samples.items():
                total.samples[key] = total.samples.get(key, 0.0) + v
        return total

    @staticmethod
    def command(host: str, load: Load, metrics_port: int, run_time_s: float) -> list[str]:
        return locust_argv(host, load, metrics_port, run_time_s)

    @staticmethod
    def outputs(load: Load, log_path: Path) -> list[str]:
        # Locust's own statistics of a user locustfile's run: its totals when it quits (PREFIX_final.json, read
        # into the row), and its CSV files (PREFIX_stats.csv, ...) for the reader, which lack the last second.
        if not load.locustfile:
            return []
        prefix = log_path.with_suffix("")
        return ["--csv", str(prefix), "--xfer-final-stats", f"{prefix}_final.json"]


class XferloadGenerator(Generator):
    name = "xferload"

    @staticmethod
    def command(host: str, load: Load, metrics_port: int, run_time_s: float) -> list[str]:
        addr = host.split("://", 1)[-1]
        return [str(XFERLOAD), "--addr", addr, "--metrics-addr", f"127.0.0.1:{metrics_port}",
                "--duration", f"{max(1, round(run_time_s))}s", "--drain", "5s", *xferload_args(load)]


# Each entry of the driver registry → the Generator that starts it (`name` is the entry's name).
GENERATORS: dict[str, type[Generator]] = {g.name: g for g in (LocustGenerator, XferloadGenerator)}


def generator_class(driver: str) -> type[Generator]:
    """The Generator of a registry entry; KeyError names a driver unknown to the registry or without one."""
    name = drivers.get(driver).name
    try:
        return GENERATORS[name]
    except KeyError:
        raise KeyError(f"driver {name!r} has no Generator in xferbench/run/generators.py") from None


def locust_argv(host: str, load: Load, metrics_port: int, run_time_s: float) -> list[str]:
    """The Locust command line for one cell's load: Locust's own flags, then every [load] value that is a
    loadgen option as loadgen spells it (loadgen.command_line)."""
    if load.locustfile:
        return userload_argv(host, load, metrics_port, run_time_s)
    xfer = {k: getattr(load, k) for k in LOADGEN_KEYS if getattr(load, k) is not None}
    return [
        sys.executable, "-m", "locust", "-f", str(ROOT / "loadgen"), "--headless", "--host", host,
        "-u", str(load.users), "-r", f"{load.spawn_rate:g}", "-t", f"{max(1, round(run_time_s))}s",
        *loadgen.command_line({**xfer, "metrics_port": metrics_port}),
        *processes(load), "--only-summary", "--loglevel", "WARNING",
    ]


def locust_stats(path: Path) -> dict[str, float | None] | None:
    """Locust's totals of the whole run as loadgen/_request_metrics.py wrote them when Locust quit: requests,
    failures, rps and the 50/95/99th percentiles in seconds; None without the file (Locust killed)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return {k: (float(v) if isinstance(v, int | float) else None) for k, v in data.items()}


def processes(load: Load) -> list[str]:
    """Locust distributed over the generator's CPUs: a master and N worker processes (Locust >= 2.19), on a
    port of their own: on Locust's default (5557) a second cluster (a duet's partner, another run on the
    machine) fails to bind, and its workers join the first."""
    if load.processes <= 1:
        return []
    port = str(free_port())
    return ["--processes", str(load.processes), "--master-bind-port", port, "--master-port", port]


def userload_argv(host: str, load: Load, metrics_port: int, run_time_s: float) -> list[str]:
    """The user's own locustfile, with loadgen/_request_metrics.py beside it for the client metrics, and its own
    options ([load] options); the host is a URL (userload.LOCUSTFILE_HOST) whatever the cell's transport."""
    addr = host.split("://", 1)[-1]
    return [
        sys.executable, "-m", "locust", "-f", f"{load.locustfile},{REQUEST_METRICS}", "--headless",
        "--host", LOCUSTFILE_HOST.format(addr=addr), "-u", str(load.users), "-r", f"{load.spawn_rate:g}",
        "-t", f"{max(1, round(run_time_s))}s", "--xfer-metrics-port", str(metrics_port), *processes(load),
        "--only-summary", "--loglevel", "WARNING", *option_args(load.options),
    ]
