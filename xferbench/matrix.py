"""The order cells run in: repeats interleaved (A B C A B C …) so that drift of a shared machine spreads
over every cell instead of landing on whichever ran last."""

from __future__ import annotations

from dataclasses import dataclass

from xferbench.experiment import Cell, Experiment


@dataclass(frozen=True)
class Run:
    order: int  # 0-based position in the sweep
    repeat: int  # 1-based repeat number of this cell
    cell: Cell


def schedule(exp: Experiment) -> list[Run]:
    runs: list[Run] = []
    for r in range(1, exp.repeats + 1):
        for cell in exp.cells:
            runs.append(Run(len(runs), r, cell))
    return runs
