"""The load generator of a run (`[load] driver`): Locust with loadgen, or xferload, the native frame driver.

Both are one child process, pinned to the generator's CPUs, that serves the same client families
(xfer_client_*, process_cpu_seconds_total; docs/DESIGN.md) on a metrics port given on its command line; it
is ready when that port answers, scraped every second, and stopped with SIGTERM. They differ only in their
command line, so `Generator` is the process and each driver a subclass giving its `argv`.

What each driver can do is its entry in the driver registry (xferbench/config/drivers.py), which the schema
reads to refuse a load the driver cannot run before any run; GENERATORS below maps an entry's name to its
class. A new driver is one entry there and one subclass here. xferload runs one method per process with a
fixed request: `xferload_args` (xferbench/config/load.py) maps the [load] keys it honours to its flags.

With `[load] hosts` (`RemoteLoad`), Locust's master runs here and its workers on those hosts, each host's started
over SSH (xferbench/run/remote.py) under a small watch of its own (WORKER_WATCH) that ends them when their session
ends; the runner scrapes the workers where they are.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import select
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import loadgen
from xferbench.config import LOADGEN_KEYS, ROOT, Host, Load, drivers, xferload_args
from xferbench.config.tls import ClientTLS
from xferbench.config.userload import LOCUSTFILE_HOST, option_args
from xferbench.measure import figures, hoststat
from xferbench.measure.scrape import Snapshot, fetch, scrape
from xferbench.run import programs, remote, remote_watch
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
                 cpus: Sequence[int] | None = None, tls: ClientTLS | None = None) -> None:
        self.tls = tls
        self.argv = self.build_argv(host, load, metrics_port, run_time_s, log_path) + self.tls_args(tls)
        if os.path.isabs(self.argv[0]) and not Path(self.argv[0]).exists():
            raise ServerStartError(f"{self.argv[0]} does not exist; run `make build`", [])
        self.metrics_port = metrics_port
        self.log_path = log_path
        self._log = open(log_path, "wb")
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.proc = spawn(self.argv, env=env, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT, cpus=cpus)

    def build_argv(self, host: str, load: Load, metrics_port: int, run_time_s: float, log_path: Path) -> list[str]:
        """Its command line: the driver's command and the files it writes."""
        return self.command(host, load, metrics_port, run_time_s) + self.outputs(load, log_path)

    @staticmethod
    def command(host: str, load: Load, metrics_port: int, run_time_s: float) -> list[str]:
        raise NotImplementedError

    @staticmethod
    def outputs(load: Load, log_path: Path) -> list[str]:
        """Flags naming files the generator writes beside its log."""
        return []

    @staticmethod
    def tls_args(tls: ClientTLS | None) -> list[str]:
        """Flags of a TLS client trusting the run's CA (xferbench/config/tls.py); [] for plaintext."""
        return []

    def window_start(self) -> None:
        """The measured window starts now (the end of the warm-up): what the generator reads of itself then."""

    def window_end(self) -> None:
        """The measured window has ended: what the generator reads of itself then (before host_figures)."""

    def host_figures(self, t_a: float, t_b: float) -> dict[str, dict[str, Any]] | None:
        """With its load on other hosts: each host's share of the window [t_a, t_b] (RunRow.load_hosts)."""
        return None

    def host_samples(self) -> dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None]]:
        """With its load on other hosts: each host's own counters (hoststat.sample()) at the window's start and end,
        "at" this machine's time; None where its watch did not answer."""
        return {}

    def exit_text(self) -> str:
        """Why it is no longer alive."""
        return f"{self.name} exited with status {self.proc.returncode}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def metrics_targets(self) -> list[tuple[str, dict[str, str]]]:
        """Every /metrics of the load, as `host:port` with the labels that tell them apart, for a Prometheus to
        scrape once the generator is ready (its own here; a load on other hosts adds each worker there)."""
        return [(f"127.0.0.1:{self.metrics_port}", {})]

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


@dataclass(frozen=True)
class LoadHost:
    """A host the load's Locust workers run on: its [hosts] entry, and its address as the host check found it (the
    workers' metrics bind it, and the runner scrapes them there)."""

    host: Host
    address: str


