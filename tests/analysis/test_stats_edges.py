"""xferbench.analysis.stats at its edges: samples with no spread, infinite values, and paired series of unequal length.

What each edge must give (stats.py's contract): a figure with zero spread gets a defined interval (a point,
[c, c]) and a comparison whose paired ratios are all identical gets the explicit NO_SPREAD result, never a
t-test that calls a difference certain; an infinite value is not a measurement and is dropped like a NaN,
so nothing downstream (interval, p, verdict, noise floor) is ever NaN; paired series of unequal length are
a caller's error, refused with a message, while the report pairs its rows by round and never hits it."""

from __future__ import annotations

import math

import pytest

from xferbench.analysis import stats, summary
from xferbench.analysis.row import RunRow
from xferbench.analysis.runmeta import RunMeta

INF = float("inf")


def _finite(*xs: float | None) -> bool:
    return all(x is not None and math.isfinite(x) for x in xs)


def _no_nan(c: stats.Comparison) -> None:
    """No field of a comparison is NaN: a NaN compares False with everything, so a NaN interval passes for
    "includes 1" and turns into a silent "no significant difference"."""
    for name in ("ratio", "lo", "hi", "p", "se", "df", "floor"):
        v = getattr(c, name)
        assert v is None or not math.isnan(v), f"{name} is NaN in {c}"


# --- zero spread ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("values", [[2.0, 2.0, 2.0], [0.1] * 5, [1e-300] * 3, [7e12] * 4])
def test_identical_samples_give_a_point_interval(values: list[float]) -> None:
    e = stats.estimate(values)
    assert e.n == len(values) and e.has_ci
    assert _finite(e.center, e.lo, e.hi)
    assert e.center == pytest.approx(values[0], rel=1e-12)
    assert e.lo == pytest.approx(e.center, rel=1e-12) and e.hi == pytest.approx(e.center, rel=1e-12)
    assert e.lo <= e.center <= e.hi


def test_identical_zeros_keep_the_arithmetic_branch() -> None:
    assert stats.estimate([0.0, 0.0, 0.0]) == stats.Estimate(3, 0.0, 0.0, 0.0)


@pytest.mark.parametrize("paired", [True, False])
def test_the_same_constant_on_both_sides_is_no_difference(paired: bool) -> None:
    c = stats.compare([0.1, 0.1, 0.1], [0.1, 0.1, 0.1], paired=paired)
    assert (c.ratio, c.lo, c.hi, c.verdict, c.p) == (1.0, 1.0, 1.0, stats.SAME, 1.0)


@pytest.mark.parametrize("paired", [True, False])
def test_two_different_constants_have_no_interval(paired: bool) -> None:
    c = stats.compare([1.0, 1.0, 1.0], [2.0, 2.0, 2.0], paired=paired)
    assert c.verdict == stats.NO_SPREAD and c.ratio == pytest.approx(2.0)
    assert (c.lo, c.hi, c.p, c.se) == (None, None, None, None)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([0.1, 0.2, 0.3], [0.2, 0.4, 0.6]),  # B = 2 A in every round; log(0.4) - log(0.2) != log(0.2) - log(0.1)
        ([0.1, 0.1, 0.1], [0.2, 0.2, 0.2]),  # by one ulp, so the logs' spread is rounding, about 1e-17
        ([1.0, 2.0, 3.0, 5.0], [1.1, 2.2, 3.3, 5.5]),  # B = 1.1 A, each product rounded on its own
        ([3e-5, 7e-5, 1.3e-4], [4.5e-5, 1.05e-4, 1.95e-4]),  # seconds per request, B = 1.5 A
    ],
)
def test_identical_paired_ratios_are_no_spread_despite_rounding(a: list[float], b: list[float]) -> None:
    """Every round's ratio is the same number; only floating-point rounding of the logs differs. That is no
    measurement of noise, so no interval and no verdict: a t-test on a 1e-17 spread would call the
    difference certain (p ~ 1e-32) and the run's noise floor would collapse to ±0%."""
    c = stats.compare(a, b, higher_is_better=False, paired=True)
    assert c.verdict == stats.NO_SPREAD, c
    assert c.ratio == pytest.approx(b[0] / a[0], rel=1e-9)
    assert (c.lo, c.hi, c.p) == (None, None, None)
    (decided,) = stats.decide([c], [False], [0.05])
    assert decided.verdict == stats.NO_SPREAD  # no interval: kept out of the Holm family
    assert stats.noise_floor([c]) is None


def test_a_real_small_spread_is_still_tested() -> None:
    """The no-spread rule is about rounding only: rounds that agree to 0.1% are a measurement."""
    c = stats.compare([1.0, 2.0, 3.0], [2.0, 4.002, 5.997], paired=True)
    assert c.verdict == stats.BETTER and c.has_ci and c.p is not None and c.p < 0.001
    assert c.lo < 2.0 < c.hi


# --- infinite values --------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [INF, -INF])
def test_an_infinite_value_is_dropped_like_a_missing_one(bad: float) -> None:
    e = stats.estimate([1.0, 4.0, bad, 16.0])
    assert e == stats.estimate([1.0, 4.0, 16.0])
    assert e.n == 3 and e.center == pytest.approx(4.0) and _finite(e.lo, e.hi)
    two = stats.estimate([3.0, bad, 12.0])
    assert two.n == 2 and two.center == pytest.approx(6.0) and not two.has_ci  # below MIN_REPEATS now
    assert stats.estimate([bad, bad, bad]) == stats.Estimate(0, None, None, None)


