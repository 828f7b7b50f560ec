"""The capacity search's steps against a model server whose P99 grows with the offered rate, and the
--until-ci stopping rule on recorded-looking rows. (tests/run/test_fidelity.py runs both for real.)"""

from __future__ import annotations

import math

from xferbench.analysis import stats
from xferbench.analysis.row import RunRow
from xferbench.analysis.runmeta import RunMeta
from xferbench.analysis.stats import compare
from xferbench.cli import ranked_comparisons
from xferbench.measure import capacity
from xferbench.run.sweep import UntilCI, _more_rounds, ci_half_width


def _model(limit: float, gen_limit: float = 1e9):
    """P99 of an M/M/1-like server: 5 ms at no load, growing without bound towards `limit` req/s."""
    calls: list[float] = []

    def measure(rate: float) -> capacity.Step:
        calls.append(rate)
        util = min(rate / limit, 0.999)
        achieved = min(rate, limit, gen_limit)
        return capacity.Step(rate, achieved, 0.005 / (1 - util), 0.0, 0.95 * rate / gen_limit)

    return measure, calls


def test_search_brackets_the_capacity_within_the_precision() -> None:
    measure, calls = _model(limit=1000)
    res = capacity.search(measure, 100, slo_p99_s=0.05, slo_failures=0.01, gen_saturated_cores=0.9)
    # P99 <= 50 ms while util <= 0.9: the true capacity is 900 req/s.
    assert res.status == capacity.FOUND
    assert 900 / 1.1 <= res.capacity_rps <= 900
    assert calls[:4] == [100, 200, 400, 800]  # doubling until the first miss
    assert res.best is not None and res.best.rate == res.capacity_rps and res.best.ok
    assert all(("P99" in s.why) != s.ok for s in res.steps)


def test_a_stricter_slo_finds_less() -> None:
    strict = capacity.search(_model(1000)[0], 100, 0.01, 0.01, 0.9)
    loose = capacity.search(_model(1000)[0], 100, 0.1, 0.01, 0.9)
    assert strict.capacity_rps < loose.capacity_rps


def test_search_halves_when_the_first_step_already_misses() -> None:
    res = capacity.search(_model(limit=50)[0], 400, 0.05, 0.01, 0.9)
    assert res.status == capacity.FOUND and res.capacity_rps <= 45
    assert [s.rate for s in res.steps][:3] == [400, 200, 100]


def test_search_gives_up_when_nothing_meets_the_slo() -> None:
    res = capacity.search(_model(limit=1000)[0], 100, slo_p99_s=0.001, slo_failures=0.01, gen_saturated_cores=0.9)
    assert res.status == capacity.NONE_PASSED and res.capacity_rps is None and res.best is None


def test_search_stops_when_the_generator_saturates_first() -> None:
    measure, calls = _model(limit=100_000, gen_limit=1000)
    res = capacity.search(measure, 200, 0.05, 0.01, 0.9)
    assert res.status == capacity.GENERATOR_BOUND
    assert "saturated" in res.steps[-1].why
    assert res.capacity_rps == 800  # the last rate that passed before the generator, not the server, gave out
    assert calls == [200, 400, 800, 1600]


def test_an_open_loop_that_falls_behind_fails_its_step() -> None:
    step = capacity.judge(capacity.Step(1000, 800, 0.001, 0.0, 0.2), 0.05, 0.01)
    assert not step.ok and "achieved 800 of 1000" in step.why


def _rows(values: dict[str, list[float]]) -> list[RunRow]:
    return [
        RunRow(cell, "xferd-c", "frame", repeat=r + 1, pair=f"r{r + 1}", server_cpu_per_request_s=v)
        for cell, vs in values.items()
        for r, v in enumerate(vs)
    ]


OPEN = {"load": {"mode": "open"}}
META = {"experiment": "x", "baseline": "a", "cells": ["a", "b"], "cell_configs": {"a": OPEN, "b": OPEN}}


def _until(budget_s: float) -> UntilCI:
    """--until-ci 5% as the CLI builds it: the report's summary answers the runner's question."""
    return UntilCI(0.05, budget_s=budget_s, ranked=ranked_comparisons)


def test_until_ci_adds_rounds_while_the_interval_is_wide_and_time_is_left() -> None:
    wide = _rows({"a": [1.0, 1.2, 0.9], "b": [1.1, 0.9, 1.2]})
    meta = RunMeta.from_json(META)
    assert _more_rounds(meta, wide, _until(600), repeat=4, elapsed_s=60)
    assert _more_rounds(meta, wide, _until(70), repeat=4, elapsed_s=60) is False
    assert meta.until_ci is not None and meta.until_ci.met is False and "budget" in meta.until_ci.why


