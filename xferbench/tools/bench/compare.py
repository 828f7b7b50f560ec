"""What moved between two records: a figure moved when its two spreads (min-max over rounds) do not overlap;
which way is better is known per figure."""

from __future__ import annotations

from dataclasses import dataclass

from xferbench.tools.bench.record import Figure, Record

BETTER, WORSE, UNCHANGED = "better", "worse", "unchanged"


@dataclass(frozen=True)
class Move:
    name: str
    verdict: str  # better | worse | unchanged | new
    old: Figure | None
    new: Figure


def judge(old: Figure, new: Figure) -> str:
    """better / worse when the intervals are disjoint, by the figure's direction; unchanged when they touch."""
    if new.lo > old.hi:
        up = True
    elif new.hi < old.lo:
        up = False
    else:
        return UNCHANGED
    return BETTER if up == (new.better == "higher") else WORSE


def compare(old: Record | None, new: Record) -> list[Move]:
    """One move per figure of `new`, in its order; a figure the old record lacks is "new"."""
    out = []
    for f in new.figures:
        o = old.figure(f.name) if old is not None else None
        out.append(Move(f.name, "new" if o is None else judge(o, f), o, f))
    return out


def moved(moves: list[Move]) -> list[Move]:
    return [m for m in moves if m.verdict in (BETTER, WORSE)]