@dataclass(frozen=True)
class RemoteLoad:
    """`[load] hosts`: the master here, bound to `master_address` (this machine's address as the hosts reach it),
    and `processes` workers on each host."""

    master_address: str
    hosts: tuple[LoadHost, ...]


# Run on a load host as `PYTHON -X MARKER -c WORKER_WATCH PYTHON -X MARKER -m locust ... --worker ...` from the
# checkout there (xferbench/run/remote_watch.py says what it does): sent as text, standard library only.
WORKER_WATCH = programs.program(remote_watch, hoststat)
WORKER_STAT_TIMEOUT_S = 3.0
_markers = itertools.count(1)


class _Worker:
    """The Locust workers of one load host: one ssh session (stdin a pipe its watch reads, stdout its answers, stderr
    the log), started beside the master."""

    def __init__(self, lh: LoadHost, argv: list[str], log_path: Path) -> None:
        self.lh = lh
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = spawn(remote.argv(lh.host, argv), cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=self._log)
        self._buf = b""
        self._asked = 0.0
        # The watch's answers at the window's start and end (its `stat()`, "at" this machine's time).
        self.stat0: dict[str, Any] | None = None
        self.stat1: dict[str, Any] | None = None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ask_stat(self) -> None:
        self._asked = time.time()
        if self.alive() and self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.write(b"stat\n")
                self.proc.stdin.flush()

    def read_stat(self, deadline: float) -> dict[str, Any] | None:
        """The watch's answer to "stat" (idle_s, t, cpus, host), "at" the midpoint of the ask and the answer on this
        machine's clock; None by `deadline` (time.monotonic())."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:  # a line that is not the watch's (a login script's chatter) is passed over
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    return None
                chunk = os.read(fd, 4096)
                if not chunk:
                    return None
                self._buf += chunk
            line, self._buf = self._buf.split(b"\n", 1)
            with contextlib.suppress(ValueError):
                data = json.loads(line)
                if isinstance(data, dict) and "idle_s" in data:
                    return {**data, "at": (self._asked + time.time()) / 2}

    def tail(self, n: int) -> list[str]:
        self._log.flush()
        try:
            return self.log_path.read_text(errors="replace").splitlines()[-n:]
        except OSError:
            return []

    def close_input(self) -> None:
        """EOF to its watch, which ends the workers (if the master's quit has not already)."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def stop(self, grace_s: float) -> int:
        self.close_input()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=grace_s)
        code = stop(self.proc, grace_s=1.0)
        if self.proc.stdout is not None:
            with contextlib.suppress(OSError):
                self.proc.stdout.close()
        self._log.close()
        return code


