"""Where server figures come from: the built-in scraper (default) or a real Prometheus via PromQL.

Both implement `MetricsSource` and hand back `Snapshot`s of the server over the measured window, so
`figures.server_figures` computes identical row fields from either. The client (Locust) side is always
scraped directly: its metrics port lives only as long as the Locust process.

With a real Prometheus the server's metrics address must be one of its targets. `PromQLSource` is given
a `register` callable (job, address, labels) → unregister callable (xferbench/measure/targets.py): it registers the
server for the run's figures, and each Locust while it runs so that the dashboards' client panels have
data too.
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from abc import ABC, abstractmethod
from typing import Any

from xferbench.measure.scrape import KEEP_PREFIXES, Snapshot, scrape
from xferbench.measure.targets import Register, Unregister

CLIENT_LAST_SCRAPE_S = 10.0  # how long a Locust target waits for its last scrape (a few scrape intervals)
PROM_DROP_LABELS = ("instance", "job", "xferbench_cell", "xferbench_run")


class MetricsSource(ABC):
    name: str = "?"
    # Name prefixes kept beside KEEP_PREFIXES: a command server's own request series ([servers.requests]), set
    # for each server before begin().
    also: tuple[str, ...] = ()

    @abstractmethod
    def begin(self, metrics_addr: str, labels: dict[str, str]) -> None:
        """A server is up at metrics_addr (host:port, serving /metrics; or a command server's whole URL, e.g.
        https://127.0.0.1:PORT/actuator/prometheus); figures for it are wanted from now on."""

    @abstractmethod
    def tick(self) -> Snapshot | None:
        """Called about once a second while the cell runs; may return the latest server snapshot."""

    @abstractmethod
    def snapshots(self, t_start: float, t_end: float) -> list[Snapshot]:
        """Server snapshots covering [t_start, t_end] (wall-clock seconds), oldest first."""

    def end(self) -> None:  # noqa: B027 (optional hook, a no-op by default)
        """The server is gone; release whatever begin() set up."""

    def watch_client(self, metrics_addr: str, labels: dict[str, str]) -> Unregister:
        """A Locust serves client figures at metrics_addr while it runs; returns what to call once it has
        stopped. The runner scrapes Locust itself, so by default there is nothing to do."""
        return _nothing

    @abstractmethod
    def twin(self) -> MetricsSource:
        """A new source of the same kind and settings, for a second server measured at the same time (a duet)."""


class ScrapeSource(MetricsSource):
    """Scrapes http://ADDR/metrics (or the URL it was given) on every tick."""

    name = "scrape"

    def __init__(self, timeout_s: float = 0.8) -> None:
        self.timeout_s = timeout_s
        self.url = ""
        self.snaps: list[Snapshot] = []

    def twin(self) -> ScrapeSource:
        return ScrapeSource(self.timeout_s)

    def begin(self, metrics_addr: str, labels: dict[str, str]) -> None:
        self.url = metrics_url(metrics_addr)
        self.snaps = []

    def tick(self) -> Snapshot | None:
        snap = scrape(self.url, self.timeout_s, self.also)
        if snap is not None:
            self.snaps.append(snap)
        return snap

    def snapshots(self, t_start: float, t_end: float) -> list[Snapshot]:
        return [s for s in self.snaps if t_start - 0.5 <= s.t <= t_end + 0.5]


class PromQLError(RuntimeError):
    pass


class PromQLSource(MetricsSource):
    """Reads the server's series from Prometheus with /api/v1/query_range, step 1 s, selecting the target by
    its `instance` label. Prometheus should scrape it every second (or close to it) for short cells."""

    name = "promql"

    def __init__(
        self,
        url: str,
        register: Register | None = None,
        step_s: float = 1.0,
        timeout_s: float = 10.0,
        ready_timeout_s: float = 30.0,
    ) -> None:
        self.base = url.rstrip("/")
        self.register = register
        self.step_s = step_s
        self.timeout_s = timeout_s
        self.ready_timeout_s = ready_timeout_s
        self.instance = ""
        self._unregister: Unregister | None = None

    def twin(self) -> PromQLSource:
        return PromQLSource(self.base, self.register, self.step_s, self.timeout_s, self.ready_timeout_s)

    def _get(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        url = f"{self.base}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout_s) as resp:
                body = json.load(resp)
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise PromQLError(f"Prometheus at {self.base}: {e}") from e
        if body.get("status") != "success":
            raise PromQLError(f"Prometheus at {self.base}: {body.get('error', body)}")
        data: dict[str, Any] = body["data"]
        return data

    def check(self) -> None:
        """Raises PromQLError unless Prometheus answers a query: called before any server starts, so an
        unreachable URL stops the run at once instead of failing every cell."""
        self._get("/api/v1/query", {"query": "1"})

    def _selector(self) -> str:
        names = "|".join(p.rstrip("_") + ".*" for p in (*KEEP_PREFIXES, *self.also))
        return f'{{__name__=~"{names}",instance="{self.instance}"}}'

    def _latest_sample_time(self, instance: str | None = None) -> float | None:
        """When Prometheus last scraped `instance` (default: the server), or None unless that scrape worked."""
        instance = instance or self.instance
        data = self._get("/api/v1/query", {"query": f'timestamp(up{{instance="{instance}"}})'})
        ts = [float(r["value"][1]) for r in data.get("result", [])]
        up = self._get("/api/v1/query", {"query": f'up{{instance="{instance}"}} == 1'})
        return max(ts) if ts and up.get("result") else None

    def _await_scrape(self, at_or_after: float, timeout_s: float, instance: str | None = None) -> bool:
        """Polls (bounded) until Prometheus holds a working scrape of `instance` at or after the given time."""
        deadline = time.monotonic() + timeout_s
        while True:
            latest = self._latest_sample_time(instance)
            if latest is not None and latest >= at_or_after:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.25)

    def begin(self, metrics_addr: str, labels: dict[str, str]) -> None:
        url = urllib.parse.urlsplit(metrics_url(metrics_addr))
        self.instance = metrics_addr = url.netloc
        if self.register is not None:
            # Prometheus takes a target's scheme and path from these labels of its file_sd group.
            ours = (url.scheme, url.path) == ("http", "/metrics")
            where = {} if ours else {"__scheme__": url.scheme, "__metrics_path__": url.path}
            self._unregister = self.register("xferd", metrics_addr, {**labels, **where})
        # Wait (bounded, polling) until Prometheus has scraped the new target successfully once. A begin that
        # fails (Prometheus down, target never scraped) unregisters the target again: the runner calls end()
        # only after a successful begin, and a stale target would outlive its run.
        try:
            deadline = time.monotonic() + self.ready_timeout_s
            while self._latest_sample_time() is None:
                if time.monotonic() > deadline:
                    raise PromQLError(
                        f"Prometheus at {self.base} never scraped {metrics_addr} within "
                        f"{self.ready_timeout_s:.0f}s; is it a target (file_sd / stack)?"
                    )
                time.sleep(0.25)
        except BaseException:
            self.end()
            raise

    def tick(self) -> Snapshot | None:
        return None

    def snapshots(self, t_start: float, t_end: float) -> list[Snapshot]:
        self._await_scrape(t_end, self.ready_timeout_s)  # on a timeout the server may be gone: use what is there
        rng = {"start": f"{t_start:.3f}", "end": f"{t_end + self.step_s:.3f}", "step": f"{self.step_s:g}"}
        data = self._get("/api/v1/query_range", {"query": self._selector(), **rng})
        # Each step returns the latest sample at or before it; re-time every snapshot to when that sample
        # was really scraped (timestamp(up) of the target), so rates divide by the true interval.
        up = f'timestamp(up{{instance="{self.instance}"}})'
        stamps = self._get("/api/v1/query_range", {"query": up, **rng})
        real: dict[float, float] = {}
        for series in stamps.get("result", []):
            for t, v in series["values"]:
                real[float(t)] = float(v)
        return retime(matrix_to_snapshots(data.get("result", [])), real)

    def end(self) -> None:
        if self._unregister is not None:
            self._unregister()
            self._unregister = None

    def watch_client(self, metrics_addr: str, labels: dict[str, str]) -> Unregister:
        """Has Prometheus scrape the Locust too (job `locust`), for the dashboards' client panels; the
        runner's client figures still come from its own scrapes."""
        if self.register is None:
            return _nothing
        unregister = self.register("locust", metrics_addr, labels)

        def after_a_last_scrape() -> None:
            # Called while the Locust still serves: one more working scrape (bounded) lets the client series reach
            # the end of the window, and removing the target before the process stops records no `up == 0`.
            # The dashboards are all this series is for, so a Prometheus that does not answer does not fail the run.
            try:
                with contextlib.suppress(PromQLError):
                    self._await_scrape(time.time(), CLIENT_LAST_SCRAPE_S, metrics_addr)
            finally:
                unregister()

        return after_a_last_scrape


def _nothing() -> None:
    pass


def metrics_url(metrics_addr: str) -> str:
    """The URL a server's figures are scraped from: its own when given one, else http://HOST:PORT/metrics."""
    return metrics_addr if "://" in metrics_addr else f"http://{metrics_addr}/metrics"


def matrix_to_snapshots(result: list[dict[str, Any]]) -> list[Snapshot]:
    """A query_range matrix → one Snapshot per step timestamp (Prometheus' own labels dropped)."""
    by_t: dict[float, Snapshot] = {}
    for series in result:
        metric = dict(series["metric"])
        name = metric.pop("__name__")
        for k in PROM_DROP_LABELS:
            metric.pop(k, None)
        key = (name, tuple(sorted(metric.items())))
        for t, v in series["values"]:
            t = float(t)
            snap = by_t.setdefault(t, Snapshot(t))
            snap.samples[key] = float(v)
    return [by_t[t] for t in sorted(by_t)]


def retime(snaps: list[Snapshot], real: dict[float, float]) -> list[Snapshot]:
    """Moves each step's snapshot to its sample's scrape time; steps that repeat a sample are dropped."""
    out: list[Snapshot] = []
    for snap in snaps:
        t = real.get(snap.t, snap.t)
        if out and t <= out[-1].t:
            continue
        snap.t = t
        out.append(snap)
    return out
