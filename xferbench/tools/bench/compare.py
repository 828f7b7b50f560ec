"""What moved between two records, and on what evidence. A figure moved only when both hold:

- an exact two-sided permutation test over its rounds says the two records differ: the statistic is the
  difference of the mean log round (figures are ratios, so x2 and x0.5 are the same distance), the p-value
  the share of all the ways of splitting the pooled rounds into two groups of the records' sizes whose
  statistic is at least as far from 0 (5 + 5 rounds: 252 splits). No distribution is assumed, only that with
  nothing changed the rounds of both records are exchangeable;
- the effect, the ratio of the two medians, is larger than the figure's own A/A spread in both records (the
  larger of the two, record.aa_spread_of): a difference the test can see but smaller than what the figure's
  rounds already stray within one sitting is not worth a name.

The family: every figure tested in one comparison is one more chance to name noise, so each is tested at
alpha = FALSE_ALARMS / (figures tested). By linearity of expectation, two records with nothing changed then
name at most FALSE_ALARMS figures on average, whatever the figures' correlation (the per-family error rate
that Bonferroni's correction bounds; Holm's procedure, which bounds the chance of any false alarm instead,
would gain power only once one figure has already moved, and the bench's question is "how many of these are
noise?"). With 57 figures alpha is 0.0088: of 5 + 5 rounds only the two complete separations (all of one
record's rounds above all of the other's, p = 2/252 = 0.0079) reach it, so 57 x 2/252 = 0.45 figures pass the
test by chance, and the A/A bar leaves 0.37 of them (2,000 synthetic pairs of 57 figures with 3% noise,
tests/tools/test_bench_compare.py). With that noise a shift of 15% is found in 98 pairs of 100, 10% in 85,
5% in 20. Beyond 63 figures alpha falls below 2/252 and 5 rounds become too few: 6 (p down to 2/924) are
then needed.

What is not tested is said so, not guessed: a figure measured while others used the CPU (busy) in either
record is "busy"; a figure without its rounds in either record (records written before rounds were kept,
and the `run` rows, whose spread is a CI from `xferbench run`) is "not comparable (no rounds kept)"; fewer
than MIN_ROUNDS rounds in either record, or too few for the exact test to reach alpha at all (3 + 3 rounds
cannot go below p = 2/20 = 0.1), is "too few rounds". Which way is better is known per figure."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from xferbench.tools.bench.record import Figure, Record, aa_spread_of

BETTER, WORSE, UNCHANGED, NEW = "better", "worse", "unchanged", "new"
BUSY = "busy"
FEW = "too few rounds"
NO_ROUNDS = "not comparable (no rounds kept)"
# Below 5 rounds a side, the exact test's smallest p (3 + 3: 0.1, 4 + 4: 0.029) is far above any alpha that
# keeps ~57 figures' false alarms under one.
MIN_ROUNDS = 5
# Figures two records with nothing changed may name by chance, on average, per comparison.
FALSE_ALARMS = 0.5
# Splits whose statistic equals the observed one up to rounding count as "at least as far": the mirror split
# of equal groups sums the same logs in another order.
REL_TOL = 1e-9


@dataclass(frozen=True)
class Move:
    name: str
    verdict: str  # better | worse | unchanged | new | busy | too few rounds | not comparable (no rounds kept)
    old: Figure | None
    new: Figure
    why: str = ""  # the evidence behind the verdict, in a few words for the table
    ratio: float | None = None  # the new median / the old one
    p: float | None = None  # the permutation test's two-sided p
    alpha: float | None = None  # the level it was held to
    bar: float | None = None  # the larger A/A spread of the two records, as a fraction


def mean_log_diff(a: Sequence[float], b: Sequence[float]) -> float:
    """Mean log of b minus mean log of a."""
    return statistics.fmean(math.log(v) for v in b) - statistics.fmean(math.log(v) for v in a)


def permutation_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Exact two-sided p of the difference of mean logs between a and b, over every split of the pooled
    values into groups of len(a) and len(b)."""
    logs = [math.log(v) for v in (*a, *b)]
    n, total = len(a), math.fsum(logs)

    def stat(sum_a: float) -> float:  # mean of the other group minus mean of this one
        return (total - sum_a) / (len(logs) - n) - sum_a / n

    observed = abs(stat(math.fsum(logs[:n])))
    floor = observed - REL_TOL * max(observed, 1e-300)
    hits = splits = 0
    for idx in itertools.combinations(range(len(logs)), n):
        splits += 1
        hits += abs(stat(math.fsum(logs[i] for i in idx))) >= floor
    return hits / splits