class LocustGenerator(Generator):
    """Locust, alone or distributed (`processes`): then a master, whose own /metrics has no calls, and N workers
    serving theirs on the next free ports, listed on the master's /workers. The master's /metrics/cluster
    merges the workers' reports only every few seconds (Locust's report interval), too coarse for the
    runner's one-second window edges, so each scrape reads the master and every worker and adds them up.

    With `remote` ([load] hosts) the master runs here, bound to this machine's address as the hosts reach it, and
    `processes` workers on each host (one ssh session per host, `_Worker`), which it expects before the load starts;
    each host's workers are also summed apart (`host_figures`), and stopped with the master whatever happens: their
    sessions closed, then killed, then a remote pkill of the run's marker as a backstop."""

    name = "locust"

    def __init__(self, host: str, load: Load, metrics_port: int, run_time_s: float, log_path: Path,
                 cpus: Sequence[int] | None = None, remote_load: RemoteLoad | None = None,
                 tls: ClientTLS | None = None) -> None:
        self.processes = load.processes
        self.remote = remote_load
        self.expected = load.processes * len(remote_load.hosts) if remote_load else load.processes
        self.worker_urls: list[str] = []
        self.workers: list[_Worker] = []
        self.marker = f"xferbench-worker-{os.getpid()}-{next(_markers)}"
        self.host_snaps: dict[str, list[Snapshot]] = {}
        self._url_host: dict[str, str] = {}
        # The scrapes of the master and its workers, one thread each, for the generator's life (a scrape a second).
        self._scrapers: ThreadPoolExecutor | None = None
        self.csv_prefix = log_path.with_suffix("") if load.locustfile else None
        self._master_port = free_port() if remote_load else 0
        super().__init__(host, load, metrics_port, run_time_s, log_path, cpus, tls)
        if remote_load is not None:
            try:
                for lh in remote_load.hosts:
                    argv = self._worker_argv(lh, load, metrics_port)
                    worker_log = log_path.with_name(f"{log_path.name.removesuffix('.log')}.{lh.host.name}.log")
                    self.workers.append(_Worker(lh, argv, worker_log))
            except BaseException:
                self.stop(grace_s=1.0)
                raise

    def build_argv(self, host: str, load: Load, metrics_port: int, run_time_s: float, log_path: Path) -> list[str]:
        if self.remote is None:
            return super().build_argv(host, load, metrics_port, run_time_s, log_path)
        cluster = ["--master", "--master-bind-host", self.remote.master_address, "--master-bind-port",
                   str(self._master_port), "--expect-workers", str(self.expected)]
        return locust_argv(host, load, metrics_port, run_time_s, cluster=cluster) + self.outputs(load, log_path)

    def _worker_argv(self, lh: LoadHost, load: Load, metrics_port: int) -> list[str]:
        """`processes` workers on the host, from its checkout, under WORKER_WATCH; their metrics on its address."""
        assert self.remote is not None
        h = lh.host
        xfer = {k: getattr(load, k) for k in LOADGEN_KEYS if getattr(load, k) is not None}
        locust = [h.python, "-X", self.marker, "-m", "locust", "-f", "loadgen/", "--worker",
                  "--master-host", self.remote.master_address, "--master-port", str(self._master_port),
                  *loadgen.command_line({**xfer, "metrics_port": metrics_port, "metrics_host": lh.address}),
                  *(["--processes", str(load.processes)] if load.processes > 1 else []), "--loglevel", "WARNING",
                  *self.tls_args(self.tls)]  # the CA's path must be there too: a host sharing this filesystem
        return ["sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", h.root, h.python, "-X", self.marker, "-c",
                WORKER_WATCH, *locust]

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Alone: its metrics port answers. Distributed: the master lists all its workers too (and, on other
        hosts, every worker session lives)."""
        if self.expected <= 1 and self.remote is None:
            super().wait_ready(timeout_s)
            return
        what = f"{self.name} (metrics port {self.metrics_port} and its {self.expected} workers)"
        if self.remote is not None:
            what = (f"{self.name} (its master here, at {self.remote.master_address}:{self._master_port}, and "
                    f"{self.processes} worker{'s' * (self.processes != 1)} on each of "
                    + ", ".join(w.lh.host.describe() for w in self.workers) + ")")

        def ready() -> bool:
            for w in self.workers:
                if not w.alive():
                    raise ServerStartError(f"{what}: {self._worker_exit(w)} before it was ready", self.tail())
            return self._workers_listed()

        wait_until(ready, self.proc, what, timeout_s, self.tail)

    def _workers_listed(self) -> bool:
        try:
            body = fetch(f"http://127.0.0.1:{self.metrics_port}/workers", timeout=SCRAPE_TIMEOUT_S)
            urls = sorted(json.loads(body).get("workers", {}).values())
        except (OSError, ValueError):
            return False
        self.worker_urls = [str(u) for u in urls]
        if self.remote is not None:
            by_address = {lh.address: lh.host.name for lh in self.remote.hosts}
            self._url_host = {u: by_address.get(urllib.parse.urlsplit(u).hostname or "", "?") for u in self.worker_urls}
        return len(self.worker_urls) >= self.expected

    def metrics_targets(self) -> list[tuple[str, dict[str, str]]]:
        # Each worker too (at its host's address, for a load on other hosts): the runner's own scrapes sum them
        # with the master (`scrape`), so the dashboards need them all.
        workers = [(urllib.parse.urlsplit(u).netloc, {"xferbench_host": h} if (h := self._url_host.get(u)) else {})
                   for u in self.worker_urls]
        return [*super().metrics_targets(), *workers]

    def _worker_exit(self, w: _Worker) -> str:
        code = w.proc.returncode
        said = remote.last_line("\n".join(w.tail(5)))
        how = "lost their ssh session" if code == remote.SSH_FAILED else f"exited with status {code}"
        # The caller adds when ("during the run", "before it was ready"): ssh's own words go in parentheses before it.
        return f"the Locust workers on {w.lh.host.describe()} {how}" + (f" ({said.rstrip('.')})" if said else "")

    def alive(self) -> bool:
        return super().alive() and all(w.alive() for w in self.workers)

    def exit_text(self) -> str:
        dead = [w for w in self.workers if not w.alive()]
        if super().alive() and dead:
            return self._worker_exit(dead[0])
        return super().exit_text()

    def tail(self, n: int = TAIL_LINES) -> list[str]:
        out = super().tail(n)
        for w in self.workers:
            out += [f"[{w.lh.host.name}] {line}" for line in w.tail(max(5, n // 4))]
        return out

    def stop(self, grace_s: float = STOP_GRACE_S) -> int:
        code = super().stop(grace_s)  # the master tells its workers to quit
        self._stop_workers(grace_s)
        if self._scrapers is not None:
            self._scrapers.shutdown(wait=True)  # a scrape in flight ends within SCRAPE_TIMEOUT_S
            self._scrapers = None
        if self.csv_prefix is not None:
            self.stats = locust_stats(Path(f"{self.csv_prefix}_final.json"))
        return code

    def _stop_workers(self, grace_s: float) -> None:
        """Every host's workers ended, in parallel: the session's input closed (its watch ends them), the session
        killed after `grace_s`, then the backstop, a remote pkill of the marker, noted in the host's log if it fails."""
        if not self.workers:
            return

        def end(w: _Worker) -> None:
            w.stop(grace_s)
            try:
                remote.kill_marked(w.lh.host, self.marker)
            except (remote.RemoteError, ValueError) as e:
                with contextlib.suppress(OSError), open(w.log_path, "a", encoding="utf-8") as log:
                    log.write(f"xferbench: the backstop (pkill of {self.marker}) failed: {e}\n")

        with ThreadPoolExecutor(max_workers=len(self.workers), thread_name_prefix="locust-stop") as pool:
            list(pool.map(end, self.workers))

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
        t = min(s.t for s in snaps if s is not None)
        total = Snapshot(t)
        per_host: dict[str, Snapshot] = {}
        for url, s in zip(urls, snaps, strict=True):
            assert s is not None
            _add(total, s)
            if url in self._url_host:
                _add(per_host.setdefault(self._url_host[url], Snapshot(t)), s)
        for name, snap in per_host.items():
            self.host_snaps.setdefault(name, []).append(snap)
        return total

    def _stats(self) -> list[dict[str, Any] | None]:
        """Every host's watch asked at once, and its answer (None: none within WORKER_STAT_TIMEOUT_S)."""
        for w in self.workers:
            w.ask_stat()
        deadline = time.monotonic() + WORKER_STAT_TIMEOUT_S
        return [w.read_stat(deadline) for w in self.workers]

    def window_start(self) -> None:
        for w, got in zip(self.workers, self._stats(), strict=True):
            w.stat0 = got

    def window_end(self) -> None:
        for w, got in zip(self.workers, self._stats(), strict=True):
            w.stat1 = got

    def host_samples(self) -> dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None]]:
        def host(answer: dict[str, Any] | None) -> dict[str, Any] | None:
            got = answer.get("host") if answer else None
            return {**got, "at": answer["at"]} if isinstance(got, dict) and answer else None

        return {w.lh.host.name: (host(w.stat0), host(w.stat1)) for w in self.workers}

    def host_figures(self, t_a: float, t_b: float) -> dict[str, dict[str, Any]] | None:
        """Per load host over [t_a, t_b]: its workers' QPS, requests and CPU (in all, and per worker process, the
        figure the saturation check reads), its CPUs' idle cores over the window (its watch's answers at the
        window's edges, window_start and window_end), and whether it saturated."""
        if self.remote is None:
            return None
        idle = {w.lh.host.name: _idle_cores(w.stat0, w.stat1) for w in self.workers}
        out: dict[str, dict[str, Any]] = {}
        for lh in self.remote.hosts:
            name = lh.host.name
            win = [s for s in self.host_snaps.get(name, []) if t_a - 0.01 <= s.t <= t_b + 0.01]
            fig = figures.client_figures(win)
            cpu = fig.get("gen_cpu_cores")
            each = cpu / self.processes if cpu is not None else None
            out[name] = {
                "ssh": lh.host.ssh,
                "address": lh.address,
                "processes": self.processes,
                "client_qps": fig.get("client_qps"),
                "client_requests": fig.get("client_requests"),
                "gen_cpu_cores": cpu,
                "gen_cpu_cores_per_process": each,
                "cpus_idle_cores": idle.get(name),
                "saturated": figures.generator_saturated(each, idle.get(name)),
            }
        return out

    @staticmethod
    def command(host: str, load: Load, metrics_port: int, run_time_s: float) -> list[str]:
        return locust_argv(host, load, metrics_port, run_time_s)

    @staticmethod
    def tls_args(tls: ClientTLS | None) -> list[str]:
        if tls is None:
            return []
        return loadgen.command_line({"tls_ca": str(tls.ca), "tls_resume": tls.resume, "tls_server_name": tls.server_name})

    @staticmethod
    def outputs(load: Load, log_path: Path) -> list[str]:
        # Locust's own statistics of a user locustfile's run: its totals when it quits (PREFIX_final.json, read
        # into the row), and its CSV files (PREFIX_stats.csv, ...) for the reader, which lack the last second.
        if not load.locustfile:
            return []
        prefix = log_path.with_suffix("")
        return ["--csv", str(prefix), "--xfer-final-stats", f"{prefix}_final.json"]


