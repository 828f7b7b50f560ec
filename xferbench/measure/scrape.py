"""Prometheus text scraping and the arithmetic on what was scraped.

A `Snapshot` is every kept sample of one target at one instant. Rates and percentiles are always computed
from the difference of two snapshots (counters and histogram buckets), so warm-up is discarded exactly and
percentiles come from histograms (linear interpolation inside a bucket, as `histogram_quantile` does).
"""

from __future__ import annotations

import math
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

Labels = tuple[tuple[str, str], ...]
Key = tuple[str, Labels]
LabelTest = Callable[[dict[str, str]], bool]  # which series of a metric to take, by their labels

# Families worth keeping; everything else (python_*, most go_* runtime internals) is dropped at parse time.
KEEP_PREFIXES = (
    "xfer_",
    "process_resident_memory_bytes",
    "process_cpu_seconds_total",
    "process_virtual_memory_bytes",
    "go_gc_duration_seconds",
    "go_sched_pauses_total_gc",
    "go_memstats_heap_inuse_bytes",
    "go_memstats_heap_alloc_bytes",
    "go_memstats_alloc_bytes_total",
    "go_memstats_sys_bytes",
    "go_memstats_heap_sys_bytes",  # the dashboards' heap panel (xferbench export)
    "go_memstats_next_gc_bytes",
    "go_cpu_classes_gc_total",
    "go_cpu_classes_total",
    "go_goroutines",
    "go_gc_gogc_percent",
    "go_gc_heap_goal_bytes",
    "go_gc_heap_live_bytes",
    "go_gc_cycles_total",
)


def keep(name: str) -> bool:
    return name.startswith(KEEP_PREFIXES)


