"""The soak's verdict and report line (xferbench/measure/soak.py, xferbench/report/soak.py) on hand-made rows and on
synthetic series run through Watch.window (the verdict is taken on the line fitted through the last third of
the measured window: what settles after the warm-up and then stays flat is ok, what still grows at the end is
flagged), and the [soak] table of an experiment file."""

from __future__ import annotations

import math
import random
import tomllib
from collections.abc import Callable
from typing import Any

import pytest

from xferbench import config as xe
from xferbench.analysis import summary
from xferbench.analysis.row import RunRow
from xferbench.analysis.runmeta import RunMeta
from xferbench.measure import growth, soak
from xferbench.measure.scrape import Snapshot
from xferbench.report import soak as report_soak
from xferbench.report import tables

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
    meta = RunMeta.from_json({"experiment": "s", "cells": ["a", "b"], "baseline": "a",
                              "soak": {"growth_max": 0.05, "held_slack": 2}, "warmup_s": 120,
                              "cell_configs": {n: {"load": {"mode": "open"}} for n in "ab"}})
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


# --- the verdict on the end of the run -------------------------------------------------------------------
MIB = float(1 << 20)


@pytest.mark.parametrize(
    ("t_from", "t_to", "start"),
    [
        (120.0, 1800.0, 1240.0),  # the 30-minute soak: its last 560 s
        (120.0, 600.0, 440.0),  # the 10-minute soak: its last 160 s
        (60.0, 300.0, 220.0),  # 5 minutes: the last 80 s
        (0.0, 60.0, 30.0),  # a third would be 20 s: at least MIN_TAIL_S
        (8.0, 28.0, 8.0),  # shorter than MIN_TAIL_S: the whole window
    ],
)
def test_the_judged_part_is_the_last_third_of_the_window(t_from: float, t_to: float, start: float) -> None:
    assert soak.judged_span(t_from, t_to) == pytest.approx(start)


def judge(
    rss: Callable[[float], float], heap: Callable[[float], float] | None = None, warmup: float = 120.0,
    end: float = 1800.0,
) -> tuple[RunRow, dict[str, Any]]:
    """A soak of `end` seconds sampled once a second (RSS from the ticks, the live heap from the server's
    scrapes), measured from `warmup` to `end` as the runner measures it: the row, and Watch.window's fields."""
    w = soak.Watch(pid=0, metrics_url="", goal=GOAL)
    w.ticks = [(float(t), int(rss(float(t))), 10, 6) for t in range(int(end) + 1)]
    server = [Snapshot(float(t), {("go_gc_heap_live_bytes", ()): heap(float(t))}) for t in range(int(end) + 1)] \
        if heap is not None else []
    fields = w.window(server, 0.0, warmup, end)
    return row("a", "xferd-go", **{**GO, **fields, "duration_s": end - warmup}), fields


def since_warmup(f: Callable[[float], float], warmup: float = 120.0, end: float = 1800.0) -> float:
    """What the verdict used to judge: the fitted growth from the end of the warm-up to the end."""
    ts = [float(t) for t in range(int(end) + 1)]
    g = growth.growth(ts, [f(t) for t in ts], warmup, end)
    assert g is not None
    return g


def settles(base: float, rise: float, tau: float, wobble: float = 0.0) -> Callable[[float], float]:
    """Fills towards base + rise (time constant tau), with a scavenger-like wobble of ±wobble every 37 s:
    a pool, a store or a heap settling after the warm-up, then flat."""
    return lambda t: base + rise * (1 - math.exp(-t / tau)) + wobble * math.sin(2 * math.pi * t / 37)


def test_a_plateau_after_the_warm_up_is_ok_where_the_rise_since_the_warm_up_was_not() -> None:
    rss, heap = settles(60 * MIB, 15 * MIB, 300.0, wobble=5 * MIB), settles(20 * MIB, 6 * MIB, 300.0, 2 * MIB)
    assert since_warmup(rss) > 0.09 and since_warmup(heap) > 0.09  # +9.5%, +9.8%: the old verdict said LEAK?
    r, fields = judge(rss, heap)
    assert (fields["soak_from_s"], fields["soak_window_s"]) == (1240.0, 560.0)
    assert abs(fields["soak_rss_growth"]) < 0.01 and abs(fields["soak_heap_growth"]) < 0.01
    assert soak.verdict(r, GOAL) == (soak.OK, [])
    assert report_soak.text(r).startswith("RSS +0.") and "(1240 s → 1800 s)" in report_soak.text(r)


def test_a_leak_still_growing_at_the_end_is_flagged() -> None:
    # +30 MiB over the 28 minutes measured on 60 MiB (+50% since the warm-up), at the same rate at the end:
    # +10 MiB over the last 560 s on 80 MiB.
    leak = 30 * MIB / 1680
    r, fields = judge(lambda t: 60 * MIB + leak * (t - 120), lambda t: 20 * MIB)
    assert fields["soak_rss_growth"] == pytest.approx(10 / 80, rel=1e-6) and fields["soak_heap_growth"] == 0.0
    assert soak.verdict(r, GOAL) == (soak.LEAK, ["RSS grew +12.5% in the last 560 s (goal <= 5%)"])


def test_a_live_heap_leak_under_a_flat_rss_is_flagged() -> None:
    # The heap grows into memory the runtime already holds: RSS does not move, the live heap does.
    r, _ = judge(lambda t: 80 * MIB, lambda t: 20 * MIB + (t - 120) * 8 * MIB / 1680)
    verdict, flags = soak.verdict(r, GOAL)
    assert verdict == soak.LEAK and len(flags) == 1 and flags[0].startswith("live heap grew +"), flags


def test_growth_still_going_on_at_the_end_of_a_short_soak_is_flagged() -> None:
    # A 10-minute soak whose server has not settled by minute 7: its last third still climbs (+6%).
    r, fields = judge(settles(60 * MIB, 60 * MIB, 600.0), end=600.0)
    assert (fields["soak_from_s"], fields["soak_window_s"]) == (440.0, 160.0)
    verdict, flags = soak.verdict(r, GOAL)
    assert verdict == soak.LEAK and flags[0].startswith("RSS grew +") and "in the last 160 s" in flags[0], flags


def test_a_window_shorter_than_the_minimum_part_is_judged_whole() -> None:
    r, fields = judge(lambda t: 50 * MIB * (1 + (t - 8) / 20), warmup=8.0, end=28.0)  # +100% in 20 s
    assert (fields["soak_from_s"], fields["soak_window_s"]) == (8.0, 20.0)
    assert soak.verdict(r, GOAL) == (soak.LEAK, ["RSS grew +100.0% in the last 20 s (goal <= 5%)"])


def test_a_flat_series_with_noise_is_ok() -> None:
    rnd = random.Random(3)
    r, _ = judge(lambda t: 70 * MIB * (1 + rnd.uniform(-0.05, 0.05)), lambda t: 26 * MIB * (1 + rnd.uniform(-0.1, 0.1)))
    assert soak.verdict(r, GOAL) == (soak.OK, [])
