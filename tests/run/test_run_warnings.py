"""The warnings a finished run carries, and how a report shows a saturated load generator: above 0.9 cores
the figures may describe Locust, so the run says so and a closed loop ranks by the server's own cost."""

from __future__ import annotations

import html
import json
import tomllib
from pathlib import Path

import pytest

from xferbench import config as xe
from xferbench.analysis import metrics
from xferbench.analysis.row import RunRow
from xferbench.report import artifacts, tables
from xferbench.run import lifecycle

CLOSED = """
[load]
mode = "closed"
[[servers]]
server = "xferd-go"
"""
OPEN = """
[load]
rate = "100"
[[servers]]
server = "xferd-c"
[servers.flags]
alloc = "jemalloc"
"""


def cell(text: str) -> xe.Cell:
    return xe.parse(tomllib.loads(text), "t.toml", "t").cells[0]


def measured(**figs: float | None) -> RunRow:
    row = RunRow("c", "xferd-go", "frame", server_qps=100.0)
    row.set_figures(figs)
    return row


@pytest.mark.parametrize("cores", [0.95, 1.7])
def test_a_saturated_generator_is_a_warning_with_its_unit(cores: float) -> None:
    (w,) = [w for w in lifecycle.warnings(measured(gen_cpu_cores=cores), cell(CLOSED)) if "saturated" in w]
    assert w.startswith(f"load generator saturated: {cores:.2f} cores (> {metrics.GEN_SATURATED_CORES:g} cores)")


@pytest.mark.parametrize("cores", [None, 0.2, metrics.GEN_SATURATED_CORES])
def test_below_the_line_there_is_no_saturation_warning(cores: float | None) -> None:
    assert not [w for w in lifecycle.warnings(measured(gen_cpu_cores=cores), cell(CLOSED)) if "saturated" in w]


def test_an_open_loop_served_less_than_offered_and_a_wrong_allocator_are_named() -> None:
    row = measured(client_qps=90.0)
    row.build_info = {"allocator": "glibc"}
    w = lifecycle.warnings(row, cell(OPEN))
    assert any(x.startswith("offered 100 req/s but 90.0 were served") for x in w), w
    assert "asked for allocator jemalloc, the server reports glibc" in w
    assert not lifecycle.warnings(measured(client_qps=96.0), cell(OPEN))  # within 95%: served


def test_the_report_ranks_a_saturated_closed_loop_by_server_cost_and_lists_the_warning(tmp_path: Path) -> None:
    c = cell(CLOSED)
    meta = {"experiment": "sat", "cells": ["a", "b"], "baseline": "a", "cell_configs": dict.fromkeys("ab", c.config())}
    (tmp_path / "experiment.json").write_text(json.dumps(meta))
    rows = []
    for name, gen in (("a", 0.95), ("b", 0.5)):
        row = measured(gen_cpu_cores=gen, client_qps=1000.0, server_cpu_per_request_s=1e-4)
        row.cell = name
        row.warnings = lifecycle.warnings(row, c)
        rows.append(json.dumps(row.to_json()) + "\n")
    (tmp_path / "runs.jsonl").write_text("".join(rows))
    s = artifacts.write_all(tmp_path)
    assert s.rank_metric == "server_cpu_per_request_s"
    header = dict(tables.header(s))
    assert "closed loop with the load generator saturated in 1 run: " in header["Ranked by"]
    want = "load generator saturated: 0.95 cores (> 0.9 cores)"
    md = (tmp_path / "summary.md").read_text()
    assert any(line.startswith(f"- `a`: {want}") for line in md.split("## Failures and warnings")[1].splitlines())
    assert not any(line.startswith("- `b`: load generator") for line in md.splitlines())
    assert f"<code>a</code> warning: {html.escape(want)}" in (tmp_path / "report.html").read_text()
