"""What moved between two bench records, on synthetic records: a figure moved only when an exact permutation
test over its rounds says the records differ (the figures of one comparison held together to FALSE_ALARMS
false alarms on average) and its medians are further apart than both records' A/A spread. Busy figures, too
few rounds and records without rounds are said so, never called moved. Pure computation: no processes, except
one run of the CLI's --compare on a throw-away history."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from xferbench.tools.bench import command, compare
from xferbench.tools.bench.record import Figure, Record, Samples, aa_spread_of, append, check_finite, read

ROOT = Path(__file__).resolve().parents[2]
MACHINE = {"hostname": "a", "nproc": 2, "kernel": "6.1", "cpu": "Some CPU"}
FIGURES = 57  # as many as a full record holds today
NOISE = 0.03  # lognormal sigma of one round: 3%
PAIRS = 200


def figure(name: str, values: list[float], better: str = "higher", busy: bool = False) -> Figure:
    s = Samples(name, "ratio", better)
    for v in values:
        s.add(v, 1.0 if busy else 0.0)
    return Figure.of(s, threshold=0.5)


def rec(figures: list[Figure], commit: str = "abc1234") -> Record:
    return Record(commit, "2026-01-01T00:00:00+00:00", dict(MACHINE), 0.2, 0.3, figures)


def drawn(rng: np.random.Generator, rounds: int = 5, shift: dict[int, float] | None = None) -> Record:
    """FIGURES figures of `rounds` rounds each, every one lognormal around its own level (1 + i/10), figure i
    scaled by shift[i]."""
    shift = shift or {}
    figs = []
    for i in range(FIGURES):
        level = (1 + i / 10) * shift.get(i, 1.0)
        figs.append(figure(f"f{i}", [float(v) for v in level * rng.lognormal(0.0, NOISE, rounds)]))
    return rec(figs)


def test_identical_records_name_under_half_a_figure_on_average() -> None:
    """200 pairs of records drawn from one distribution: the rule's bound, FALSE_ALARMS figures a comparison
    on average, holds. With this seed 0.405 figures a pair are named (0.37 over 2,000 pairs of another seed),
    0.475 pass the test alone: its expectation is 57 x 2/252 = 0.45, and the A/A bar removes a fifth."""
    rng = np.random.default_rng(20261203)
    named = passed_test = 0
    for _ in range(PAIRS):
        moves = compare.compare(drawn(rng), drawn(rng))
        assert {m.verdict for m in moves} <= {compare.UNCHANGED, compare.BETTER, compare.WORSE}
        named += len(compare.moved(moves))
        passed_test += sum(1 for m in moves if m.p is not None and m.alpha is not None and m.p <= m.alpha)
    # Per pair, the count is about Poisson with mean <= 0.45 (the test alone): over 200 pairs the mean's
    # standard error is ~0.05, so 0.5 stands several of them above what the A/A bar lets through.
    assert named / PAIRS <= compare.FALSE_ALARMS, (named, passed_test)
    assert passed_test / PAIRS <= 0.6


def test_the_old_rule_would_have_named_several() -> None:
    """The same kind of pairs with 3 rounds: the min-max rule named about one figure in ten; the new rule says
    too few rounds for every one, and names none."""
    rng = np.random.default_rng(7)
    old_rule = 0
    for _ in range(20):
        a, b = drawn(rng, rounds=3), drawn(rng, rounds=3)
        old_rule += sum(1 for x, y in zip(a.figures, b.figures, strict=True) if x.hi < y.lo or y.hi < x.lo)
        moves = compare.compare(a, b)
        assert {m.verdict for m in moves} == {compare.FEW} and not compare.moved(moves)
    assert old_rule / 20 > 2  # ~0.1 of 57 figures a pair


@pytest.mark.parametrize(("better", "verdict"), [("higher", compare.BETTER), ("lower", compare.WORSE)])
def test_a_15_percent_shift_is_found(better: str, verdict: str) -> None:
    """One figure 15% higher in the new record, 3% noise, 5 rounds: found in nearly every pair (99 of 100
    with this seed), named by its direction, with its evidence."""
    rng = np.random.default_rng(11)
    found = 0
    for _ in range(100):
        old, new = drawn(rng), drawn(rng, shift={3: 1.15})
        old.figures[3] = figure("f3", list(old.figures[3].values), better)
        new.figures[3] = figure("f3", list(new.figures[3].values), better)
        m = compare.compare(old, new)[3]
        found += m.verdict == verdict
        if m.verdict == verdict:
            assert m.ratio is not None and m.ratio > 1.0 and "beyond A/A" in m.why
    assert found >= 90


def test_a_busy_figure_is_busy_not_moved() -> None:
    low, high = [1.0, 1.01, 0.99, 1.02, 0.98], [2.0, 2.02, 1.98, 2.04, 1.96]  # doubled, nothing overlapping
    assert compare.compare(rec([figure("x", low)]), rec([figure("x", high)]))[0].verdict == compare.BETTER
    for old_busy, new_busy, which in ((True, False, "old"), (False, True, "new"), (True, True, "old and new")):
        moves = compare.compare(rec([figure("x", low, busy=old_busy)]), rec([figure("x", high, busy=new_busy)]))
        assert [(m.verdict, m.why) for m in moves] == [(compare.BUSY, which)]
        assert compare.moved(moves) == []


def test_busy_figures_are_left_out_of_the_family() -> None:
    """Alpha is FALSE_ALARMS over the figures tested: busy ones are not tested, so they do not dilute it."""
    quiet = [figure(f"q{i}", [1.0, 1.1, 1.2, 1.3, 1.4]) for i in range(2)]
    busy = [figure(f"b{i}", [1.0, 1.1, 1.2, 1.3, 1.4], busy=True) for i in range(50)]
    moves = compare.compare(rec(quiet + busy), rec(quiet + busy))
    assert {m.alpha for m in moves if m.verdict == compare.UNCHANGED} == {compare.FALSE_ALARMS / 2}


def test_a_shift_within_the_a_a_spread_is_not_moved() -> None:
    """Every new round above every old one (p = 2/252, below alpha) but the medians 5% apart while the old
    record's rounds spread ±6.5%: unchanged."""
    old, new = [0.90, 0.95, 1.00, 1.01, 1.02], [1.03, 1.04, 1.05, 1.10, 1.15]
    (m,) = compare.compare(rec([figure("x", old)]), rec([figure("x", new)]))
    assert m.p is not None and m.alpha is not None and m.p == pytest.approx(2 / 252) and m.p <= m.alpha
    assert m.ratio == pytest.approx(1.05) and m.bar == pytest.approx(math.sqrt(1.02 / 0.90) - 1)
    assert m.verdict == compare.UNCHANGED and "within A/A" in m.why
    # The same rounds 20% apart clear it.
    (m,) = compare.compare(rec([figure("x", old)]), rec([figure("x", [v * 1.2 for v in old])]))
    assert m.verdict == compare.BETTER


