"""Per-cell summaries across repeats: medians with CIs, ratios to the baseline cell, verdicts."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xferbench import stats


@dataclass
class CellSummary:
    name: str
    server: str
    transport: str
    axes: dict[str, str]
    n_ok: int = 0
    n_failed: int = 0
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    est: dict[str, stats.Estimate] = field(default_factory=dict)
    vs_base: dict[str, stats.Comparison] = field(default_factory=dict)
    values: dict[str, list[float]] = field(default_factory=dict)


@dataclass
class Summary:
    meta: dict[str, Any]
    rows: list[dict[str, Any]]
    cells: list[CellSummary]
    baseline: str

    def ranked(self, metric: str = "client_qps") -> list[CellSummary]:
        higher = stats.METRIC_INFO[metric][3]

        def key(c: CellSummary) -> float:
            m = c.est.get(metric)
            if m is None or m.median is None:
                return float("inf")
            return -m.median if higher else m.median

        return sorted(self.cells, key=key)

    def present_metrics(self) -> list[str]:
        """Metrics with at least one value in some cell (a Go-only sweep has no allocator columns...)."""
        return [
            m for m, *_ in stats.METRICS if any(c.est.get(m) is not None and c.est[m].median is not None for c in self.cells)
        ]


def read_run(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    meta_path = run_dir / "experiment.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    rows = []
    with open(run_dir / "runs.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
    return meta, rows


def summarize(meta: dict[str, Any], rows: list[dict[str, Any]]) -> Summary:
    order: list[str] = list(meta.get("cells") or [])
    for r in rows:
        if r["cell"] not in order:
            order.append(r["cell"])
    cells: dict[str, CellSummary] = {}
    for name in order:
        first = next((r for r in rows if r["cell"] == name), None)
        if first is None:
            cfg = (meta.get("cell_configs") or {}).get(name, {})
            cells[name] = CellSummary(name, cfg.get("server", "?"), cfg.get("transport", "?"), {})
        else:
            cells[name] = CellSummary(name, first["server"], first["transport"], first.get("axes") or {})
    for r in rows:
        c = cells[r["cell"]]
        if r.get("status") == "ok":
            c.n_ok += 1
            for m, *_ in stats.METRICS:
                v = r.get(m)
                if v is not None:
                    c.values.setdefault(m, []).append(float(v))
        elif r.get("status") == "failed":
            c.n_failed += 1
            c.errors.append(f"r{r['repeat']}: {r.get('error')}")
        for w in r.get("warnings") or []:
            if w not in c.warnings:
                c.warnings.append(w)
    for c in cells.values():
        for m, *_ in stats.METRICS:
            c.est[m] = stats.estimate(c.values.get(m, []))
    baseline = meta.get("baseline") or (order[0] if order else "")
    if baseline not in cells and order:
        baseline = order[0]
    base = cells.get(baseline)
    if base is not None:
        for c in cells.values():
            for m, _, _, higher in stats.METRICS:
                c.vs_base[m] = stats.compare(base.values.get(m, []), c.values.get(m, []), higher)
    return Summary(meta, rows, list(cells.values()), baseline)


def load(run_dir: Path) -> Summary:
    meta, rows = read_run(run_dir)
    return summarize(meta, rows)
