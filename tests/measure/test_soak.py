"""The soak's leak check through `xferbench run` against the real servers and Locust, with tests that can fail.

Short (about 20 s each): a workload that really grows must say LEAK? (in make test), and the same workload
once it has stopped growing must say ok (in make test-slow, for both servers). The growth is real, not a test
knob: every Locust upload user stores its file under a name of its own in the memory store (each overwrite
replaces it), so users that keep being spawned through the measured window make the store, the live heap and
RSS grow with them, while users all spawned before the window leave a store that stays the same size. Both
runs are shorter than soak.MIN_TAIL_S, so their whole window is judged; every soak field is in runs.jsonl, the
series is written, the counts come back, and the report carries the soak line.

Slow (about 2.2 minutes): a soak at experiments/soak.toml's rate and mix whose store fills during the first
half of the measured window and then stays full, the shape of a pool or a cache that settles after the
warm-up. The growth since the warm-up is far over the goal, but the verdict is taken on the last third of the
window, where nothing grows any more: it must say ok. A verdict on the rise since the warm-up would say LEAK?.
experiments/soak-30m.toml is the 30-minute soak (it does not fit in the slow suite).

Needs build/bin/xferd-go and build/bin/xferd-c (`make build`); a missing binary is a failure, not a skip."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.runs import experiment_file
from xferbench.measure import growth, soak

ROOT = Path(__file__).resolve().parents[2]
HELD_BOUND = 3  # descriptors and goroutines/threads after the load: at most this many above before it

# A flat run's fitted growth over its 12 s wanders by a few percent (xferd-go -4%..+4% RSS, -7%..0% live heap,
# xferd-c 0..+5% RSS, in three or four runs each on the 2-core machine shared with other work); the growing
# store's was +117%..+147% RSS and +235%..+337% live heap. The goal between them keeps both sides far from it.
FAST_GOAL = 0.25


def fast(server: str, users: int, spawn_rate: float) -> str:
    """2 MiB uploads at 8/s, one name per user (inflight 1): 3 s of warm-up, 12 s measured."""
    return f"""
