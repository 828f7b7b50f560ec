"""Run-directory artifacts: summary.csv, summary.md, report.html (runs.jsonl and timeseries/ are written by
the runner as it goes)."""

from __future__ import annotations

from pathlib import Path

from xferbench.analysis.summary import Summary, load
from xferbench.report import html, stress, tables


def write_all(run_dir: Path) -> Summary:
    s = load(run_dir)
    tables.write_csv(s, run_dir / "summary.csv")
    (run_dir / "summary.md").write_text(tables.markdown(s), encoding="utf-8")
    html.write(s, run_dir, run_dir / "report.html")
    stress.write_chart(s, run_dir / stress.CHART_FILE)  # a stepped run's chart on its own page too
    return s
