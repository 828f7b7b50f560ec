"""xferbench.stats on known distributions: CI coverage, verdicts, the no-CI rule, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from xferbench import stats


def test_median_and_no_ci_below_three_repeats() -> None:
    e = stats.estimate([3.0, 1.0])
    assert e.median == 2.0 and e.n == 2 and not e.has_ci
    c = stats.compare([1.0, 1.1], [2.0, 2.1])
    assert c.verdict == stats.NO_CI and c.lo is None and c.ratio == pytest.approx(2.05 / 1.05)
    assert stats.estimate([]).median is None
    assert stats.estimate([None, 5.0, float("nan")]).median == 5.0


@pytest.mark.parametrize("n", [10, 30])
def test_ci_covers_true_median_at_about_95_percent(n: int) -> None:
    trials, cover = 300, 0
    for seed in range(trials):
        x = np.random.default_rng(10_000 + seed).lognormal(0.0, 0.5, n)  # true median = e^0 = 1
        e = stats.estimate(list(x), seed=seed, b=1000)
        assert e.lo <= e.median <= e.hi
        cover += e.lo <= 1.0 <= e.hi
    # 95% nominal; the percentile bootstrap of a median runs slightly low for small n.
    assert 0.89 <= cover / trials <= 0.99, cover / trials


def test_small_n_ci_is_about_the_sample_range() -> None:
    # With 3 repeats the interval is (nearly) [min, max], whose coverage is 1 - 2 * 0.5**3 = 75%.
    trials, cover = 300, 0
    for seed in range(trials):
        x = np.random.default_rng(seed).normal(10, 1, 3)
        e = stats.estimate(list(x), seed=seed, b=1000)
        cover += e.lo <= 10 <= e.hi
    assert 0.65 <= cover / trials <= 0.85


def test_verdicts_on_clearly_different_samples() -> None:
    rng = np.random.default_rng(1)
    a = list(rng.normal(100, 2, 5))
    b = list(rng.normal(130, 2, 5))
    up = stats.compare(a, b, higher_is_better=True)
    assert up.verdict == stats.BETTER and up.lo > 1.2 and up.hi < 1.4
    assert stats.compare(a, b, higher_is_better=False).verdict == stats.WORSE
    assert stats.compare(b, a, higher_is_better=True).verdict == stats.WORSE
    assert stats.compare(b, a, higher_is_better=False).verdict == stats.BETTER


def test_identical_distributions_rarely_significant() -> None:
    trials, sig = 200, 0
    for seed in range(trials):
        rng = np.random.default_rng(seed)
        c = stats.compare(list(rng.normal(10, 1, 10)), list(rng.normal(10, 1, 10)), seed=seed, nboot=1000)
        sig += c.verdict != stats.SAME
        if c.verdict == stats.SAME:
            assert c.lo <= 1.0 <= c.hi
    assert sig / trials <= 0.10, sig / trials


def test_identical_samples_no_difference_and_deterministic() -> None:
    x = [5.0, 5.1, 4.9, 5.05]
    c = stats.compare(x, x)
    assert c.verdict == stats.SAME and c.ratio == 1.0
    assert stats.estimate(x) == stats.estimate(x)  # fixed seed: same intervals every time
    assert stats.compare([1, 2, 3], [2, 3, 4]) == stats.compare([1, 2, 3], [2, 3, 4])


def test_zero_baseline() -> None:
    assert stats.compare([0, 0, 0], [0, 0, 0]).ratio == 1.0
    assert stats.compare([0, 0, 0], [1, 1, 1]).verdict == "baseline is zero"