def test_three_rounds_cannot_be_tested() -> None:
    (m,) = compare.compare(rec([figure("x", [1.0, 1.01, 1.02])]), rec([figure("x", [2.0, 2.01, 2.02])]))
    assert (m.verdict, m.why) == (compare.FEW, "3 vs 3")


def test_five_rounds_are_too_few_when_the_family_is_too_big() -> None:
    """70 figures: alpha 0.5/70 = 0.0071 is below 2/252, the best 5 + 5 rounds can do, so the test could never
    speak; 6 rounds (best p 2/924) can."""
    five = [figure(f"f{i}", [1.0, 1.1, 1.2, 1.3, 1.4]) for i in range(70)]
    moves = compare.compare(rec(five), rec(five))
    assert {m.verdict for m in moves} == {compare.FEW} and "0.0079 > 0.0071" in moves[0].why
    six = [figure(f"f{i}", [1.0, 1.1, 1.2, 1.3, 1.4, 1.5]) for i in range(70)]
    assert {m.verdict for m in compare.compare(rec(six), rec(six))} == {compare.UNCHANGED}


def test_permutation_p_is_exact() -> None:
    assert compare.permutation_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(2 / 252)
    assert compare.permutation_p([6, 7, 8, 9, 10], [1, 2, 3, 4, 5]) == pytest.approx(2 / 252)
    assert compare.permutation_p([2.0] * 5, [2.0] * 5) == 1.0
    assert compare.permutation_p([1, 2, 3], [4, 5, 6]) == pytest.approx(2 / 20)
    # Against scipy's exact permutation test of the same statistic (equal groups: its null is symmetric, so
    # its doubled one-sided p is the two-sided one here).
    rng = np.random.default_rng(3)
    for _ in range(5):
        a, b = rng.lognormal(0, 0.1, 5), rng.lognormal(0.05, 0.1, 5)
        ref = sps.permutation_test(
            (np.log(a), np.log(b)),
            lambda x, y: np.mean(y) - np.mean(x),
            permutation_type="independent",
            n_resamples=math.inf,
        )
        assert compare.permutation_p(list(a), list(b)) == pytest.approx(ref.pvalue)
    assert compare.smallest_p(5, 5) == pytest.approx(2 / 252) and compare.smallest_p(3, 3) == pytest.approx(0.1)


