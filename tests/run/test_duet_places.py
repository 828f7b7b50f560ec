"""A duet's two places alternate between rounds: the baseline is first in odd rounds and second in even ones,
every round still pairs each cell with the baseline, and the sweep's order numbers stay 0, 1, 2, ..."""

from __future__ import annotations

import tomllib

from xferbench.config import parse
from xferbench.run.matrix import schedule

DUET = """
[experiment]
repeats = 4
duet = true
baseline = "c/frame/alloc=glibc"

[load]
transport = "frame"

[[servers]]
server = "xferd-c"
[servers.flags]
alloc = ["glibc", "jemalloc", "mimalloc"]
"""


def test_the_baseline_alternates_places_and_every_duet_pairs_with_it() -> None:
    exp = parse(tomllib.loads(DUET))
    runs = schedule(exp)
    assert [r.order for r in runs] == list(range(len(runs)))
    duets = [runs[k : k + 2] for k in range(0, len(runs), 2)]
    assert len(duets) == 4 * 2  # two non-baseline cells, four rounds
    for first, second in duets:
        assert first.repeat == second.repeat and first.pair == second.pair
        place = 0 if first.cell.name == exp.baseline else 1
        assert (first, second)[place].cell.name == exp.baseline
        assert (first, second)[1 - place].cell.name != exp.baseline
        assert place == (0 if first.repeat % 2 else 1), f"round {first.repeat}: the baseline in place {place}"
    for repeat in range(1, 5):
        partners = sorted(r.cell.name for r in runs if r.repeat == repeat and r.cell.name != exp.baseline)
        assert partners == ["c/frame/alloc=jemalloc", "c/frame/alloc=mimalloc"]
