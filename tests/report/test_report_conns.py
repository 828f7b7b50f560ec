"""The report's Connections section: present for a run whose cells set [load] connections (or that
reconnected), absent otherwise, with the strategy and the figures the runner recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xferbench.analysis.row import RunRow
from xferbench.analysis.runmeta import RunMeta
from xferbench.analysis.summary import summarize
from xferbench.report import conns, html, tables


def _meta(load: dict[str, Any]) -> RunMeta:
    return RunMeta(experiment="x", cells=["A", "B"], baseline="A",
                   cell_configs={c: {"server": "xferd-go", "transport": "frame", "load": load} for c in "AB"})


def _rows(strategies: dict[str, str | None], time_wait: int = 0) -> list[RunRow]:
    rows = []
    for r in (1, 2, 3):
        for cell, strategy in strategies.items():
            row = RunRow(cell, "xferd-go", "frame", repeat=r, config={"load": {"connections": strategy}})
            row.set_figures({"client_qps": 100.0 + r, "client_p50_s": 0.001 * r, "client_p95_s": 0.002 * r,
                             "conns_accepted_per_s": 150.0 if strategy == "call" else 0.0,
                             "conns_opened_per_s": 150.0 if strategy == "call" else 0.0,
                             "reconnects_per_s": 0.0, "time_wait_peak": time_wait or (600 + r if strategy == "call" else 0),
                             "client_failures": 0.0, "server_errors": 0.0})
            rows.append(row)
    return rows


def test_section_with_the_strategies_and_figures() -> None:
    s = summarize(_meta({"connections": "user"}), _rows({"A": "user", "B": "call"}))
    text = tables.markdown(s)
    assert "## Connections" in text
    section = text[text.index("## Connections"):].splitlines()
    line = next(x for x in section if x.startswith("| `B`"))
    assert line.startswith("| `B` | call | ") and "| 150 [150 - 150] |" in line and "| 602 [" in line  # peaks 601..603
    assert next(x for x in section if x.startswith("| `A`")).startswith("| `A` | user | ")


def test_html_report_has_the_section(tmp_path: Path) -> None:
    s = summarize(_meta({"connections": "user"}), _rows({"A": "user", "B": "call"}))
    page = html.render(s, tmp_path)
    assert "<h2>Connections</h2>" in page and "<td class='l'>call</td>" in page


def test_no_section_without_strategies_or_churn() -> None:
    s = summarize(_meta({}), _rows({"A": None, "B": None}))
    assert not conns.shown(s)
    assert "## Connections" not in tables.markdown(s)
    s = summarize(_meta({}), _rows({"A": None, "B": None}, time_wait=12))
    assert conns.shown(s)  # sockets left in TIME_WAIT are connection figures worth a section
