"""xferbench.measure.growth on synthetic series: a flat noisy series is no growth, a ramp is its exact percentage,
spikes and a GC sawtooth are not called growth, and too little data gives no figure."""

from __future__ import annotations

import random

import pytest

from xferbench.measure import growth

MIB = float(1 << 20)


def seconds(n: int, start: float = 0.0) -> list[float]:
    return [start + float(i) for i in range(n)]


def test_flat_noisy_series_is_about_zero() -> None:
    rnd = random.Random(1)
    ts = seconds(480)
    ys = [100 * MIB * (1 + rnd.uniform(-0.03, 0.03)) for _ in ts]  # ±3% scrape-to-scrape noise
    g = growth.growth(ts, ys, ts[0], ts[-1])
    assert g is not None and abs(g) < 0.005


def test_linear_ramp_gives_its_percentage() -> None:
    ts = seconds(481, start=120.0)  # minute 2 to minute 10
    ys = [100 * MIB + (t - 120.0) * (10 * MIB / 480) for t in ts]  # +10 MiB over the window: +10%
    assert growth.growth(ts, ys, 120.0, 600.0) == pytest.approx(0.10, rel=1e-6)


def test_a_noisy_ramp_is_still_measured() -> None:
    rnd = random.Random(2)
    ts = seconds(480)
    ys = [50 * MIB * (1 + 0.2 * t / 480) + rnd.gauss(0, 2 * MIB) for t in ts]  # +20% under ±4% noise
    assert growth.growth(ts, ys, 0.0, 480.0) == pytest.approx(0.20, abs=0.02)


@pytest.mark.parametrize("at", [0, 240, 479], ids=["first", "middle", "last"])
def test_a_single_spike_is_not_growth(at: int) -> None:
    ts = seconds(480)
    ys = [100 * MIB] * 480
    ys[at] = 300 * MIB  # one scrape caught a transient 3x
    assert growth.growth(ts, ys, 0.0, 479.0) == pytest.approx(0.0, abs=1e-9)


def test_a_gc_sawtooth_is_not_growth() -> None:
    # Go's heap between collections: up from 40 to 80 MiB, back to 40, every 7 s; the window ends at a peak.
    ts = seconds(484)
    ys = [40 * MIB + (t % 7) * (40 * MIB / 6) for t in ts]
    g = growth.growth(ts, ys, 0.0, 483.0)
    assert g is not None and abs(g) < 0.02


def test_only_the_window_counts() -> None:
    ts = seconds(600)
    ys = [10 * MIB + t * MIB if t < 120 else 130 * MIB for t in ts]  # fills up for 2 minutes, then flat
    assert growth.growth(ts, ys, 0.0, 119.0) > 5.0  # the fill is growth (10 → 129 MiB)...
    assert growth.growth(ts, ys, 120.0, 599.0) == pytest.approx(0.0, abs=1e-9)  # ...that the warm-up excludes


def test_too_few_points_or_no_level_give_none() -> None:
    assert growth.growth(seconds(5), [1.0] * 5, 0.0, 4.0) is None
    assert growth.growth(seconds(50), [0.0] * 50, 0.0, 49.0) is None  # no level to grow from
    assert growth.growth(seconds(50), [1.0] * 50, 10.0, 10.0) is None  # an empty window
    assert growth.growth([3.0] * 20, [1.0] * 20, 0.0, 5.0) is None  # one instant: no slope


def test_long_series_are_thinned_keeping_the_ends() -> None:
    ts = seconds(5000)
    t, y = growth.thin(ts, ts, limit=100)
    assert len(t) == 100 and t[0] == 0.0 and t[-1] == 4999.0 and t == y
    ramp = [1000.0 + x for x in ts]
    assert growth.growth(ts, ramp, 0.0, 4999.0) == pytest.approx(4999.0 / 1000.0)