def smallest_p(n_a: int, n_b: int) -> float:
    """The smallest p the exact test can give: the observed split alone, or it and its mirror when the
    groups are the same size."""
    return (2 if n_a == n_b else 1) / math.comb(n_a + n_b, n_a)


def aa(f: Figure) -> float:
    return f.aa_spread if f.aa_spread is not None else aa_spread_of(f.values)


def untestable(old: Figure, new: Figure) -> str | None:
    """Why the two cannot be tested, or None when they can."""
    if old.busy or new.busy:
        return BUSY
    if not old.values or not new.values:
        return NO_ROUNDS
    if min(len(old.values), len(new.values)) < MIN_ROUNDS:
        return FEW
    return None


def reason(verdict: str, old: Figure, new: Figure) -> str:
    """Which record made an untestable pair so, in a word or two."""
    if verdict == BUSY:
        return " and ".join(w for w, f in (("old", old), ("new", new)) if f.busy)
    if verdict == NO_ROUNDS:
        return ""
    return f"{len(old.values)} vs {len(new.values)}"


def judge(old: Figure, new: Figure, alpha: float) -> Move:
    """The verdict on a testable pair at level alpha, with its evidence."""
    n_a, n_b = len(old.values), len(new.values)
    if smallest_p(n_a, n_b) > alpha:
        why = f"{n_a} vs {n_b}: p >= {smallest_p(n_a, n_b):.4f} > {alpha:.4f}"
        return Move(new.name, FEW, old, new, why, alpha=alpha)
    p = permutation_p(old.values, new.values)
    ratio, bar = new.median / old.median, max(aa(old), aa(new))
    verdict, why = evidence(ratio, p, alpha, bar, mean_log_diff(old.values, new.values))
    if verdict != UNCHANGED:
        verdict = BETTER if (verdict == "up") == (new.better == "higher") else WORSE
    return Move(new.name, verdict, old, new, why, ratio, p, alpha, bar)


def evidence(ratio: float, p: float, alpha: float, bar: float, log_diff: float) -> tuple[str, str]:
    """Whether the median went "up" or "down", or UNCHANGED, and why in a few words."""
    shown = f"x{ratio:.3f}"
    if p > alpha:
        return UNCHANGED, f"{shown}, p {p:.3f}"
    if abs(math.log(ratio)) <= math.log1p(bar):
        return UNCHANGED, f"{shown} within A/A ±{bar:.1%}, p {p:.4f}"
    # The medians and the means of the logs could disagree on the direction: then the change has none.
    if (ratio > 1) != (log_diff > 0):
        return UNCHANGED, f"{shown} against the rounds' mean, p {p:.4f}"
    return ("up" if ratio > 1 else "down"), f"{shown}, p {p:.4f} <= {alpha:.4f}, beyond A/A ±{bar:.1%}"


def compare(old: Record | None, new: Record) -> list[Move]:
    """One move per figure of `new`, in its order; a figure the old record lacks is "new". The figures that
    can be tested are one family, each held to FALSE_ALARMS / their number."""
    pairs = [(f, old.figure(f.name) if old is not None else None) for f in new.figures]
    tested = sum(1 for f, o in pairs if o is not None and untestable(o, f) is None)
    alpha = FALSE_ALARMS / max(tested, 1)
    out = []
    for f, o in pairs:
        if o is None:
            out.append(Move(f.name, NEW, None, f))
        elif (why := untestable(o, f)) is not None:
            out.append(Move(f.name, why, o, f, reason(why, o, f)))
        else:
            out.append(judge(o, f, alpha))
    return out


def moved(moves: list[Move]) -> list[Move]:
    return [m for m in moves if m.verdict in (BETTER, WORSE)]
