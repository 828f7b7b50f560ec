"""`xferbench run --repeat N` overrides the experiment's repeats: N rounds of every cell, run and recorded
(runs.jsonl, experiment.json, the reports); a value that is not a whole number of at least 1 is refused
before anything starts, naming the option."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.runner.conftest import experiment_file, one_round, xferbench_run

EXPERIMENT = one_round("repeat") + """
mix = "echo:1"
[[servers]]
server = "xferd-c"
[servers.flags]
alloc = ["glibc", "pool"]
"""


def test_repeat_runs_every_cell_n_times(tmp_path: Path) -> None:
    path = tmp_path / "exp.toml"
    exp = experiment_file(path, EXPERIMENT)
    assert exp.repeats == 1 and len(exp.cells) == 2
    proc = xferbench_run(str(path), "--out", str(tmp_path / "run"), "--repeat", "3", timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [json.loads(x) for x in (tmp_path / "run" / "runs.jsonl").read_text().splitlines()]
    assert sorted((r["cell"], r["repeat"]) for r in rows) == sorted((c.name, k) for c in exp.cells for k in (1, 2, 3))
    assert [r["repeat"] for r in rows] == [1, 1, 2, 2, 3, 3]  # rounds, interleaved
    assert all(r["status"] == "ok" and r["client_qps"] > 0 for r in rows), [(r["status"], r["error"]) for r in rows]
    meta = json.loads((tmp_path / "run" / "experiment.json").read_text())
    assert (meta["repeats"], meta["rounds"]) == (3, 3)
    md = (tmp_path / "run" / "summary.md").read_text()
    assert "3 repeats interleaved" in md
    for c in exp.cells:  # every cell's ranking row counts 3 runs
        assert any(f"| `{c.name}` | 3 |" in line for line in md.splitlines()), md


@pytest.mark.parametrize(("value", "needle"), [("0", "want 1 or more"), ("-2", "want 1 or more"),
                                               ("two", "want a whole number such as 3")])
def test_a_bad_repeat_is_refused_before_anything_starts(tmp_path: Path, value: str, needle: str) -> None:
    path = tmp_path / "exp.toml"
    experiment_file(path, EXPERIMENT)
    proc = xferbench_run(str(path), "--out", str(tmp_path / "run"), f"--repeat={value}", timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"argument --repeat: '{value}': {needle}" in proc.stderr
    assert not (tmp_path / "run").exists()
