"""A one-minute mini-soak through `xferbench run` against the real servers and Locust: one xferd-go and one
xferd-c cell, 8 s of warm-up then 20 s measured each, at a low rate. Every soak field is in runs.jsonl, the
growth figures are finite and far below a bound no healthy server reaches in 20 s (50%), the descriptors and
goroutines/threads come back to within a few of their idle count, and every report carries the soak lines.

Needs build/bin/xferd-go and build/bin/xferd-c (`make build`); a missing binary is a failure, not a skip."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runner.conftest import experiment_file

ROOT = Path(__file__).resolve().parents[2]
GROWTH_BOUND = 0.5  # generous: a 2-core machine shared with other work must not make this flake
HELD_BOUND = 3  # descriptors and goroutines/threads after the load: at most this many above before it

MINI = """
[experiment]
name = "mini-soak"
repeats = 1
warmup_s = 8
[soak]
[load]
rate = "20"
users = 4
spawn_rate = 4
duration_s = 20
mix = "upload:1,download:1,echo:1"
sizes = "1MiB"
chunk = "256KiB"
[[servers]]
server = "xferd-go"
[servers.load]
transport = "frame"
[[servers]]
server = "xferd-c"
[servers.flags]
alloc = "glibc"
"""


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_mini_soak(tmp_path: Path) -> None:
    path = tmp_path / "mini-soak.toml"
    exp = experiment_file(path, MINI)
    assert exp.soak is not None and not exp.duet
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "xferbench", "run", str(path), "--out", str(run_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=200,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [json.loads(line) for line in (run_dir / "runs.jsonl").read_text().splitlines()]
    assert sorted(r["server"] for r in rows) == ["xferd-c", "xferd-go"]
    for r in rows:
        assert r["status"] == "ok", (r["cell"], r["error"], r["stderr_tail"])
        check_row(r)
        check_series(run_dir / r["soak_series"])
    md = (run_dir / "summary.md").read_text()
    html = (run_dir / "report.html").read_text()
    assert "## Soak" in md and "## Verdicts" not in md and "<h2>Soak</h2>" in html and "Soak series" in html
    for r in rows:
        assert f"- `{r['cell']}`: RSS " in md and r["cell"] in html
        assert f"soak {r['cell']}: RSS " in proc.stdout


def check_row(r: dict) -> None:
    assert 15 <= r["soak_window_s"] <= 25 and 6 <= r["soak_from_s"] <= 10
    for key in ("soak_rss_growth", "soak_heap_growth"):
        g = r[key]
        assert isinstance(g, float) and math.isfinite(g) and abs(g) < GROWTH_BOUND, (r["cell"], key, g)
    go = r["server"] == "xferd-go"
    assert r["soak_heap_metric"] == ("go_gc_heap_live_bytes" if go else "xfer_allocator_allocated_bytes")
    kinds = ("fds", "goroutines") if go else ("fds", "threads")
    for kind in kinds:
        a, b = r[f"soak_{kind}_start"], r[f"soak_{kind}_end"]
        assert isinstance(a, int) and a > 0 and isinstance(b, int), (r["cell"], kind, a, b)
        assert b <= a + HELD_BOUND, (r["cell"], kind, a, b)
    assert (r["soak_goroutines_start"] is None) == (not go)
    assert r["soak_verdict"] in ("ok", "LEAK?") and isinstance(r["soak_flags"], list)


def check_series(path: Path) -> None:
    with open(path, encoding="utf-8") as f:
        series = list(csv.DictReader(f))
    assert len(series) >= 25  # a tick a second over 28 s
    assert all(float(s["rss_bytes"]) > 0 and int(s["open_fds"]) > 0 for s in series)