[experiment]
name = "soak-{server}-{users}u"
repeats = 1
warmup_s = 3
[soak]
growth_max = {FAST_GOAL}
[load]
rate = "8"
users = {users}
spawn_rate = {spawn_rate}
duration_s = 12
mix = "upload:1"
sizes = "2MiB"
chunk = "512KiB"
inflight = 1
transport = "frame"
[[servers]]
server = "{server}"
"""


def soak_run(tmp_path: Path, text: str, timeout: float) -> tuple[list[dict[str, Any]], Path, str]:
    """`xferbench run` of the experiment `text`: its runs.jsonl rows (all ok), the run directory, stdout."""
    path = tmp_path / "soak.toml"
    exp = experiment_file(path, text)
    assert exp.soak is not None and not exp.duet
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "xferbench", "run", str(path), "--out", str(run_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [json.loads(line) for line in (run_dir / "runs.jsonl").read_text().splitlines()]
    for r in rows:
        assert r["status"] == "ok", (r["cell"], r["error"], r["stderr_tail"])
        check_row(r)
        check_series(run_dir / r["soak_series"], r)
        assert f"soak {r['cell']}: RSS " in proc.stdout
    md = (run_dir / "summary.md").read_text()
    html = (run_dir / "report.html").read_text()
    assert "## Soak" in md and "## Verdicts" not in md and "<h2>Soak</h2>" in html and "Soak series" in html
    for r in rows:
        assert f"- `{r['cell']}`: RSS " in md and r["cell"] in html
    return rows, run_dir, proc.stdout


@pytest.mark.timeout(90)
def test_a_store_that_keeps_growing_says_leak(tmp_path: Path) -> None:
    # A new upload user a second: 3 users' files at the start of the window, 15 at its end.
    rows, _, out = soak_run(tmp_path, fast("xferd-go", users=24, spawn_rate=1), timeout=80)
    (r,) = rows
    assert r["soak_verdict"] == "LEAK?", (r["soak_verdict"], r["soak_flags"], r["soak_rss_growth"], r["soak_heap_growth"])
    assert r["soak_rss_growth"] > 2 * FAST_GOAL and r["soak_heap_growth"] > 2 * FAST_GOAL, r
    flags = r["soak_flags"]
    assert len(flags) == 2 and flags[0].startswith("RSS grew +") and flags[1].startswith("live heap grew +"), flags
    assert "LEAK?" in out


# In make test-slow: 35 s for both servers, and make test keeps the soak's whole path (series, verdict, reports)
# with the LEAK? run above.
@pytest.mark.slow
@pytest.mark.timeout(90)
@pytest.mark.parametrize("server", ["xferd-go", "xferd-c"])
def test_the_same_store_once_full_says_ok(tmp_path: Path, server: str) -> None:
    # All four users before the window: four files, overwritten in place, the whole window long.
    rows, _, _ = soak_run(tmp_path, fast(server, users=4, spawn_rate=4), timeout=80)
    (r,) = rows
    assert r["soak_verdict"] == "ok", (r["soak_verdict"], r["soak_flags"], r["soak_rss_growth"], r["soak_heap_growth"])
    assert r["soak_flags"] == []


# experiments/soak.toml's offered rate and mix on xferd-go (pool on), but the store fills while the window
# runs: 36 users (12 of them upload, one 4 MiB name each) spawned 0.6 a second, the last of them at 60 s, 30 s
# before the judged part starts (warm-up 10 s, 120 s measured, its last 40 s judged). The goal is 10%: a flat
# server's figure over 100 s wandered by a few percent here (-2.0% RSS, +1.1% live heap in the run that sized
# this test, on about 140 MiB), while the fill before it is tens of percent from the warm-up on.
PLATEAU_GOAL = 0.1
PLATEAU = f"""
[experiment]
name = "soak-plateau"
repeats = 1
warmup_s = 10
[soak]
growth_max = {PLATEAU_GOAL}
[load]
rate = "40"
users = 36
spawn_rate = 0.6
duration_s = 120
mix = "upload:1,download:1,echo:1"
sizes = "4MiB"
chunk = "1MiB"
inflight = 1
verify = "on"
[[servers]]
server = "xferd-go"
[servers.flags]
pool = "on"
[servers.load]
transport = "frame"
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_soak_that_settles_after_the_warm_up_is_ok(tmp_path: Path) -> None:
    rows, run_dir, _ = soak_run(tmp_path, PLATEAU, timeout=360)
    (r,) = rows
    assert 85 <= r["soak_from_s"] <= 95 and 35 <= r["soak_window_s"] <= 45, (r["soak_from_s"], r["soak_window_s"])
    # What the verdict used to judge, from the run's own series: RSS and the live heap from the warm-up on.
    rise = {k: rise_since(run_dir / r["soak_series"], k, 10.0) for k in ("rss_bytes", "heap_bytes")}
    assert rise["rss_bytes"] > 3 * PLATEAU_GOAL and rise["heap_bytes"] > 3 * PLATEAU_GOAL, rise  # once LEAK?
    assert r["soak_verdict"] == "ok", (r["soak_flags"], r["soak_rss_growth"], r["soak_heap_growth"], rise)


def rise_since(path: Path, column: str, t_from: float) -> float:
    with open(path, encoding="utf-8") as f:
        pts = [(float(s["t"]), float(s[column])) for s in csv.DictReader(f) if s[column]]
    g = growth.growth([t for t, _ in pts], [v for _, v in pts], t_from, pts[-1][0])
    assert g is not None
    return g


def check_row(r: dict[str, Any]) -> None:
    """Every soak field, typed; the judged part is the end of the measured window; the counts came back."""
    end = r["soak_from_s"] + r["soak_window_s"]
    assert r["soak_window_s"] >= min(soak.MIN_TAIL_S, r["duration_s"]) - 2 and end >= r["duration_s"], r
    for key in ("soak_rss_growth", "soak_heap_growth"):
        g = r[key]
        assert isinstance(g, float) and math.isfinite(g), (r["cell"], key, g)
    go = r["server"] == "xferd-go"
    assert r["soak_heap_metric"] == ("go_gc_heap_live_bytes" if go else "xfer_allocator_allocated_bytes")
    kinds = ("fds", "goroutines") if go else ("fds", "threads")
    for kind in kinds:
        a, b = r[f"soak_{kind}_start"], r[f"soak_{kind}_end"]
        assert isinstance(a, int) and a > 0 and isinstance(b, int), (r["cell"], kind, a, b)
        assert b <= a + HELD_BOUND, (r["cell"], kind, a, b)
    assert (r["soak_goroutines_start"] is None) == (not go)
    assert r["soak_verdict"] in ("ok", "LEAK?") and isinstance(r["soak_flags"], list)


def check_series(path: Path, r: dict[str, Any]) -> None:
    with open(path, encoding="utf-8") as f:
        series = list(csv.DictReader(f))
    assert len(series) >= r["duration_s"] + r["warmup_s"] - 3  # a tick a second
    assert all(float(s["rss_bytes"]) > 0 and int(s["open_fds"]) > 0 for s in series)
