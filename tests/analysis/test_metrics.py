"""The metric table (xferbench/analysis/metrics.py): every row is a RunRow figure, every numeric RunRow figure is a row
or deliberately not one, and a diagnostic figure never gets a verdict however much it differs."""

from __future__ import annotations

import csv
import typing
from pathlib import Path
from typing import Any

import pytest

from xferbench.analysis import stats, summary
from xferbench.analysis.metrics import BY_NAME, METRICS, RANKED, Metric
from xferbench.analysis.row import FIELD_NAMES, RunRow
from xferbench.analysis.runmeta import RunMeta
from xferbench.report import tables

# Numeric RunRow fields that are not summarised across repeats, and why. A new numeric field must be added to
# the metric table or here, so that no figure is measured and silently left out of the reports.
NOT_SUMMARISED: dict[str, str] = {
    **dict.fromkeys(("repeat", "order", "warmup_s", "duration_s"), "which run this is and how long it lasted"),
    **dict.fromkeys(("gen_cpu_cores_psutil", "gen_cpus_idle_cores", "gen_cpus_steal_cores"),
                    "the generator-saturation warning's inputs"),
    **dict.fromkeys(("client_upload_bytes_per_s", "client_download_bytes_per_s", "client_requests",
                     "client_failure_rate", "client_users", "server_bytes_per_s", "server_requests",
                     "heap_inuse_mean_bytes", "alloc_resident_peak_bytes"), "kept in runs.jsonl for the reader"),
    "server_errors": "the connections table shows its mean count per run, not a geometric mean",
    "cpu_selfreport_ratio": "a cross-check of the server's own CPU figure against its cgroup's, warned about per run",
    **dict.fromkeys(("ctr_mem_usage_bytes", "ctr_mem_failcnt", "ctr_oom_kills", "ctr_cpu_periods"),
                    "the container section's own (throttled share, OOM kills)"),
    **dict.fromkeys(("soak_from_s", "soak_window_s", "soak_rss_growth", "soak_heap_growth", "soak_fds_start",
                     "soak_fds_end", "soak_threads_start", "soak_threads_end", "soak_goroutines_start",
                     "soak_goroutines_end"), "a soak's own line per run, never compared"),
}


def _numeric_fields() -> set[str]:
    """RunRow fields typed as a number (float or int, optional or not; bool is not a figure)."""
    hints = typing.get_type_hints(RunRow)
    out = set()
    for name in FIELD_NAMES:
        args = set(typing.get_args(hints[name])) or {hints[name]}
        if args - {type(None)} and args - {type(None)} <= {float, int}:
            out.add(name)
    return out


def test_every_row_names_a_numeric_run_row_field_once() -> None:
    names = [m.name for m in METRICS]
    assert len(names) == len(set(names)), names
    assert set(names) <= _numeric_fields(), set(names) - _numeric_fields()


def test_every_numeric_run_row_figure_is_a_row_or_said_not_to_be() -> None:
    numeric = _numeric_fields()
    assert numeric - set(BY_NAME) - set(NOT_SUMMARISED) == set()
    assert set(NOT_SUMMARISED) <= numeric  # a renamed field does not linger here
    assert set(NOT_SUMMARISED).isdisjoint(BY_NAME)


def test_the_report_modules_only_name_figures_of_the_table() -> None:
    """The sections with their own columns (connections, containers) look their units up in the table."""
    from xferbench.report import conns, containers

    assert set(conns.COLUMNS[:-1]) <= set(BY_NAME)
    assert set(containers._FIGURES) <= set(BY_NAME)


def test_a_figure_with_a_verdict_needs_a_direction() -> None:
    with pytest.raises(ValueError, match="needs a better direction"):
        Metric("gen_cpu_cores", "generator CPU", "cores", "none", "ranked", "rate")
    assert Metric("gen_cpu_cores", "generator CPU", "cores", "none", "diagnostic", "rate").higher_is_better is None


def test_ranked_keeps_the_table_order() -> None:
    assert list(RANKED) == [m.name for m in METRICS if m.role == "ranked"]
    assert "server_cpu_per_request_s" in RANKED and "gen_cpu_cores" not in RANKED
    assert BY_NAME["gen_cpu_cores"].role == BY_NAME["runner_cpu_cores"].role == "diagnostic"


# --- a diagnostic never gets a verdict --------------------------------------------------------------------

