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

from xferbench.process import free_port as free_port  # the one implementation, for the loadgen suites

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


def settled_metrics(url: str, tries: int = 20, pause: float = 0.25) -> list[Sample]:
    """Scrapes until two scrapes in a row agree on xfer_requests_total (calls may still be finishing)."""
    prev = None
    samples: list[Sample] = []
    for _ in range(tries):
        samples = parse_prom(fetch(url))
        now = sorted((tuple(sorted(lab.items())), v) for n, lab, v in samples if n == "xfer_requests_total")
        if now == prev:
            return samples
        prev = now
        time.sleep(pause)
    return samples


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
