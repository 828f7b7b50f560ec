"""`xferbench compare`'s table: two run directories cell by cell, as benchstat does. The command line loads the
runs and prints; this module pairs their cells, tests every pair on every metric as one Holm family and lays
out the table."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from rich.table import Table

from xferbench.analysis import runmeta, stats, summary
from xferbench.analysis.metrics import BY_NAME
from xferbench.analysis.summary import CellSummary, Summary
from xferbench.report import fmt

Pair = tuple[str, CellSummary, CellSummary]  # the row's cell name, A's cell, B's cell


class CompareError(ValueError):
    """Two runs whose figures are not compared."""


def check_comparable(sa: Summary, sb: Summary, a_dir: Path, b_dir: Path) -> None:
    if summary.profiled(sa.rows) != summary.profiled(sb.rows):
        which = a_dir if summary.profiled(sa.rows) else b_dir
        raise CompareError(
            f"{which} was profiled and the other run was not; profiling costs the server CPU, so "
            "their figures are not compared — rerun both with or both without --profile")


def paired_cells(sa: Summary, sb: Summary) -> list[Pair]:
    """The cells both runs hold, by name; two runs of one cell each pair whatever their names."""
    ca = {c.name: c for c in sa.cells}
    cb = {c.name: c for c in sb.cells}
    pairs = [(n, ca[n], cb[n]) for n in ca if n in cb]
    if pairs:
        return pairs
    if len(ca) == 1 and len(cb) == 1:
        (na, a1), (nb, b1) = next(iter(ca.items())), next(iter(cb.items()))
        return [(f"{na} → {nb}", a1, b1)]
    raise CompareError(f"no cell in common; A has {sorted(ca)}, B has {sorted(cb)}")


def _flatten(d: object, prefix: str = "") -> dict[str, object]:
    if not isinstance(d, dict):
        return {prefix: d}
    out: dict[str, object] = {}
    for k, v in d.items():
        out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def config_differences(a_dir: Path, b_dir: Path, pairs: list[Pair]) -> dict[str, list[str]]:
    """Fields of each paired cell's server and load configuration that differ between two runs: a ratio
    between runs of different loads is no measure of the server, so compare says so."""
    def configs(d: Path) -> dict[str, dict[str, Any]]:
        path = d / runmeta.FILE
        return runmeta.load(path).cell_configs if path.exists() else {}

    ca, cb = configs(a_dir), configs(b_dir)
    out: dict[str, list[str]] = {}
    for name, a, b in pairs:
        fa, fb = _flatten(ca.get(a.name, {})), _flatten(cb.get(b.name, {}))
        diffs = [f"{k} {fa.get(k)!r} → {fb.get(k)!r}" for k in sorted(fa.keys() | fb.keys()) if fa.get(k) != fb.get(k)]
        if diffs:
            out[name] = diffs
    return out


@dataclasses.dataclass
class Family:
    """The table's comparisons: one Holm family, each metric's noise floor pooled over its comparisons."""

    members: list[tuple[str, CellSummary, CellSummary, str]]  # a pair and the metric compared
    decided: list[stats.Comparison]
    floors: dict[str, float | None]


def family(pairs: list[Pair], metrics: list[str]) -> Family:
    # Two runs share no rounds, so every comparison is unpaired (Welch on the logs).
    members: list[tuple[str, CellSummary, CellSummary, str]] = []
    raw: list[stats.Comparison] = []
    for name, a, b in pairs:
        for m in metrics:
            va, vb = a.values.get(m, []), b.values.get(m, [])
            if not va and not vb:
                continue
            members.append((name, a, b, m))
            raw.append(stats.compare(va, vb, BY_NAME[m].higher_is_better))  # a diagnostic: no verdict
    floors = {m: stats.noise_floor([c for (*_, fm), c in zip(members, raw, strict=True) if fm == m]) for m in metrics}
    decided = stats.decide(
        raw, [BY_NAME[m].better == "higher" for *_, m in members], [floors[m] for *_, m in members], stats.ALPHA
    )
    return Family(members, decided, floors)


def table(f: Family, a_dir: Path, b_dir: Path) -> Table:
    tested = sum(1 for c in f.decided if c.p is not None)
    t = Table(
        title=f"B / A   (A = {a_dir.name}, B = {b_dir.name})",
        caption=(
            f"geometric means; Welch t-intervals on the logs (runs are not paired); p Holm-adjusted over {tested} "
            f"comparisons, verdicts at alpha = {stats.ALPHA:g} and beyond the noise floor"
        ),
    )
    t.add_column("cell", style="bold")
    t.add_column("metric")
    t.add_column("A", justify="right")
    t.add_column("B", justify="right")
    t.add_column("B / A [95% CI]", justify="right")
    t.add_column("floor", justify="right")
    t.add_column("p (Holm)", justify="right")
    t.add_column("verdict")
    for (name, a, b, m), c in zip(f.members, f.decided, strict=True):
        title, unit = BY_NAME[m].title, BY_NAME[m].unit
        ratio = "-" if c.ratio is None else f"{c.ratio:.3f}" + (f" [{c.lo:.3f}, {c.hi:.3f}]" if c.has_ci else "")
        style = {stats.BETTER: "green", stats.WORSE: "red"}.get(c.verdict, "dim")
        t.add_row(
            name,
            title,
            fmt.estimate(a.est[m], unit, False) + f" (n={c.n_a})",
            fmt.estimate(b.est[m], unit, False) + f" (n={c.n_b})",
            ratio,
            fmt.floor(c.floor if c.floor is not None else f.floors.get(m)),
            fmt.pvalue(c.p),
            f"[{style}]{c.verdict}[/]",
        )
    return t