def _idle_cores(start: dict[str, Any] | None, end: dict[str, Any] | None) -> float | None:
    """The idle cores of a load host between two answers of its watch, by its own clock; None without both."""
    if not start or not end or start.get("idle_s") is None or end.get("idle_s") is None:
        return None
    dt = float(end["t"]) - float(start["t"])
    return (float(end["idle_s"]) - float(start["idle_s"])) / dt if dt > 0 else None


def _add(total: Snapshot, s: Snapshot) -> None:
    for key, v in s.samples.items():
        total.samples[key] = total.samples.get(key, 0.0) + v


class XferloadGenerator(Generator):
    name = "xferload"

    @staticmethod
    def command(host: str, load: Load, metrics_port: int, run_time_s: float) -> list[str]:
        addr = host.split("://", 1)[-1]
        return [str(XFERLOAD), "--addr", addr, "--metrics-addr", f"127.0.0.1:{metrics_port}",
                "--duration", f"{max(1, round(run_time_s))}s", "--drain", "5s", *xferload_args(load)]

    @staticmethod
    def tls_args(tls: ClientTLS | None) -> list[str]:
        if tls is None:
            return []
        return ["--tls-ca", str(tls.ca), "--tls-resume", tls.resume, "--tls-server-name", tls.server_name]


