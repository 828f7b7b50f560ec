"""Statistics across repeats: medians, 95% bootstrap confidence intervals, ratios and verdicts.

- The CI of a median is the percentile bootstrap (resampling the repeats with replacement).
- The ratio of two cells (B / A) is bootstrapped from independent resamples of each; its CI is the
  2.5-97.5 percentiles of the resampled ratios of medians.
- The verdict, like benchstat's: "no significant difference" unless the ratio's 95% CI excludes 1; then
  better or worse according to the metric's direction.
- With fewer than MIN_REPEATS values on a side, no CI is given and the verdict says so — a CI from two
  points would be invented, not estimated.

Every RNG is seeded (SEED), so the same runs always give the same intervals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SEED = 20240531
BOOTSTRAP = 4000
LEVEL = 0.95
MIN_REPEATS = 3

BETTER = "better"
WORSE = "worse"
SAME = "no significant difference"
NO_CI = "no CI (fewer than 3 repeats)"


def _clean(xs: Sequence[float | None]) -> np.ndarray:
    return np.array([x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))], dtype=float)


def median(xs: Sequence[float | None]) -> float | None:
    a = _clean(xs)
    return float(np.median(a)) if a.size else None


@dataclass(frozen=True)
class Estimate:
    n: int
    median: float | None
    lo: float | None  # None: no CI
    hi: float | None

    @property
    def has_ci(self) -> bool:
        return self.lo is not None


def _boot_medians(a: np.ndarray, rng: np.random.Generator, b: int) -> np.ndarray:
    idx = rng.integers(0, a.size, size=(b, a.size))
    return np.median(a[idx], axis=1)


def estimate(xs: Sequence[float | None], seed: int = SEED, b: int = BOOTSTRAP, level: float = LEVEL) -> Estimate:
    """Median with its percentile-bootstrap CI (None bounds with fewer than MIN_REPEATS values)."""
    a = _clean(xs)
    if a.size == 0:
        return Estimate(0, None, None, None)
    m = float(np.median(a))
    if a.size < MIN_REPEATS:
        return Estimate(int(a.size), m, None, None)
    rng = np.random.default_rng(seed)
    meds = _boot_medians(a, rng, b)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(meds, [alpha, 1 - alpha])
    return Estimate(int(a.size), m, float(lo), float(hi))


@dataclass(frozen=True)
class Comparison:
    ratio: float | None  # median(B) / median(A)
    lo: float | None
    hi: float | None
    verdict: str
    n_a: int
    n_b: int

    def text(self) -> str:
        if self.ratio is None:
            return self.verdict
        pct = (self.ratio - 1) * 100
        s = f"{self.ratio:.3f}x ({pct:+.1f}%)"
        if self.lo is not None and self.hi is not None:
            s += f" [{self.lo:.3f}, {self.hi:.3f}]"
        return f"{s} {self.verdict}"


def compare(
    a: Sequence[float | None],
    b: Sequence[float | None],
    higher_is_better: bool = True,
    seed: int = SEED,
    nboot: int = BOOTSTRAP,
    level: float = LEVEL,
) -> Comparison:
    """B relative to A: ratio of medians, its bootstrap CI and a verdict."""
    xa, xb = _clean(a), _clean(b)
    if xa.size == 0 or xb.size == 0:
        return Comparison(None, None, None, "no data", int(xa.size), int(xb.size))
    ma, mb = float(np.median(xa)), float(np.median(xb))
    if ma == 0:
        ratio = None if mb != 0 else 1.0
        if ratio is None:
            return Comparison(None, None, None, "baseline is zero", int(xa.size), int(xb.size))
    else:
        ratio = mb / ma
    if xa.size < MIN_REPEATS or xb.size < MIN_REPEATS:
        return Comparison(ratio, None, None, NO_CI, int(xa.size), int(xb.size))
    rng = np.random.default_rng(seed)
    ba = _boot_medians(xa, rng, nboot)
    bb = _boot_medians(xb, rng, nboot)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = bb / ba
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return Comparison(ratio, None, None, SAME, int(xa.size), int(xb.size))
    alpha = (1 - level) / 2
    lo, hi = (float(x) for x in np.quantile(ratios, [alpha, 1 - alpha]))
    if lo > 1.0:
        verdict = BETTER if higher_is_better else WORSE
    elif hi < 1.0:
        verdict = WORSE if higher_is_better else BETTER
    else:
        verdict = SAME
    return Comparison(ratio, lo, hi, verdict, int(xa.size), int(xb.size))


# The metrics summarised per cell: (row field, title, unit, higher is better).
METRICS: tuple[tuple[str, str, str, bool], ...] = (
    ("client_qps", "client QPS", "req/s", True),
    ("client_bytes_per_s", "client bytes/s", "B/s", True),
    ("client_p50_s", "client P50", "s", False),
    ("client_p95_s", "client P95", "s", False),
    ("client_p99_s", "client P99", "s", False),
    ("client_failures", "failures", "", False),
    ("server_qps", "server QPS", "req/s", True),
    ("server_p95_s", "server P95", "s", False),
    ("server_cpu_cores", "server CPU", "cores", False),
    ("rss_peak_bytes", "peak RSS", "B", False),
    ("rss_mean_bytes", "mean RSS", "B", False),
    ("gc_pauses", "GC pauses", "", False),
    ("gc_pause_total_s", "GC pause total", "s", False),
    ("gc_pause_p99_s", "GC pause P99", "s", False),
    ("gc_cpu_share", "GC CPU share", "", False),
    ("alloc_allocated_bytes", "allocator allocated", "B", False),
    ("alloc_resident_bytes", "allocator resident", "B", False),
    ("gen_cpu_cores", "generator CPU", "cores", False),
    ("runner_cpu_cores", "runner CPU", "cores", False),
)
METRIC_INFO = {m[0]: m for m in METRICS}
# The metrics the ranking compares with the baseline.
RANKED = ("client_qps", "client_p95_s", "client_p99_s", "rss_peak_bytes", "gc_pause_total_s")
