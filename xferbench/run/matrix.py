"""The order runs happen in: rounds of every cell (A B C, A B C, ...), so that drift of a shared machine
spreads over every cell instead of landing on whichever ran last, and each round in its own shuffled
order, so that no cell always runs first or always follows the same neighbour (Abedi & Brecht, ICPE 2017).
The shuffle is seeded: the same experiment runs in the same order every time, and the seed is recorded.

In duet mode (`[experiment] duet = true`) a round is one duet per non-baseline cell: that cell and its
baseline (the experiment's, or its [[servers]] table's) run at the same time, under the same offered load, on
the same CPU sets, so whatever the machine does to one it does to the other (Bulej et al., "Duet
Benchmarking", 2020). Both runs of a duet carry the same `pair` key; the statistics pair each cell with the
baseline run of the same key. The baseline takes the duet's first place in odd rounds and the second in even
ones, so that what a place does to its run (started first or second, which ports) cancels out over pairs of
rounds instead of favouring one side.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from xferbench.config import Cell, Experiment

ORDER_SEED = 20261201


@dataclass(frozen=True)
class Run:
    order: int  # 0-based position in the sweep
    repeat: int  # 1-based repeat number of this cell (the round it belongs to)
    cell: Cell
    pair: str = ""  # what pairs this run with a baseline run: "r3", or "r3/<other cell>" in a duet


def round_units(exp: Experiment, repeat: int, first_order: int = 0, seed: int = ORDER_SEED) -> list[list[Run]]:
    """Round `repeat` as units that run one after the other: single runs, or duets of two runs at once.
    Every cell once (the baseline once per duet), in an order shuffled from the seed and the round."""
    rng = random.Random(seed * 1000 + repeat)
    order = first_order
    units: list[list[Run]] = []
    if not exp.duet:
        cells = list(exp.cells)
        rng.shuffle(cells)
        for c in cells:
            units.append([Run(order, repeat, c, f"r{repeat}")])
            order += 1
        return units
    others = [c for c in exp.cells if c.name not in exp.baseline_cells]
    rng.shuffle(others)
    for c in others:
        base = exp.cell(exp.baseline_of(c.name))
        pair = f"r{repeat}/{c.name}"
        # A duet's two places are not quite equal (the first starts first, its generator takes the first free
        # ports; an A/A duet's second-place generator used 6% more CPU), so they alternate between rounds.
        places = [base, c] if repeat % 2 else [c, base]
        units.append([Run(order + k, repeat, cell, pair) for k, cell in enumerate(places)])
        order += 2
    return units


def round_runs(exp: Experiment, repeat: int, first_order: int = 0, seed: int = ORDER_SEED) -> list[Run]:
    return [run for unit in round_units(exp, repeat, first_order, seed) for run in unit]


def schedule(exp: Experiment, seed: int = ORDER_SEED) -> list[Run]:
    runs: list[Run] = []
    for r in range(1, exp.repeats + 1):
        runs += round_runs(exp, r, len(runs), seed)
    return runs