def test_until_ci_stops_once_every_ranked_interval_is_narrow() -> None:
    # b = 1.1 x a to within 0.1% in every round (identical ratios would be no measure of noise: NO_SPREAD)
    narrow = _rows({"a": [1.0, 1.1, 0.9], "b": [1.1, 1.2109, 0.9895]})
    meta = RunMeta.from_json(META)
    assert _more_rounds(meta, narrow, _until(600), repeat=4, elapsed_s=60) is False
    until = meta.until_ci
    assert until is not None and until.met is True and until.widest is not None and until.widest < 0.05


def test_the_default_budget_is_as_long_again_as_the_planned_rounds() -> None:
    wide = _rows({"a": [1.0, 1.2, 0.9], "b": [1.1, 0.9, 1.2]})
    meta = RunMeta.from_json(META)
    default = UntilCI(0.05, budget_s=None, ranked=ranked_comparisons)
    assert _more_rounds(meta, wide, default, repeat=4, elapsed_s=60, planned_s=60)  # 60 + 20 <= 120
    assert _more_rounds(meta, wide, default, repeat=7, elapsed_s=110, planned_s=60) is False  # 110 + 18 > 120
    until = meta.until_ci
    assert until is not None and until.budget_s == 120 and not until.met
    # Missed: how many more rounds would likely narrow the widest interval to ±5%, the noise staying as it was.
    assert until.widest is not None and until.more is not None and until.more > 0
    need = until.rounds + until.more
    assert stats.rounds_for(until.widest, until.rounds, 0.05) == need


def test_rounds_for_follows_the_t_interval() -> None:
    assert stats.rounds_for(0.04, 5, 0.05) == 5  # already there
    assert stats.rounds_for(0.10, 1, 0.05) is None  # no spread known from one round
    # Half-width ∝ t(n-1)/sqrt(n): from ±10% after 5 rounds, ±5% needs about four times the rounds and a bit less
    # for the smaller t quantile: computed, then checked against the formula at m and m - 1.
    m = stats.rounds_for(0.10, 5, 0.05)
    assert m is not None and 10 < m < 20
    sd = math.log1p(0.10) * math.sqrt(5) / stats._tq(0.95, 4)
    assert stats._tq(0.95, m - 1) * sd / math.sqrt(m) <= math.log1p(0.05)
    assert stats._tq(0.95, m - 2) * sd / math.sqrt(m - 1) > math.log1p(0.05)


def test_ci_half_width_reads_a_ratio_interval_on_the_log_scale() -> None:
    c = compare([1.0, 1.1, 0.9, 1.05], [1.1, 1.2, 1.0, 1.12], paired=True)
    w = ci_half_width(c)
    assert w is not None and 0 < w < 0.1
    assert abs((1 + w) ** 2 - c.hi / c.lo) < 1e-9


def test_the_report_header_says_whether_until_ci_met_its_target() -> None:
    from xferbench.analysis.summary import summarize
    from xferbench.report import tables

    wide = _rows({"a": [1.0, 1.2, 0.9], "b": [1.1, 0.9, 1.2]})
    meta = RunMeta.from_json(META)
    assert _more_rounds(meta, wide, _until(70), repeat=4, elapsed_s=60) is False
    lines = dict(tables.header(summarize(meta, wide)))
    assert lines["Until CI"].startswith("target ±5% on server CPU per request: not met after 3 rounds")
    assert "more rounds would likely reach the target" in lines["Until CI"], lines["Until CI"]


def test_a_generator_with_no_idle_cpu_is_saturated_whatever_its_own_cpu() -> None:
    # On a virtual machine the hypervisor steals time: the generator's CPU is busy or stolen (0.02 cores idle)
    # while Locust itself shows 0.7 cores, and the server is nowhere near its limit.
    def measure(rate: float) -> capacity.Step:
        starved = rate >= 800
        return capacity.Step(rate, rate * (0.6 if starved else 1.0), 0.005, 0.0, 0.7 if starved else 0.3,
                             0.02 if starved else 0.6)

    res = capacity.search(measure, 200, 0.05, 0.01, 0.9)
    assert res.status == capacity.GENERATOR_BOUND
    assert res.capacity_rps == 400 and [s.rate for s in res.steps] == [200, 400, 800]
    assert "0.02 idle" in res.steps[-1].why
