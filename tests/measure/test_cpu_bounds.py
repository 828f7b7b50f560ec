"""A light server on a clock of 10 ms ticks: its CPU per request is a bound ("≤ X"), never 0 and never judged.

Without a cgroup (XFERBENCH_CGROUP=off; so it is in a container, or for a server on another host) the server's CPU
comes from /proc's clock ticks. xferd-c serving two Echo calls a second spends far less than a tick in the window,
so the /proc figure would read 0 s per request and rank it free."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.runs import experiment_file
from xferbench.analysis.summary import load as load_summary
from xferbench.report import fmt, tables
from xferbench.run import sweep

LIGHT = """
[experiment]
name = "light"
repeats = 1
duet = false
warmup_s = 1
[load]
users = 1
spawn_rate = 1
duration_s = 2
mix = "echo:1"
rate = "2"
transport = "frame"
[[servers]]
server = "xferd-c"
"""


def test_a_light_servers_cpu_on_the_proc_clock_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XFERBENCH_CGROUP", "off")
    exp = experiment_file(tmp_path / "light.toml", LIGHT)
    [row] = sweep.sweep(exp, tmp_path / "run").rows
    assert row.ok, (row.error, row.stderr_tail)
    assert row.cpu_clock and row.cpu_clock.startswith("/proc process tree"), row.cpu_clock
    assert row.server_cpu_per_request_s is None and row.server_cpu_cores is None, row.server_cpu_per_request_s
    bounds = row.bounds or {}
    assert bounds.get("server_cpu_per_request_s", 0) > 0 and bounds.get("server_cpu_cores", 0) > 0, bounds
    # At most the clock's error over a handful of calls: for xferd-c's one process, two ticks.
    assert row.server_requests and bounds["server_cpu_per_request_s"] * row.server_requests <= 0.04 + 1e-9, bounds
    s = load_summary(tmp_path / "run")
    [cell] = s.cells
    shown = fmt.estimate(cell.est["server_cpu_per_request_s"], "s")
    assert shown.startswith("≤ "), shown
    assert shown in tables.markdown(s)
    assert "server_cpu_per_request_s" not in {v.metric for v in s.verdicts}
