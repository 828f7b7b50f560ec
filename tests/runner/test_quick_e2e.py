"""`xferbench run experiments/quick.toml --quick` end to end against the real servers and loadgen: every
artifact exists and holds every cell with non-zero QPS, and no process is left behind.

This test needs build/bin/xferd-go and build/bin/xferd-c (`make build`); a missing binary is a failure, not
a skip, because a silent skip would hide that half the matrix never ran."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from xferbench import experiment as xe

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_quick_end_to_end(tmp_path: Path) -> None:
    exp = xe.load_file(ROOT / "experiments" / "quick.toml")
    for binary in sorted({c.binary for c in exp.cells}):
        assert Path(binary).exists(), f"{binary} is not built: run `make build` (this test does not skip)"
    run_dir = tmp_path / "quick"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "xferbench",
            "run",
            "experiments/quick.toml",
            "--quick",
            "--out",
            str(run_dir),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=800,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "report.html" in proc.stdout

    names = [c.name for c in exp.cells]
    others = [n for n in names if n != exp.baseline]
    rows = [json.loads(line) for line in (run_dir / "runs.jsonl").read_text().splitlines()]
    # Duets: every round runs each other cell beside the baseline, in a seeded shuffled order.
    assert exp.duet and len(rows) == 2 * len(others) * exp.repeats
    per_round = 2 * len(others)
    for k in range(exp.repeats):
        batch = rows[k * per_round : (k + 1) * per_round]
        assert {r["repeat"] for r in batch} == {k + 1}
        assert sorted(r["cell"] for r in batch) == sorted([exp.baseline] * len(others) + others)
        assert sorted({r["pair"] for r in batch}) == sorted(f"r{k + 1}/{n}" for n in others)
    for r in rows:
        assert r["status"] == "ok", (r["cell"], r["error"], r["stderr_tail"])
        assert r["client_qps"] > 0 and r["server_qps"] > 0, r["cell"]
        assert r["client_p95_s"] is not None and r["rss_peak_bytes"] > 0
        assert r["gen_cpu_cores"] is not None and r["runner_cpu_cores"] is not None
        if r["server"] == "xferd-go":
            assert r["gc_pauses"] is not None
        assert (run_dir / r["timeseries"]).stat().st_size > 0
    with open(run_dir / "summary.csv", encoding="utf-8") as f:
        summary = list(csv.DictReader(f))
    assert [s["cell"] for s in summary] == names
    md_verdicts = (run_dir / "summary.md").read_text()
    assert "can tell apart differences of ±" in md_verdicts  # three rounds: a noise floor and real verdicts
    assert all(float(s["client_qps_center"]) > 0 for s in summary)
    md = (run_dir / "summary.md").read_text()
    html = (run_dir / "report.html").read_text()
    for n in names:
        assert f"`{n}`" in md and n in html
    assert "plotly" in html and "<script src=" not in html  # self-contained: plotly.js inlined
    assert not psutil.Process().children(recursive=True)
    pids = [pid for r in rows for pid in (r.get("pids") or {}).values()]
    assert pids and not [p for p in pids if _alive(p)], "processes left behind"


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