# Each entry of the driver registry → the Generator that starts it (`name` is the entry's name).
GENERATORS: dict[str, type[Generator]] = {g.name: g for g in (LocustGenerator, XferloadGenerator)}


def generator_class(driver: str) -> type[Generator]:
    """The Generator of a registry entry; KeyError names a driver unknown to the registry or without one."""
    name = drivers.get(driver).name
    try:
        return GENERATORS[name]
    except KeyError:
        raise KeyError(f"driver {name!r} has no Generator in xferbench/run/generators.py") from None


def locust_argv(host: str, load: Load, metrics_port: int, run_time_s: float, cluster: list[str] | None = None
                ) -> list[str]:
    """The Locust command line for one cell's load: Locust's own flags, then every [load] value that is a
    loadgen option as loadgen spells it (loadgen.command_line). `cluster`: the master's flags of a load on other
    hosts, in place of `processes(load)`."""
    if load.locustfile:
        return userload_argv(host, load, metrics_port, run_time_s)
    xfer = {k: getattr(load, k) for k in LOADGEN_KEYS if getattr(load, k) is not None}
    return [
        sys.executable, "-m", "locust", "-f", str(ROOT / "loadgen"), "--headless", "--host", host,
        "-u", str(load.users), "-r", f"{load.spawn_rate:g}", "-t", f"{max(1, round(run_time_s))}s",
        *loadgen.command_line({**xfer, "metrics_port": metrics_port}),
        *(processes(load) if cluster is None else cluster), "--only-summary", "--loglevel", "WARNING",
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
