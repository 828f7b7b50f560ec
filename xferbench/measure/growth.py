"""How much a gauge (RSS, live heap) grew over a soak's measured window, as a figure noise cannot fake.

The figure is the Theil-Sen line (the median of the slopes between every pair of samples) through the
window: its rise from the window's start to its end, divided by its level at the start. A GC sawtooth, a
burst of allocation or a single scrape landing on a spike moves a few pairwise slopes and not their median
(up to 29% of the samples can be wild before the median follows them), while a steady leak moves every
slope the same way. Two endpoints, or even medians of the first and last minute, would hinge on where the
sawtooth happened to be at those instants; a least-squares line is pulled by one spike near either end.
docs/DESIGN.md, "The soak", has the longer argument.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

MIN_POINTS = 10  # fewer samples than this give no figure: a slope through a handful of points is noise
MAX_POINTS = 600  # pairs grow with the square of the samples; longer series are thinned evenly first


def thin(ts: Sequence[float], ys: Sequence[float], limit: int = MAX_POINTS) -> tuple[list[float], list[float]]:
    """At most `limit` samples, evenly spaced through the series, keeping the first and the last."""
    n = len(ts)
    if n <= limit:
        return list(ts), list(ys)
    idx = sorted({round(i * (n - 1) / (limit - 1)) for i in range(limit)})
    return [ts[i] for i in idx], [ys[i] for i in idx]


def theil_sen(ts: Sequence[float], ys: Sequence[float]) -> tuple[float, float] | None:
    """(slope, intercept) of the Theil-Sen line through the points; None with fewer than two distinct t."""
    t, y = thin(ts, ys)
    slopes = [
        (y[j] - y[i]) / (t[j] - t[i]) for i in range(len(t)) for j in range(i + 1, len(t)) if t[j] != t[i]
    ]
    if not slopes:
        return None
    slope = statistics.median(slopes)
    intercept = statistics.median(yi - slope * ti for ti, yi in zip(t, y, strict=True))
    return slope, intercept


def growth(ts: Sequence[float], ys: Sequence[float], t_from: float, t_to: float) -> float | None:
    """The fitted rise from t_from to t_to over the fitted level at t_from (0.05 = grew 5%), using the
    samples inside [t_from, t_to]; None with too few samples or a level at or below zero."""
    pts = [(t, y) for t, y in zip(ts, ys, strict=True) if t_from <= t <= t_to and math.isfinite(y)]
    if len(pts) < MIN_POINTS or t_to <= t_from:
        return None
    fit = theil_sen([t for t, _ in pts], [y for _, y in pts])
    if fit is None:
        return None
    slope, intercept = fit
    level = intercept + slope * t_from
    if level <= 0:
        return None
    return slope * (t_to - t_from) / level