def test_an_infinite_value_drops_its_round_from_a_paired_comparison() -> None:
    a = [1.0, 2.0, 3.0, 4.0]
    b = [1.1, 2.4, INF, 4.2]
    c = stats.compare(a, b, paired=True)
    _no_nan(c)
    want = stats.compare([1.0, 2.0, 4.0], [1.1, 2.4, 4.2], paired=True)
    assert c == want and c.n_a == c.n_b == 3 and c.has_ci and c.p is not None
    # Only the finite rounds count: with one round left per side there is no interval, and no NaN either.
    short = stats.compare([1.0, INF, 3.0], [INF, 2.0, 3.3], paired=True)
    _no_nan(short)
    assert short.verdict == stats.NO_CI and short.n_a == 1 and short.ratio == pytest.approx(1.1)


@pytest.mark.parametrize("paired", [True, False])
def test_an_infinite_value_never_becomes_a_nan_verdict_or_floor(paired: bool) -> None:
    """An inf among otherwise clear data: before, the interval was [nan, nan], the verdict "no significant
    difference" and the noise floor 0; now the value is dropped and the rest decides."""
    a = [1.0, 1.02, 0.98, 1.01, 0.99]
    b = [2.0, 2.05, 1.97, INF, 1.99]
    c = stats.compare(a, b, higher_is_better=True, paired=paired)
    _no_nan(c)
    assert c.has_ci and _finite(c.lo, c.hi, c.p) and c.n_b == 4
    assert c.ratio == pytest.approx(2.0, rel=0.02) and c.verdict == stats.BETTER
    floor = stats.noise_floor([c])
    assert floor is not None and math.isfinite(floor) and 0 < floor < 0.5
    (d,) = stats.decide([c], [True], [floor])
    _no_nan(d)
    assert d.verdict == stats.BETTER


def test_an_infinite_figure_in_a_run_row_does_not_poison_the_report() -> None:
    """The report pipeline (runs.jsonl can hold Infinity: json.dumps writes it, json.loads reads it back)."""
    base = [1.0e-4, 1.1e-4, 0.9e-4, 1.05e-4]
    other = [2.0e-4, 2.3e-4, INF, 2.1e-4]
    rows = [RunRow("a", "xferd-c", "frame", repeat=r + 1, pair=f"r{r + 1}", server_cpu_per_request_s=v)
            for r, v in enumerate(base)]
    rows += [RunRow("b", "xferd-c", "frame", repeat=r + 1, pair=f"r{r + 1}", server_cpu_per_request_s=v)
             for r, v in enumerate(other)]
    meta = RunMeta(experiment="x", baseline="a", cells=["a", "b"],
                   cell_configs={n: {"load": {"mode": "open"}} for n in "ab"})
    s = summary.summarize(meta, rows)
    (v,) = [v for v in s.verdicts if v.metric == "server_cpu_per_request_s"]
    _no_nan(v.comparison)
    assert v.comparison.n_a == 3 and v.comparison.verdict == stats.WORSE  # 2x the CPU per request
    b = next(c for c in s.cells if c.name == "b")
    assert b.est["server_cpu_per_request_s"].n == 3 and _finite(b.est["server_cpu_per_request_s"].hi)
    floor = s.floors["server_cpu_per_request_s"]
    assert floor is not None and math.isfinite(floor) and floor > 0


# --- paired series of unequal length ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ([1.0, 2.0, 3.0], [1.0, 2.0], "paired comparison of 3 and 2 values"),
        ([1.0, 2.0], [1.0, 2.0, 3.0, 4.0], "paired comparison of 2 and 4 values"),
        ([1.0, 2.0, 3.0, None], [1.0, 2.0, 3.0], "paired comparison of 4 and 3 values"),  # a None holds its round
        ([], [1.0], "paired comparison of 0 and 1 values"),
    ],
)
def test_paired_series_of_unequal_length_are_refused(a: list[float | None], b: list[float | None],
                                                     message: str) -> None:
    with pytest.raises(ValueError, match=message):
        stats.compare(a, b, paired=True)
    stats.compare(a, b, paired=False)  # unpaired, lengths may differ


def test_the_report_pairs_by_round_so_a_missing_round_is_no_error() -> None:
    """A cell with a round missing (failed) is paired on the rounds both have, not refused."""
    rows = [RunRow("a", "xferd-c", "frame", repeat=r, pair=f"r{r}", server_cpu_per_request_s=v)
            for r, v in ((1, 1.0), (2, 1.1), (3, 0.9), (4, 1.0))]
    rows += [RunRow("b", "xferd-c", "frame", repeat=r, pair=f"r{r}", server_cpu_per_request_s=v)
             for r, v in ((1, 1.2), (3, 1.0), (4, 1.25))]
    meta = RunMeta(experiment="x", baseline="a", cells=["a", "b"],
                   cell_configs={n: {"load": {"mode": "open"}} for n in "ab"})
    s = summary.summarize(meta, rows)
    c = next(c for c in s.cells if c.name == "b").vs_base["server_cpu_per_request_s"]
    assert c.n_a == c.n_b == 3
    assert c == stats.decide([stats.compare([1.0, 0.9, 1.0], [1.2, 1.0, 1.25], False, paired=True)],
                             [False], [s.floors["server_cpu_per_request_s"]])[0]