DIAGNOSTICS = [m.name for m in METRICS if m.role == "diagnostic"]
CPU = [1.00e-4, 1.02e-4, 0.98e-4, 1.01e-4, 0.99e-4]  # the baseline's server CPU per request, per round
GEN = [0.20, 0.21, 0.19, 0.20, 0.20]  # ... and its generator's (and runner's) CPU
# Per cell and round: factors on the baseline's server cost and on its diagnostics. "b" costs 1.5x; the A/A copy
# costs the same, and both load the generator twice as much: a property of the instrument, not of the server.
CELLS: dict[str, tuple[list[float], list[float]]] = {
    "a": ([1.0] * 5, [1.0] * 5),
    "b": ([1.50, 1.49, 1.52, 1.51, 1.50], [2.00, 2.02, 1.98, 2.01, 1.99]),
    "a (A/A)": ([1.01, 0.99, 1.00, 1.02, 0.98], [2.00, 2.02, 1.98, 2.01, 1.99]),
}


def _rows() -> list[RunRow]:
    rows = []
    for r in range(5):
        for cell, (cost, gen) in CELLS.items():
            figs: dict[str, Any] = {"server_cpu_per_request_s": CPU[r] * cost[r]}
            figs.update({m: GEN[r] * gen[r] for m in DIAGNOSTICS})
            rows.append(RunRow(cell, "xferd-c", "frame", repeat=r + 1, pair=f"r{r + 1}", **figs))
    return rows


def _summary() -> summary.Summary:
    meta = RunMeta(experiment="x", baseline="a", cells=list(CELLS), aa_cell="a (A/A)",
                   cell_configs={n: {"load": {"mode": "open"}} for n in CELLS})
    return summary.summarize(meta, _rows())


def test_the_synthetic_diagnostics_would_be_called_worse_if_judged() -> None:
    """The data below is no easy case: tested as a figure with a direction, every diagnostic is 'worse'."""
    assert DIAGNOSTICS
    aa = [GEN[r] * CELLS["a (A/A)"][1][r] for r in range(5)]
    assert stats.compare(GEN, aa, higher_is_better=False, paired=True).verdict == stats.WORSE


def test_a_diagnostic_gets_its_ratio_and_never_a_verdict() -> None:
    s = _summary()
    assert {v.metric for v in s.verdicts}.isdisjoint(DIAGNOSTICS)
    by = {c.name: c for c in s.cells}
    for cell in ("b", "a (A/A)"):
        for m in DIAGNOSTICS:
            c = by[cell].vs_base[m]
            assert c.verdict == stats.DIAGNOSTIC and c.p is None, (cell, m, c)
            assert c.ratio == pytest.approx(2.0, rel=0.02) and c.has_ci  # still reported, with its interval
    # ... while the ranked figure that differs is judged, and the A/A copy's is not called different.
    (b_cost,) = [v for v in s.verdicts if v.cell == "b" and v.metric == "server_cpu_per_request_s"]
    assert b_cost.comparison.verdict == stats.WORSE
    (aa_cost,) = [v for v in s.verdicts if v.cell == "a (A/A)" and v.metric == "server_cpu_per_request_s"]
    assert aa_cost.comparison.verdict not in (stats.BETTER, stats.WORSE)


def test_no_report_calls_a_diagnostic_better_or_worse(tmp_path: Path) -> None:
    s = _summary()
    aa = tables.aa_text(s)
    assert aa is not None and "no significant difference" in aa and "generator CPU" not in aa
    tables.write_csv(s, tmp_path / "summary.csv")
    with open(tmp_path / "summary.csv", encoding="utf-8") as f:
        by = {line["cell"]: line for line in csv.DictReader(f)}
    for cell in ("b", "a (A/A)"):
        for m in DIAGNOSTICS:
            assert by[cell][f"{m}_verdict"] == stats.DIAGNOSTIC, (cell, m)
            assert f"{m}_p" not in by[cell]
        assert by[cell]["gen_cpu_cores_ratio"] != ""
    assert by["b"]["server_cpu_per_request_s_verdict"] == stats.WORSE
    verdict_lines = [ln for ln in tables.markdown(s).splitlines() if ln.startswith("| `")
                     and any(f"| {BY_NAME[m].title} |" in ln for m in [*DIAGNOSTICS, "server_cpu_per_request_s"])]
    assert verdict_lines and all(BY_NAME["server_cpu_per_request_s"].title in ln for ln in verdict_lines)
    assert any("**worse**" in ln for ln in verdict_lines)


def test_a_figure_without_a_direction_is_never_tested() -> None:
    """What `xferbench compare --metric gen_cpu_cores` gets: the ratio and interval, no p for Holm, no verdict."""
    c = stats.compare(GEN, [g * 3 for g in GEN], higher_is_better=None)
    assert c.verdict == stats.DIAGNOSTIC and c.p is None and c.ratio == pytest.approx(3.0)
    (d,) = stats.decide([c], [False], [0.01])
    assert d.verdict == stats.DIAGNOSTIC
