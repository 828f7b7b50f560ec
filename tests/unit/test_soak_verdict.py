"""The soak's verdict and report line (xferbench/soak.py, xferbench/report/soak.py) on hand-made rows,
and the [soak] table of an experiment file."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from xferbench import experiment as xe
from xferbench import soak
from xferbench.report import soak as report_soak
from xferbench.report import summary, tables
from xferbench.row import RunRow

GOAL = xe.Soak(growth_max=0.05, held_slack=2)
GO: dict[str, Any] = {
    "soak_from_s": 120.0, "soak_window_s": 480.0, "soak_rss_growth": 0.012, "soak_heap_growth": -0.004,
    "soak_fds_start": 10, "soak_fds_end": 11, "soak_threads_start": 6, "soak_threads_end": 9,
    "soak_goroutines_start": 11, "soak_goroutines_end": 11,
}
C: dict[str, Any] = {**GO, "soak_goroutines_start": None, "soak_goroutines_end": None,
                     "soak_threads_start": 7, "soak_threads_end": 7, "soak_heap_growth": None}


def row(cell: str, server: str, **fields: Any) -> RunRow:
    """A runs.jsonl row of a soak run, read back as the reports read it."""
    return RunRow.from_json({"cell": cell, "server": server, "transport": "frame", **fields})


GO_ROW = row("a", "xferd-go", **GO)
C_ROW = row("b", "xferd-c", **C)


def test_within_the_goal_is_ok_and_go_threads_do_not_count() -> None:
    # Go's runtime keeps the threads a load started: 6 → 9 is not a leak where goroutines are back.
    assert soak.verdict(GO_ROW, GOAL) == (soak.OK, [])
    assert soak.verdict(C_ROW, GOAL) == (soak.OK, [])


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"soak_rss_growth": 0.08}, "RSS grew +8.0%"),
        ({"soak_heap_growth": 0.051}, "live heap grew +5.1%"),
        ({"soak_fds_end": 13}, "fds 10->13"),
        ({"soak_goroutines_end": 14}, "goroutines 11->14"),
    ],
)
def test_over_the_goal_is_a_leak_with_its_reason(change: dict[str, Any], needle: str) -> None:
    verdict, flags = soak.verdict(row("a", "xferd-go", **{**GO, **change}), GOAL)
    assert verdict == soak.LEAK and any(needle in f for f in flags), flags


def test_c_threads_that_stay_are_a_leak() -> None:
    verdict, flags = soak.verdict(row("b", "xferd-c", **{**C, "soak_threads_end": 10}), GOAL)
    assert verdict == soak.LEAK and flags == ["threads 7->10 after the load (allowed +2)"]


def test_no_growth_figure_is_not_ok() -> None:
    assert soak.verdict(row("b", "xferd-c", **{**C, "soak_rss_growth": None}), GOAL)[0] == soak.NA


def test_held_within_slack() -> None:
    start = soak.Held(fds=10, threads=6, goroutines=11)
    assert soak.Held(12, 40, 13).within(start, 2)  # Go: threads ignored
    assert not soak.Held(13, 6, 11).within(start, 2)
    assert not soak.Held(10, 6, 14).within(start, 2)
    c_start = soak.Held(11, 7, None)
    assert not soak.Held(11, 10, None).within(c_start, 2)


def test_report_line() -> None:
    assert report_soak.text(GO_ROW) == "RSS +1.2% (120 s → 600 s), live heap -0.4%, fds 10→11, goroutines 11→11"
    assert report_soak.text(C_ROW) == "RSS +1.2% (120 s → 600 s), live heap n/a, fds 10→11, threads 7→7"


def test_a_soak_report_ranks_nothing_and_lists_each_run() -> None:
    meta = {"experiment": "s", "cells": ["a", "b"], "baseline": "a", "soak": {"growth_max": 0.05, "held_slack": 2},
            "warmup_s": 120, "cell_configs": {n: {"load": {"mode": "open"}} for n in "ab"}}
    rows = [
        row("b", "xferd-c", server_cpu_per_request_s=1e-3, **C, soak_verdict=soak.OK, soak_flags=[]),
        row("a", "xferd-go", server_cpu_per_request_s=2e-3, **{**GO, "soak_rss_growth": 0.3},
            soak_verdict=soak.LEAK, soak_flags=["RSS grew +30.0% (goal <= 5%)"]),
    ]
    s = summary.summarize(meta, rows)
    assert s.verdicts == [] and [c.name for c in s.ranked()] == ["a", "b"]  # the experiment's order, not cost
    assert [label for label, _ in tables.header(s)] == ["Soak", "Pinning"]
    md = tables.markdown(s)
    assert "## Verdicts" not in md and "Ranking by" not in md
    assert "- `a`: RSS +30.0% (120 s → 600 s)" in md and "**LEAK?** (RSS grew +30.0% (goal <= 5%))" in md
    assert "- `b`: RSS +1.2%" in md and md.index("- `a`") < md.index("- `b`")


def parse(text: str) -> xe.Experiment:
    return xe.parse(tomllib.loads(text), "t.toml", "t")


BASE = """
[load]
rate = "10"
[[servers]]
server = "xferd-go"
[servers.flags]
pool = ["on", "off"]
"""


def test_soak_table_parses_and_turns_duets_off() -> None:
    assert parse(BASE).soak is None
    e = parse("[soak]\ngrowth_max = 0.1\n" + BASE)
    assert e.soak == xe.Soak(0.1, 2) and not e.duet
    assert parse("[soak]\n" + BASE).soak == GOAL


@pytest.mark.parametrize(
    ("table", "needle"),
    [("growth_max = 0", "soak.growth_max = 0"), ("held_slack = -1", "soak.held_slack = -1"),
     ("growth = 1", "soak.growth: unknown key")],
)
def test_soak_table_refuses_bad_values(table: str, needle: str) -> None:
    with pytest.raises(xe.ExperimentError, match=needle):
        parse(f"[soak]\n{table}\n" + BASE)