@dataclass
class Snapshot:
    t: float  # wall-clock seconds (time.time())
    samples: dict[Key, float] = field(default_factory=dict)

    def get(self, name: str, **labels: str) -> float | None:
        """The value of one sample whose labels include `labels`; the first match."""
        for (n, ls), v in self.samples.items():
            if n == name and _match(ls, labels):
                return v
        return None

    def sum(self, name: str, pred: Callable[[dict[str, str]], bool] | None = None) -> float | None:
        """Sum over every series of `name` whose labels satisfy `pred`; None when there is none."""
        total, found = 0.0, False
        for (n, ls), v in self.samples.items():
            if n == name and (pred is None or pred(dict(ls))):
                total += v
                found = True
        return total if found else None

    def buckets(self, name: str, pred: Callable[[dict[str, str]], bool] | None = None) -> dict[float, float]:
        """Cumulative bucket counts of histogram `name` (without _bucket), summed over matching series."""
        out: dict[float, float] = {}
        for (n, ls), v in self.samples.items():
            if n != name + "_bucket":
                continue
            d = dict(ls)
            le = d.pop("le", None)
            if le is None or (pred is not None and not pred(d)):
                continue
            bound = math.inf if le in ("+Inf", "Inf", "inf") else float(le)
            out[bound] = out.get(bound, 0.0) + v
        return out

    def label_values(self, name: str) -> dict[str, str] | None:
        for (n, ls), _ in self.samples.items():
            if n == name:
                return dict(ls)
        return None

    def to_json(self) -> dict[str, Any]:
        return {"t": self.t, "samples": [[n, dict(ls), v] for (n, ls), v in self.samples.items()]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Snapshot:
        return cls(d["t"], {(n, tuple(sorted(ls.items()))): v for n, ls, v in d["samples"]})


def _match(ls: Labels, want: dict[str, str]) -> bool:
    d = dict(ls)
    return all(d.get(k) == v for k, v in want.items())


def parse_text(text: str, t: float | None = None, keep_fn: Callable[[str], bool] = keep) -> Snapshot:
    snap = Snapshot(time.time() if t is None else t)
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            # Filter on sample names: the parser strips "_total" from counter family names.
            if s.name.endswith("_created") or not keep_fn(s.name):
                continue
            snap.samples[(s.name, tuple(sorted(s.labels.items())))] = float(s.value)
    return snap


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def fetch(url: str, timeout: float = 2.0) -> str:
    """The body at `url`. An https server on loopback is the runner's own child, whose certificate is self-signed
    more often than not (a Spring service's /actuator/prometheus): its certificate is not checked."""
    parts = urllib.parse.urlsplit(url)
    context = ssl._create_unverified_context() if parts.scheme == "https" and parts.hostname in LOOPBACK else None
    with urllib.request.urlopen(url, timeout=timeout, context=context) as resp:
        body: bytes = resp.read()
    return body.decode("utf-8", errors="replace")


def scrape(url: str, timeout: float = 2.0, also: tuple[str, ...] = ()) -> Snapshot | None:
    """One scrape; None when the target does not answer (stopped, not yet up). `also`: more name prefixes to
    keep (a command server's own request series)."""
    t = time.time()
    try:
        text = fetch(url, timeout)
    except (urllib.error.URLError, OSError, TimeoutError, ValueError):
        return None
    return parse_text(text, t, (lambda n: keep(n) or n.startswith(also)) if also else keep)


# --- arithmetic on snapshots ------------------------------------------------------------------------------


def quantile(q: float, cumulative: dict[float, float]) -> float | None:
    """histogram_quantile over cumulative bucket counts {upper bound: count}; None with no observations."""
    if not cumulative:
        return None
    bounds = sorted(cumulative)
    counts = [cumulative[b] for b in bounds]
    # Counters may be non-monotonic across buckets only through scrape races; enforce monotonicity.
    for i in range(1, len(counts)):
        counts[i] = max(counts[i], counts[i - 1])
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    for i, b in enumerate(bounds):
        if counts[i] >= rank:
            if math.isinf(b):
                return bounds[i - 1] if i > 0 else None  # as Prometheus: the highest finite bound
            lo = bounds[i - 1] if i > 0 else 0.0
            below = counts[i - 1] if i > 0 else 0.0
            in_bucket = counts[i] - below
            if in_bucket <= 0:
                return b
            return lo + (b - lo) * (rank - below) / in_bucket
    return bounds[-1]


def first_bucket_bound(q: float, cumulative: dict[float, float]) -> float | None:
    """The upper bound of the histogram's first bucket when the q-quantile lies in it, else None. There the
    interpolation of `quantile` spreads the bucket's observations evenly from zero, so its value says nothing
    but "at most this": a server whose every call takes under its first bucket's 5 ms shows 4.75 ms as P95."""
    bounds = sorted(b for b in cumulative if not math.isinf(b))
    total = max(cumulative.values(), default=0.0)
    if not bounds or total <= 0:
        return None
    first = bounds[0]
    return first if cumulative[first] >= q * total else None


def bucket_delta(a: dict[float, float], b: dict[float, float]) -> dict[float, float]:
    """b - a per bucket (a counter reset in between yields b alone)."""
    if any(b.get(k, 0.0) < v for k, v in a.items()):
        return dict(b)
    return {k: v - a.get(k, 0.0) for k, v in b.items()}


def counter_delta(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    return b if b < a else b - a


def counter_growth(a: Snapshot, b: Snapshot, name: str,
                   pred: Callable[[dict[str, str]], bool] | None = None) -> float | None:
    """How much counter `name` (its series that satisfy `pred`, summed) grew from scrape `a` to scrape `b`; None
    when `b` has none of them. A series `a` lacks was born in between and counts from 0: a Prometheus client
    exports a labelled counter from its first increment, so a window that opens before a server's first request
    of a kind has no such series at its start (a scrape that failed is no snapshot at all)."""
    at_b = b.sum(name, pred)
    return None if at_b is None else counter_delta(a.sum(name, pred) or 0.0, at_b)


def values(snaps: Iterable[Snapshot], name: str, pred: Callable[[dict[str, str]], bool] | None = None) -> list[float]:
    out = []
    for s in snaps:
        v = s.sum(name, pred)
        if v is not None:
            out.append(v)
    return out