def test_aa_spread_is_half_the_log_range() -> None:
    assert aa_spread_of([1.0]) == 0.0
    assert aa_spread_of([0.5, 1.0, 2.0]) == pytest.approx(1.0)  # x0.5 to x2: ±x2, "100%"
    assert aa_spread_of([1.0, 1.21, 1.1]) == pytest.approx(0.1)
    with pytest.raises(ValueError):
        aa_spread_of([])


OLD_LINE = json.dumps(
    {
        "commit": "e12d758",
        "date": "2026-12-02T15:40:21+00:00",
        "machine": MACHINE,
        "load_before": 0.5,
        "load_after": 1.9,
        "mode": "full",
        "figures": [
            {"name": n, "unit": "ratio", "better": "higher", "median": 1.0, "lo": 0.9, "hi": 1.1, "rounds": 3,
             "busy": busy, "note": ""}
            for n, busy in (("x", False), ("y", True))
        ],
    }
)


def test_old_records_load_and_are_not_comparable(tmp_path: Path) -> None:
    """A record written before rounds were kept: its figures load with no rounds and no A/A spread, and are
    "not comparable (no rounds kept)" against any record (the old min-max rule is not applied to them), busy
    ones "busy"."""
    path = tmp_path / "history.jsonl"
    path.write_text(OLD_LINE + "\n")
    (old,) = read(path)
    assert [(f.values, f.aa_spread) for f in old.figures] == [((), None), ((), None)]
    far = [5.0, 5.1, 5.2, 5.3, 5.4]
    new = rec([figure("x", far), figure("y", far)])
    assert [m.verdict for m in compare.compare(old, new)] == [compare.NO_ROUNDS, compare.BUSY]
    assert [m.verdict for m in compare.compare(new, old)] == [compare.NO_ROUNDS, compare.BUSY]
    append(path, new)
    assert read(path) == [old, new]


def test_a_record_refuses_a_non_finite_round() -> None:
    f = figure("x", [1.0, 1.1, 1.2])
    with pytest.raises(ValueError):
        check_finite([dataclasses.replace(f, values=(1.0, math.nan, 1.2))])


def history(path: Path) -> None:
    """Three records: two of one commit from one distribution, then one where f3 is 15% higher."""
    rng = np.random.default_rng(5)
    for commit, shift in (("aaaa111", {}), ("aaaa111", {}), ("bbbb222", {3: 1.15})):
        r = drawn(rng, shift=shift)
        append(path, Record(commit, r.date, r.machine, r.load_before, r.load_after, r.figures))


def test_select_takes_an_index_or_a_unique_commit_prefix(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    history(path)
    hist = read(path)
    assert command.select(hist, "-1") is hist[2] and command.select(hist, "0") is hist[0]
    assert command.select(hist, "bbbb") is hist[2] and command.select(hist, "bbbb222") is hist[2]
    bad_keys = (("aaaa", "names 2 records"), ("cccc", "names 0"), ("3", "outside"), ("-4", "outside"), ("bb", "4 or more"))
    for bad, says in bad_keys:
        with pytest.raises(LookupError, match=says):
            command.select(hist, bad)


def test_compare_on_the_command_line(tmp_path: Path) -> None:
    """`xferbench bench --compare -2 -1`: the table make bench ends with, measuring nothing; f3 moved."""
    path = tmp_path / "history.jsonl"
    history(path)
    argv = [sys.executable, "-m", "xferbench", "bench", "--compare", "-2", "-1", "--history", str(path)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {r.split("│")[1].strip(): r for r in done.stdout.splitlines() if r.startswith("│")}
    assert set(rows) == {f"f{i}" for i in range(FIGURES)}
    assert "better" in rows["f3"] and "vs aaaa111" in done.stdout
    assert len(path.read_text().splitlines()) == 3  # nothing appended
    argv[5:7] = ["aaaa", "bbbb"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "names 2 records" in done.stdout
