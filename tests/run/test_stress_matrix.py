"""The CI-sized stress matrix (experiments/netrpc-stress-quick.toml) end to end: 2 file sizes x 2 user levels
against the real xferd-go frame listener and real Locust, a few seconds per level; each run's row holds one
window per level with its figures, the run directory holds the matrix table (summary.md) and the chart
(stress.html, and in report.html), and the terminal prints the table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.runs import ROOT, xferbench_run
from xferbench import config as xe

LEVELS = (2, 4)
SIZES = ("64KiB", "256KiB")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_tiny_stepped_matrix_gives_a_window_per_level_a_table_and_a_chart(tmp_path: Path) -> None:
    exp = xe.load_file(ROOT / "experiments" / "netrpc-stress-quick.toml")
    assert Path(exp.cells[0].binary).exists(), "build/bin/xferd-go is not built: run `make build` (no skip)"
    assert [c.load.levels for c in exp.cells] == [LEVELS, LEVELS] and [c.load.sizes for c in exp.cells] == list(SIZES)
    run_dir = tmp_path / "run"
    proc = xferbench_run("experiments/netrpc-stress-quick.toml", "--out", str(run_dir))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    rows = [json.loads(line) for line in (run_dir / "runs.jsonl").read_text().splitlines()]
    assert sorted(r["cell"] for r in rows) == sorted(f"go/frame/{s}" for s in SIZES)  # a round runs in shuffled order
    for r in rows:
        assert r["status"] == "ok", (r["cell"], r["error"], r["stderr_tail"])
        assert [st["users"] for st in r["steps"]] == list(LEVELS)
        for st in r["steps"]:
            assert st["note"] is None, st
            assert 0.9 <= st["duration_s"] <= 4.5  # up to 3 s after the 1 s settle, less a late or lost scrape
            assert st["client_qps"] > 0 and st["server_bytes_per_s"] > 0 and st["client_bytes_per_s"] > 0
            assert st["client_avg_s"] > 0 and st["client_p95_s"] >= st["client_p50_s"] > 0
            assert st["client_failure_rate"] == 0.0
            _check_saturation(st, len(r["cpus"]["generator"]))

    md = (run_dir / "summary.md").read_text()
    assert "## Stress matrix: per file size and user level" in md
    table = [ln for ln in md.splitlines() if ln.startswith(("| 64KiB |", "| 256KiB |"))]
    assert [ln.split(" | ")[:2] for ln in table] == [[f"| {s}", str(u)] for s in SIZES for u in LEVELS]
    # The table's generator column says what each level's flag says (one repeat: "saturated 1/1" or "ok").
    flags = {(r["cell"].rpartition("/")[2], st["users"]): st["gen_saturated"] for r in rows for st in r["steps"]}
    for ln in table:
        size, users = ln.split(" | ")[0].lstrip("| "), int(ln.split(" | ")[1])
        assert ln.endswith(" | saturated 1/1 |" if flags[(size, users)] else " | ok |"), (ln, flags[(size, users)])
    assert all(" | n/a | n/a | n/a | " in ln for ln in table)  # no reconnect figures were recorded: said so
    chart = (run_dir / "stress.html").read_text()
    assert "plotly" in chart and all(s in chart for s in SIZES) and "reconnects per s" in chart
    assert "Stress matrix" in (run_dir / "report.html").read_text()
    assert "stress matrix: median over repeats" in proc.stdout


def _check_saturation(st: dict, gen_cpus: int) -> None:
    """A level's saturation flag against the figures recorded beside it. The flag's value itself cannot be
    foreseen here: the generator (pinned to its own CPU) runs a closed loop as fast as the server answers,
    and on a shared machine other processes take that CPU's idle time, so either branch of the rule can be
    true at either level. What must hold: both figures were measured (the generator is pinned, so its CPUs'
    idle time is read), neither exceeds what the generator's CPUs can give, and the flag is the rule applied
    to them: saturated when Locust used more than 0.9 cores or its CPUs had less than 0.1 cores idle."""
    gen, idle = st["gen_cpu_cores"], st["gen_cpus_idle_cores"]
    assert gen is not None and idle is not None, st
    # Locust's own CPU time and its CPUs' idle time come out of the same CPUs' capacity: together at most
    # gen_cpus cores. Each is a rate over the level's window whose two ends are read a scrape's lag apart
    # from the window's (up to ~0.5 s of a 3 s window under load), hence the 25% margin.
    assert 0 < gen <= 1.25 * gen_cpus and 0 <= idle <= 1.25 * gen_cpus, st
    assert gen + idle <= 1.25 * gen_cpus, st
    assert st["gen_saturated"] is (gen > 0.9 or idle < 0.1), st
