"""With a baseline per [[servers]] table, every cell is compared with its own table's baseline, only within its
table are figures per request checked for like counts, the ranking keeps each table together, and every report
says what each configuration was judged against (xferbench/analysis/summary.py)."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from xferbench import progress
from xferbench.analysis import stats, summary
from xferbench.analysis.row import RunRow
from xferbench.analysis.runmeta import RunMeta
from xferbench.report import tables

# cell → (transport, chunk, CPU per request): Echo per call vs 1 MiB frame chunks, each table twice as dear on B
CELLS = {
    "echo/a": ("grpc", "64KiB", 100e-6),
    "echo/b": ("grpc", "64KiB", 200e-6),
    "bulk/a": ("frame", "1MiB", 2e-3),
    "bulk/b": ("frame", "1MiB", 4e-3),
}
BASES = {"echo/a": "echo/a", "echo/b": "echo/a", "bulk/a": "bulk/a", "bulk/b": "bulk/a"}
JITTER = (1.0, 1.03, 0.98, 1.01, 0.99)


def _rows() -> list[RunRow]:
    return [
        RunRow(name, "xferd-go", transport, repeat=r + 1, pair=f"r{r + 1}",
               server_cpu_per_request_s=cpu * (j if name.endswith("b") else 1 / j), server_p99_s=cpu * 3)
        for name, (transport, _, cpu) in CELLS.items()
        for r, j in enumerate(JITTER)
    ]


def _meta(baselines: dict[str, str] | None) -> RunMeta:
    configs: dict[str, dict[str, Any]] = {
        name: {"transport": t, "load": {"mode": "open", "transport": t, "chunk": chunk}}
        for name, (t, chunk, _) in CELLS.items()
    }
    return RunMeta(experiment="tables", baseline="echo/a", baselines=baselines, cells=list(CELLS), cell_configs=configs)


def test_each_cell_is_compared_with_its_own_tables_baseline() -> None:
    s = summary.summarize(_meta(BASES), _rows())
    assert s.baselines == ["echo/a", "bulk/a"]
    # per request is judged (each table counts alike), not per GiB as across transports
    assert s.rank_metric == "server_cpu_per_request_s"
    for name in ("echo/b", "bulk/b"):
        cmp_ = next(c for c in s.cells if c.name == name).vs_base["server_cpu_per_request_s"]
        assert cmp_.ratio is not None and 1.9 < cmp_.ratio < 2.1, cmp_
        assert cmp_.verdict == stats.WORSE, cmp_
    judged = {v.cell for v in s.verdicts}
    assert judged == {"echo/b", "bulk/b"}  # baselines are never judged
    assert [c.name for c in s.ranked()] == ["echo/a", "echo/b", "bulk/a", "bulk/b"]


def test_one_baseline_compares_across_tables_as_before() -> None:
    s = summary.summarize(_meta(None), _rows())
    assert s.baselines == ["echo/a"]
    # a gRPC call and a frame chunk counted alike? no: per request is not judged, per GiB would rank
    bulk = next(c for c in s.cells if c.name == "bulk/b")
    assert bulk.vs_base["server_cpu_per_request_s"].verdict == stats.UNLIKE


def test_reports_name_each_tables_baseline() -> None:
    s = summary.summarize(_meta(BASES), _rows())
    verdicts = dict(tables.header(s))["Verdicts"]
    assert "against its [[servers]] table's baseline (echo/a, bulk/a)" in verdicts, verdicts
    md = tables.markdown(s)
    assert "## Verdicts: each configuration vs its [[servers]] table's baseline (`echo/a`, `bulk/a`)" in md
    assert md.count("| baseline |") == 2, md  # both baselines marked in the ranking


def test_the_terminals_verdict_title_keeps_the_tables_brackets() -> None:
    console = Console(width=400, record=True, file=io.StringIO())
    console.print(progress.final_table(summary.summarize(_meta(BASES), _rows())))
    assert "vs its [[servers]] table's baseline (echo/a, bulk/a)" in console.export_text()
