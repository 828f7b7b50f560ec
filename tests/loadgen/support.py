"""Running Locust on loadgen/ as a real process, and reading Prometheus text, for the loadgen suites."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from xferbench.run.process import free_port as free_port  # the one implementation, for the loadgen suites

ROOT = Path(__file__).resolve().parents[2]
LOADGEN = ROOT / "loadgen"
LOCUST = str(Path(sys.executable).parent / "locust")


def locust_cmd(*args: str) -> list[str]:
    return [LOCUST, "-f", str(LOADGEN), *args]


def run_locust(args: Sequence[str], timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Runs `locust -f loadgen/ ARGS` to completion (killed after timeout) and returns its output."""
    proc = subprocess.Popen(locust_cmd(*args), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        raise AssertionError(f"locust ran past {timeout}s: {args}\n{out[-3000:]}\n{err[-3000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


Sample = tuple[str, dict[str, str], float]


def parse_prom(text: str) -> list[Sample]:
    return [(s.name, dict(s.labels), s.value)
            for fam in text_string_to_metric_families(text) for s in fam.samples]


def total(samples: list[Sample], name: str, **labels: str) -> float:
    """Sum of the samples called `name` whose labels include `labels`."""
    return sum(v for n, lab, v in samples if n == name and all(lab.get(k) == w for k, w in labels.items()))


def failed(samples: list[Sample], name: str = "xfer_client_requests_total", **labels: str) -> float:
    """Sum of the samples called `name` whose labels include `labels` and whose outcome `code` is not ok."""
    return sum(v for n, lab, v in samples
               if n == name and lab.get("code") != "ok" and all(lab.get(k) == w for k, w in labels.items()))


def has(samples: list[Sample], name_prefix: str) -> bool:
    return any(n.startswith(name_prefix) for n, _l, _v in samples)


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via a proxy


def fetch(url: str, timeout: float = 5.0) -> str:
    with _OPENER.open(url, timeout=timeout) as r:
        return r.read().decode()


@dataclass
class Scraper:
    """Scrapes a /metrics URL about once a second on a thread while a run goes on (bounded by stop())."""

    url: str
    interval: float = 1.0
    scrapes: list[tuple[float, list[Sample]]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Scraper:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.scrapes.append((time.monotonic(), parse_prom(fetch(self.url))))
            except OSError as e:
                self.errors.append(str(e))
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


# settled_metrics: how long the server must look idle, how often it is scraped, and when to give up.
SETTLE_SPAN_S = 0.5
SETTLE_POLL_S = 0.05
SETTLE_TIMEOUT_S = 30.0


def _idle_state(samples: list[Sample]) -> tuple[float, float, list[tuple[tuple[tuple[str, str], ...], float]]]:
    """(open client connections, calls in flight, every xfer_requests_total series) of one scrape."""
    counts = sorted((tuple(sorted(lab.items())), v) for n, lab, v in samples if n == "xfer_requests_total")
    return total(samples, "xfer_connections"), total(samples, "xfer_inflight_requests"), counts


def settled_metrics(url: str, timeout: float = SETTLE_TIMEOUT_S) -> list[Sample]:
    """The server's metrics once every call has been counted. Call it when the clients are gone (Locust has
    exited: run_locust returned), to read the server's counts of what they did.

    Settled: no client connection open (xfer_connections 0), no call in flight (xfer_inflight_requests 0),
    and every xfer_requests_total series the same, over scrapes spanning SETTLE_SPAN_S. Why that is enough:
    every call is read from a client connection, so with none open no call can begin; a call is counted
    when it ends, next to the in-flight gauge's decrement, so with none in flight every call begun has been
    counted, except in the instant between the decrement and the count (xferd-go decrements first), which the
    span of equal scrapes covers. Two equal scrapes alone were not enough: a server still finishing the
    calls of a client that had just gone could pause longer than the gap between them.

    Fails (AssertionError, with the last state seen) when the server never settles within `timeout`."""
    deadline = time.monotonic() + timeout
    since: float | None = None  # when the current idle stretch with unchanged counts began
    base: list[tuple[tuple[tuple[str, str], ...], float]] = []
    while True:
        now = time.monotonic()
        samples = parse_prom(fetch(url))
        names = {n for n, _l, _v in samples}
        missing = {"xfer_connections", "xfer_inflight_requests"} - names
        assert not missing, f"{url} exports no {sorted(missing)}: settled_metrics cannot tell when it is idle"
        conns, inflight, counts = _idle_state(samples)
        if conns == 0 and inflight == 0:
            if since is not None and counts == base:
                if now - since >= SETTLE_SPAN_S:
                    return samples
            else:
                since, base = now, counts
        else:
            since = None
        if now > deadline:
            idle = conns == 0 and inflight == 0
            raise AssertionError(
                f"{url} never settled within {timeout:g}s: last scrape {conns:g} client connections open, "
                f"{inflight:g} calls in flight" + ("; xfer_requests_total still changing" if idle else ""))
        time.sleep(SETTLE_POLL_S)  # the poll interval between scrapes of /metrics


def summary_counts(output: str, run: int = 1) -> dict[str, int]:
    """Requests per method of loadgen's printed summary of one run ("operations": all whole operations)."""
    at = output.find(f"xfer summary of run {run} (")
    assert at >= 0, f"no summary of run {run}:\n{output[-3000:]}"
    counts: dict[str, int] = {}
    for line in output[at:].splitlines()[2:]:
        words = line.split()
        if len(words) == 10 or (len(words) == 9 and words[0] == "operations"):
            method, n = (words[0], words[1]) if words[0] == "operations" else (words[1], words[2])
            counts[method] = int(n)
        elif not line.startswith("chunk calls"):
            break
    return counts


def summary_wall(output: str, run: int = 1) -> float:
    """The run's length as its summary states it, in seconds."""
    m = re.search(rf"xfer summary of run {run} \(\w+, ([\d.]+) s;", output)
    assert m, output[-3000:]
    return float(m.group(1))
