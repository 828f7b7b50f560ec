"""The CI-sized stress matrix (experiments/netrpc-stress-quick.toml) end to end: 2 file sizes x 2 user levels
against the real xferd-go frame listener and real Locust, a few seconds per level; each run's row holds one
window per level with its figures, the run directory holds the matrix table (summary.md) and the chart
(stress.html, and in report.html), and the terminal prints the table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.runner.conftest import ROOT, xferbench_run
from xferbench import experiment as xe

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
            assert st["gen_cpu_cores"] is not None and st["gen_saturated"] in (True, False)

    md = (run_dir / "summary.md").read_text()
    assert "## Stress matrix: per file size and user level" in md
    table = [ln for ln in md.splitlines() if ln.startswith(("| 64KiB |", "| 256KiB |"))]
    assert [ln.split(" | ")[:2] for ln in table] == [[f"| {s}", str(u)] for s in SIZES for u in LEVELS]
    assert all(" | n/a | n/a | n/a | " in ln for ln in table)  # no reconnect figures were recorded: said so
    chart = (run_dir / "stress.html").read_text()
    assert "plotly" in chart and all(s in chart for s in SIZES) and "reconnects per s" in chart
    assert "Stress matrix" in (run_dir / "report.html").read_text()
    assert "stress matrix: median over repeats" in proc.stdout
