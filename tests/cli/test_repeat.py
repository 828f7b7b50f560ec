"""`xferbench run --repeat N` overrides the experiment's repeats: N rounds of every cell, run and recorded
(runs.jsonl, experiment.json, the reports); a value that is not a whole number of at least 1 is refused
before anything starts, naming the option."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.runs import experiment_file, one_round, xferbench_run
from xferbench import cli

# Two measured seconds a run (--quick's 3 at most): the runs only need to serve some calls.
EXPERIMENT = one_round("repeat") + """
mix = "echo:1"
duration_s = 2
[[servers]]
server = "xferd-c"
[servers.flags]
alloc = ["glibc", "pool"]
"""
REPEAT = 2  # the experiment says 1: two rounds of two cells show the override and the interleaving


def test_repeat_runs_every_cell_n_times(tmp_path: Path) -> None:
    path = tmp_path / "exp.toml"
    exp = experiment_file(path, EXPERIMENT)
    assert exp.repeats == 1 and len(exp.cells) == 2
    proc = xferbench_run(str(path), "--out", str(tmp_path / "run"), "--repeat", str(REPEAT), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [json.loads(x) for x in (tmp_path / "run" / "runs.jsonl").read_text().splitlines()]
    rounds = range(1, REPEAT + 1)
    assert sorted((r["cell"], r["repeat"]) for r in rows) == sorted((c.name, k) for c in exp.cells for k in rounds)
    assert [r["repeat"] for r in rows] == [1, 1, 2, 2]  # rounds, interleaved
    assert all(r["status"] == "ok" and r["client_qps"] > 0 for r in rows), [(r["status"], r["error"]) for r in rows]
    meta = json.loads((tmp_path / "run" / "experiment.json").read_text())
    assert (meta["repeats"], meta["rounds"]) == (REPEAT, REPEAT)
    md = (tmp_path / "run" / "summary.md").read_text()
    assert f"{REPEAT} repeats interleaved" in md
    for c in exp.cells:  # every cell's ranking row counts REPEAT runs
        assert any(f"| `{c.name}` | {REPEAT} |" in line for line in md.splitlines()), md


def test_a_bad_repeat_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """The command's exit status and message, once as a process."""
    path = tmp_path / "exp.toml"
    experiment_file(path, EXPERIMENT)
    proc = xferbench_run(str(path), "--out", str(tmp_path / "run"), "--repeat=0", timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "argument --repeat: '0': want 1 or more" in proc.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("value", "needle"), [("0", "want 1 or more"), ("-2", "want 1 or more"),
                                               ("two", "want a whole number such as 3")])
def test_each_bad_repeat_is_an_argument_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str,
                                              needle: str) -> None:
    """Every refused value through the command's own parser, in this process (argparse exits with status 2)."""
    path = tmp_path / "exp.toml"
    experiment_file(path, EXPERIMENT)
    with pytest.raises(SystemExit) as refused:
        cli.main(["run", str(path), "--out", str(tmp_path / "run"), f"--repeat={value}", "--quick"])
    assert refused.value.code == 2
    assert f"argument --repeat: '{value}': {needle}" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
