"""Statistics across repeats, valid at the 3-10 repeats a benchmark run can afford.

Everything is computed on the log scale, because performance effects are multiplicative ("1.15x") and
their noise is closer to log-normal than to normal:

- **One cell**: the geometric mean of its repeats, with a Student-t 95% interval on the log values.
- **Two cells of one run** (paired): repeats run in interleaved rounds (A B C, A B C, ...), so repeat r of
  A and repeat r of B ran seconds apart under the same machine conditions. The ratio B/A is the geometric
  mean of the per-round ratios B_r/A_r, with a Student-t interval on the mean of log(B_r/A_r) (the paired
  t-test). Whatever slows the whole machine during a round cancels out of the ratio.
- **Two runs** (`xferbench compare`; nothing is paired): Welch's t-interval on the difference of the mean
  log values.

Why t-intervals on logs and not the percentile bootstrap or Hodges-Lehmann: a bootstrap of 3-5 values
cannot produce an interval wider than the sample's range, so its true coverage at n = 3 is about 75%;
the exact Mann-Whitney interval behind Hodges-Lehmann cannot reach 95% at all below n = 4 per side
(the smallest two-sided p at n = 3 is 0.1). The t-interval's coverage is exact for log-normal noise
at any n >= 2 and widens honestly when repeats disagree. Kalibera & Jones, "Rigorous Benchmarking in
Reasonable Time" (ISMM 2013), build their ratio intervals the same way; tests/analysis/test_stats.py checks
coverage and the false-verdict rate by simulation from recorded per-run noise.

**Verdicts** over one report are a family of tests (every compared cell x every verdict metric), so
p-values are adjusted with Holm's step-down method (Holm 1979), which controls the family-wise rate of
false "better"/"worse" calls at ALPHA. On top of that, a difference smaller than the run's **noise
floor** for that metric is never called: the floor is the half-width of a typical comparison's interval,
from the noise pooled over every comparison of the run (a pair whose few repeats happened to agree
closely does not get a narrower floor than the machine deserves).

With fewer than MIN_REPEATS values on a side there is no interval and no verdict. A value that is None,
NaN or infinite is not a measurement: it is dropped (a paired round with one loses the round), so `n` counts
finite values only and no interval, p or verdict is ever NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

ALPHA = 0.05  # family-wise rate of false verdicts in one report
LEVEL = 0.95  # the level of every printed interval
MIN_REPEATS = 3
NO_SPREAD_LOG = 1e-9  # a spread of log values this small is rounding of identical figures, not noise

BETTER = "better"
WORSE = "worse"
SAME = "no significant difference"
BELOW_FLOOR = "below the noise floor"
NO_CI = "no CI (fewer than 3 repeats)"
NO_SPREAD = "no CI (identical ratios: no measure of noise)"
NOT_POSITIVE = "no CI (values <= 0)"
NO_DATA = "no data"
ZERO_BASE = "baseline is zero"
HELD = "held fixed by the load"  # a figure the experiment fixes by design (QPS under an offered rate), never judged
# A figure per request as the server counts them, between cells whose servers count different things as a request
# (a gRPC call is a whole transfer, a frame call one chunk): its ratio is shown, never judged.
UNLIKE = "not compared: the servers count requests differently"
DIAGNOSTIC = "diagnostic: no verdict"  # a figure of the instrument (xferbench/analysis/metrics.py), never judged


def _student_t() -> Any:
    """scipy's Student t, imported when first needed: importing scipy.stats costs about a second of CPU,
    which every `xferbench` command (help, list, an argument error) would otherwise pay."""
    from scipy import stats

    return stats.t


def _clean(xs: Sequence[float | None]) -> np.ndarray:
    return np.array([x for x in xs if _ok(x)], dtype=float)


def _ok(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _tq(level: float, df: float) -> float:
    return float(_student_t().ppf(0.5 + level / 2, df))


@dataclass(frozen=True)
class Estimate:
    n: int
    center: float | None  # geometric mean (arithmetic mean when a value is <= 0)
    lo: float | None  # None: no CI
    hi: float | None
    # No value, but every run's was at most this (RunRow.bounds: an unresolved quantile, or CPU under its clock's step)
    bound: float | None = None

    @property
    def has_ci(self) -> bool:
        return self.lo is not None


def estimate(xs: Sequence[float | None], level: float = LEVEL) -> Estimate:
    """Geometric mean with its t-interval on the log values (arithmetic mean and t-interval when a value
    is <= 0, as counts of failures can be); no interval with fewer than MIN_REPEATS values."""
    a = _clean(xs)
    if a.size == 0:
        return Estimate(0, None, None, None)
    positive = bool(np.all(a > 0))
    v = np.log(a) if positive else a
    m = float(v.mean())
    back = math.exp if positive else float
    if a.size < MIN_REPEATS:
        return Estimate(int(a.size), back(m), None, None)
    half = _tq(level, a.size - 1) * float(v.std(ddof=1)) / math.sqrt(a.size)
    return Estimate(int(a.size), back(m), back(m - half), back(m + half))


@dataclass(frozen=True)
class Comparison:
    ratio: float | None  # B / A: geometric mean of per-round ratios (paired) or of the geometric means
    lo: float | None
    hi: float | None
    verdict: str
    n_a: int
    n_b: int
    p: float | None = None  # two-sided p of "no difference"; after decide(), Holm-adjusted
    se: float | None = None  # standard error of log(ratio)
    df: float | None = None
    paired: bool = False
    floor: float | None = None  # the noise floor applied by decide(), as a fraction (0.05 = ±5%)

    @property
    def has_ci(self) -> bool:
        return self.lo is not None

    def text(self) -> str:
        if self.ratio is None:
            return self.verdict
        pct = (self.ratio - 1) * 100
        s = f"{self.ratio:.3f}x ({pct:+.1f}%)"
        if self.lo is not None and self.hi is not None:
            s += f" [{self.lo:.3f}, {self.hi:.3f}]"
        return f"{s} {self.verdict}"


def _directional(significant_up: bool, higher_is_better: bool) -> str:
    return BETTER if significant_up == higher_is_better else WORSE


def compare(
    a: Sequence[float | None],
    b: Sequence[float | None],
    higher_is_better: bool | None = True,
    paired: bool = False,
    level: float = LEVEL,
) -> Comparison:
    """B relative to A, with an interval at `level` and an unadjusted verdict (the interval excludes 1).

    paired=True: a[i] and b[i] were measured in the same round; rounds where either is missing are dropped.
    higher_is_better=None: a diagnostic figure; the ratio and interval, never a test (no p) or a verdict.
    """
    c = _compare(a, b, bool(higher_is_better), paired, level)
    if higher_is_better is None and c.verdict in (BETTER, WORSE, SAME):
        return replace(c, verdict=DIAGNOSTIC, p=None)
    return c


def _compare(
    a: Sequence[float | None], b: Sequence[float | None], higher_is_better: bool, paired: bool, level: float
) -> Comparison:
    if paired:
        if len(a) != len(b):
            raise ValueError(f"paired comparison of {len(a)} and {len(b)} values")
        keep = [(x, y) for x, y in zip(a, b, strict=True) if _ok(x) and _ok(y)]
        xa = np.array([x for x, _ in keep], dtype=float)
        xb = np.array([y for _, y in keep], dtype=float)
    else:
        xa, xb = _clean(a), _clean(b)
    na, nb = int(xa.size), int(xb.size)
    if na == 0 or nb == 0:
        return Comparison(None, None, None, NO_DATA, na, nb, paired=paired)
    if not (np.all(xa > 0) and np.all(xb > 0)):
        ma, mb = float(xa.mean()), float(xb.mean())
        if ma == 0:
            if mb == 0:
                return Comparison(1.0, None, None, SAME, na, nb, paired=paired)
            return Comparison(None, None, None, ZERO_BASE, na, nb, paired=paired)
        return Comparison(mb / ma, None, None, NOT_POSITIVE, na, nb, paired=paired)
    la, lb = np.log(xa), np.log(xb)
    if paired:
        d = lb - la
        diff = float(d.mean())
        if na < MIN_REPEATS:
            return Comparison(math.exp(diff), None, None, NO_CI, na, nb, paired=True)
        se, df = float(d.std(ddof=1)) / math.sqrt(na), float(na - 1)
    else:
        diff = float(lb.mean() - la.mean())
        if na < MIN_REPEATS or nb < MIN_REPEATS:
            return Comparison(math.exp(diff), None, None, NO_CI, na, nb)
        va, vb = float(la.var(ddof=1)) / na, float(lb.var(ddof=1)) / nb
        se = math.sqrt(va + vb)
        # Welch-Satterthwaite degrees of freedom; identical constant samples give se = 0.
        df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1)) if se > 0 else float(na + nb - 2)
    if se <= NO_SPREAD_LOG:
        # Every paired ratio identical (or both sides constant): a figure on a grid, such as a capacity found
        # by the same bisection steps, not a measurement of noise. A t-test would call any difference certain.
        # Identical ratios of unequal values leave a spread of floating-point rounding in their logs (about
        # 1e-17), which is no more a measurement than zero is.
        if abs(diff) <= NO_SPREAD_LOG:
            return Comparison(1.0, 1.0, 1.0, SAME, na, nb, 1.0, 0.0, df, paired)
        return Comparison(math.exp(diff), None, None, NO_SPREAD, na, nb, paired=paired)
    p = float(2 * _student_t().sf(abs(diff) / se, df))
    half = _tq(level, df) * se
    lo, hi = math.exp(diff - half), math.exp(diff + half)
    verdict = SAME
    if lo > 1.0 or hi < 1.0:
        verdict = _directional(lo > 1.0, higher_is_better)
    return Comparison(math.exp(diff), lo, hi, verdict, na, nb, p, se, df, paired)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given (Holm 1979)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def noise_floor(comparisons: Sequence[Comparison], level: float = LEVEL, resolution: float = 0.0) -> float | None:
    """The half-width (as a fraction: 0.05 = ±5%) an interval gets with this run's noise: the variance of one
    log ratio pooled over every comparison with an interval (weighted by degrees of freedom, with the t
    quantile of the pooled degrees of freedom), over the typical effective number of repeats. Never below
    `resolution`, the granularity of the figure itself. None without any interval."""
    # (df, se, n_eff) of every comparison with an interval; se² = variance of one log ratio / n_eff
    with_ci = [
        (c.df, c.se, float(c.n_a) if c.paired else 1.0 / (1.0 / c.n_a + 1.0 / c.n_b))
        for c in comparisons
        if c.se is not None and c.df is not None and c.df >= 1
    ]
    if not with_ci:
        return None
    df = sum(d for d, _, _ in with_ci)
    var = sum(d * se**2 * n for d, se, n in with_ci) / df
    n_typ = sum(n for _, _, n in with_ci) / len(with_ci)
    return max(resolution, math.exp(_tq(level, df) * math.sqrt(var / n_typ)) - 1.0)


def decide(
    comparisons: Sequence[Comparison],
    higher_is_better: Sequence[bool],
    floors: Sequence[float | None],
    alpha: float = ALPHA,
) -> list[Comparison]:
    """Final verdicts for one family of comparisons: Holm-adjusted p < alpha, and a change at least as
    large as that metric's noise floor. Comparisons without an interval keep their verdict."""
    idx = [i for i, c in enumerate(comparisons) if c.p is not None]
    adj = holm([comparisons[i].p for i in idx])  # type: ignore[misc]
    out = list(comparisons)
    for i, p in zip(idx, adj, strict=True):
        c, floor = comparisons[i], floors[i]
        if p >= alpha:
            verdict = SAME
        elif floor is not None and abs(math.log(c.ratio)) < math.log1p(floor):  # type: ignore[arg-type]
            verdict = BELOW_FLOOR
        else:
            verdict = _directional(c.ratio > 1.0, higher_is_better[i])  # type: ignore[operator]
        out[i] = replace(c, p=p, verdict=verdict, floor=floor)
    return out



def rounds_for(half_width: float, n: int, target: float, most: int = 1000) -> int | None:
    """How many rounds in all would likely narrow a ratio interval of `half_width` (a fraction, as after `n`
    rounds) to `target`, the noise staying as it was: the half-width is t(m-1) x sd / sqrt(m) on the log scale.
    None when n < 2 or not within `most`."""
    if n < 2 or half_width <= 0:
        return None
    if half_width <= target:
        return n
    sd = math.log1p(half_width) * math.sqrt(n) / _tq(LEVEL, n - 1)
    want = math.log1p(target)
    for m in range(n + 1, most + 1):
        if _tq(LEVEL, m - 1) * sd / math.sqrt(m) <= want:
            return m
    return None
