"""`[experiment] baseline`: the cell every other is judged against, or one per [[servers]] table.

One baseline suits a sweep of one workload. An experiment whose tables are different workloads (a handshake per
small call beside 8 MiB uploads, xferd-c beside xferd-go) has nothing to learn from judging one table's cells
against another's: the ratios only restate the workloads. A list names one cell of every table, and each cell is
judged against its own table's (experiments/tls.toml)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xferbench.config.model import Cell, ExperimentError


@dataclass(frozen=True)
class Baselines:
    first: str  # the baseline (one), or the first table's: what an A/A check copies
    of: dict[str, str]  # with a list, every cell's name → its table's baseline; empty with one baseline


def parse_baselines(value: Any, tables: list[list[Cell]], aliases: dict[str, str]) -> Baselines:
    """The `baseline` key (absent, a cell's name, or a list of one per table) against the cells of each table."""
    cells = [c for t in tables for c in t]
    if value is None:
        return Baselines(cells[0].name, {})
    if isinstance(value, str):
        return Baselines(_one(value, cells, aliases, "experiment.baseline"), {})
    if not isinstance(value, list) or not value:
        raise ExperimentError(
            f"experiment.baseline = {value!r}: expected a cell's name, or a list of one cell of each [[servers]] table"
        )
    names = [_one(v, cells, aliases, f"experiment.baseline[{i}]") for i, v in enumerate(value)]
    of: dict[str, str] = {}
    for ti, table in enumerate(tables):
        mine = [n for n in names if any(c.name == n for c in table)]
        if len(mine) != 1:
            found = f"names {len(mine)} of its cells ({', '.join(mine)})" if mine else "names none of its cells"
            raise ExperimentError(
                f"experiment.baseline: a list names one cell of every [[servers]] table, and it {found} for "
                f"servers[{ti}]: " + ", ".join(c.name for c in table)
            )
        of.update({c.name: mine[0] for c in table})
    return Baselines(of[cells[0].name], of)


def _one(value: Any, cells: list[Cell], aliases: dict[str, str], where: str) -> str:
    """A cell's name, or the name its checked values spell ("gomemlimit=25165824")."""
    names = {c.name for c in cells}
    if isinstance(value, str) and value not in names:
        value = aliases.get(value, value)
    if value not in names:
        raise ExperimentError(f"{where} = {value!r}: expected one of the cells: " + ", ".join(c.name for c in cells))
    return str(value)
