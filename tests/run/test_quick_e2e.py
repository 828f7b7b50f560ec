"""`xferbench run ... --quick` end to end against the real servers and loadgen: every artifact exists and holds
every cell; in every run the client's request counts agree with the server's own counts within the calls in
flight at the window's edges, and the served rate is the offered rate within what the open loop's schedule
allows; no process is left behind.

The full experiments/quick.toml (five cells, five rounds of duets) is slow; a reduced experiment of the same
kind (one duet, three rounds, written to tmp_path) makes the same checks in the fast suite.

These tests need build/bin/xferd-go and build/bin/xferd-c (`make build`); a missing binary is a failure, not
a skip, because a silent skip would hide that half the matrix never ran."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from py_client.sizes import parse_size
from tests.support.runs import stray_children
from xferbench import config as xe

ROOT = Path(__file__).resolve().parents[2]
OPS = ("Upload", "Download", "Echo")  # whole operations; UploadChunk and DownloadChunk are records inside them
CLIENT_SCRAPE_TIMEOUT_S = 0.8  # xferbench/run/phase.py _sample: scrape(gen.metrics_url, timeout=0.8)

# A reduced quick.toml: one duet (xferd-go pool=on beside xferd-c glibc), the same load, three rounds (the
# fewest that give a noise floor and verdicts). With --quick: 1 s warm-up, 3 s measured, about 7 s a round.
SHORT = """
[experiment]
name = "quick-short"
repeats = 3
warmup_s = 1
baseline = "go/frame"

[load]
rate = "80"
users = 8
spawn_rate = 8
duration_s = 3
profile = "steady"
mix = "upload:1,download:1,echo:1"
sizes = "4MiB"
chunk = "1MiB"
inflight = 4
verify = "on"

[[servers]]
server = "xferd-go"
[servers.flags]
pool = ["on"]
[servers.load]
transport = "frame"

[[servers]]
server = "xferd-c"
[servers.flags]
alloc = ["glibc"]
"""


def _run(exp_path: Path, run_dir: Path, timeout: float) -> xe.Experiment:
    """`xferbench run EXP --quick --out RUN_DIR` as a user runs it; the experiment as that run saw it."""
    exp = xe.load_file(exp_path).with_overrides(quick=True)
    for binary in sorted({c.binary for c in exp.cells}):
        assert Path(binary).exists(), f"{binary} is not built: run `make build` (this test does not skip)"
    proc = subprocess.run(
        [sys.executable, "-m", "xferbench", "run", str(exp_path), "--quick", "--out", str(run_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "report.html" in proc.stdout
    return exp


def _scrapes(run_dir: Path, row: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The run's recorded scrapes of Locust and of the server (timeseries/<stem>.snapshots.jsonl), oldest first."""
    snaps = [json.loads(line) for line in (run_dir / row["timeseries"].replace(".csv", ".snapshots.jsonl")).open()]
    return [s for s in snaps if s["side"] == "client"], [s for s in snaps if s["side"] == "server"]


def _same_tick(client: list[dict[str, Any]], server: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(client scrape, server scrape) of every tick where both were recorded. Each tick the runner scrapes
    Locust, then the server, so a tick's server scrape is the first at or after its client scrape and before
    the next tick's. (The runner keeps no server scrape more than 0.5 s after the last client scrape.)"""
    pairs = []
    for c, nxt in zip(client, [*client[1:], None], strict=True):
        same = [x for x in server if c["t"] <= x["t"] < (nxt["t"] if nxt else math.inf)]
        if same:
            pairs.append((c, same[0]))
    return pairs


def _total(snap: dict[str, Any], name: str, method: str | None = None) -> float:
    return float(sum(v for n, lab, v in snap["samples"] if n == name and method in (None, lab.get("method"))))


def _max_op_latency(a: dict[str, Any], b: dict[str, Any]) -> float:
    """An upper bound of the longest whole operation recorded between scrapes a and b: the smallest histogram
    bucket bound that holds every one of them (inf when only +Inf does)."""
    def buckets(s: dict[str, Any]) -> dict[tuple[str, float], float]:
        return {(lab["method"], float(lab["le"])): v for n, lab, v in s["samples"]
                if n == "xfer_client_request_duration_seconds_bucket" and lab.get("method") in OPS}

    ba, bb = buckets(a), buckets(b)
    worst = 0.0
    for method in {m for m, _ in bb}:
        delta = {le: v - ba.get((m, le), 0.0) for (m, le), v in bb.items() if m == method}
        if delta[math.inf] > 0:
            worst = max(worst, min(le for le, d in delta.items() if d >= delta[math.inf]))
    return worst


def _check_row(run_dir: Path, row: dict[str, Any], cell: xe.Cell) -> None:
    """One run of a frame cell under a fixed offered load: no failure on either side; the server answered the
    calls the client made, within the calls in flight; the served rate is the offered one."""
    load = cell.load
    assert row["status"] == "ok", (row["cell"], row["error"], row["stderr_tail"])
    assert row["transport"] == "frame" and load.rate_per_second and load.mode == "open"
    assert row["client_failures"] == 0 and row["server_errors"] == 0, row["cell"]
    users, rate, dt = load.users, load.rate_per_second, row["duration_s"]
    chunks = math.ceil(parse_size(load.sizes) / parse_size(load.chunk))  # one size: every file has this many
    client, server = _scrapes(run_dir, row)
    b = client[-1]  # the measured window ends at the last client scrape and lasts duration_s
    a = min(client, key=lambda s: abs(s["t"] - (b["t"] - dt)))
    assert abs(b["t"] - a["t"] - dt) < 0.01, (a["t"], b["t"], dt)
    ops = "xfer_client_requests_total"
    assert row["client_requests"] == sum(_total(b, ops, m) - _total(a, ops, m) for m in OPS) > 0  # the row's own

    # Client and server count the same calls. Each tick the runner reads Locust's counters, then the
    # server's, `delta` s later; compared at the last tick with both (_same_tick). Both count from 0 (a fresh
    # server and a fresh Locust per run). Each server frame method has its client
    # record: UploadBegin and UploadCommit one per Upload, UploadChunk one per UploadChunk record, Read one per
    # DownloadChunk record, Echo one per Echo; one operation makes `calls` of them (chunks for the chunk
    # methods, else 1), and the server answers no other method. At the window's end the server has answered
    # every call the client had recorded (it answers before the client records; the instant between answering
    # and counting is covered by the lower bound's one operation per user), and more only by the calls of
    # operations the client had not recorded yet: at most one in flight per user (a frame user runs one
    # operation at a time) and those begun in the `delta` between the two reads. Those are the schedule's rate
    # x delta, plus the ones users catching up after a stall start at once: twice the schedule's rate and one
    # more per user hold them (measured: at most 1.3x the schedule, with a load average of 9 on 2 CPUs).
    ticks = _same_tick(client, server)
    assert ticks, "no tick with both scrapes recorded"
    c, s = ticks[-1]
    delta = s["t"] - c["t"]
    ops_late = 2 * users + math.ceil(2 * rate * delta)
    pairs = {"UploadBegin": ("Upload", 1), "UploadCommit": ("Upload", 1), "UploadChunk": ("UploadChunk", chunks),
             "Read": ("DownloadChunk", chunks), "Echo": ("Echo", 1)}
    answered = {m: _total(s, "xfer_requests_total", m) for m in pairs}
    assert _total(s, "xfer_requests_total") == sum(answered.values()), "the server answered calls no client made"
    for method, (record, calls) in pairs.items():
        extra = answered[method] - _total(c, "xfer_client_requests_total", record)
        assert -users * calls <= extra <= calls * ops_late, (
            f"{row['cell']} {row['pair']}: the server answered {answered[method]:g} {method} by {delta:.2f}s after "
            f"the client's scrape at {c['t'] - b['t']:+.1f}s, {extra:+g} on the client's {record} records "
            f"(allowed {-users * calls}..+{calls * ops_late})")
    assert answered["Echo"] > 0 and answered["UploadCommit"] > 0 and answered["Read"] > 0

    # The served rate is the offered rate. Below: half of it is a collapse, not noise. Above: each user's
    # operations follow a fixed schedule one gap (users / rate) apart once every user runs (the spawn takes
    # users / spawn_rate = 1 s, within the warm-up), and a late one starts at once, so the
    # operations a user ends in the window are at most those scheduled from the first one's scheduled start to
    # the window's end, plus one. The first one started at most its latency (timed from its scheduled start)
    # before the window, and Locust read its counters after the window's last scrape began, by at most that
    # tick's `delta` (the server's scrape began once Locust had answered), or, when that tick's server scrape
    # is not recorded, the runner's 0.8 s timeout for a Locust scrape (this one was answered).
    # Over all users: rate x (window + read lag + longest latency) + users.
    lag = delta if c is b else CLIENT_SCRAPE_TIMEOUT_S
    longest = _max_op_latency(a, b)
    assert row["client_qps"] >= 0.5 * rate, (row["cell"], row["pair"], row["client_qps"], rate)
    ceiling = rate * (dt + lag + longest) + users
    assert row["client_requests"] <= ceiling, (
        f"{row['cell']} {row['pair']}: {row['client_requests']:g} operations in {dt:g} s at {rate:g}/s offered; "
        f"the schedule allows at most {ceiling:.0f} (longest operation <= {longest:g} s)")


def _check_run(exp: xe.Experiment, run_dir: Path) -> None:
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
        _check_row(run_dir, r, exp.cell(r["cell"]))
        assert r["client_p95_s"] is not None and r["rss_peak_bytes"] > 0
        assert r["gen_cpu_cores"] is not None and r["runner_cpu_cores"] is not None
        if r["server"] == "xferd-go":
            assert r["gc_pauses"] is not None
        assert (run_dir / r["timeseries"]).stat().st_size > 0
    with open(run_dir / "summary.csv", encoding="utf-8") as f:
        summary = list(csv.DictReader(f))
    assert [s["cell"] for s in summary] == names
    md = (run_dir / "summary.md").read_text()
    assert "can tell apart differences of ±" in md  # three rounds or more: a noise floor and real verdicts
    html = (run_dir / "report.html").read_text()
    for n in names:
        assert f"`{n}`" in md and n in html
    assert "plotly" in html and "<script src=" not in html  # self-contained: plotly.js inlined
    assert not stray_children()
    pids = [pid for r in rows for pid in (r.get("pids") or {}).values()]
    assert pids and not [p for p in pids if _alive(p)], "processes left behind"


@pytest.mark.timeout(120)
def test_short_quick_run_counts_agree_and_serves_the_offered_rate(tmp_path: Path) -> None:
    path = tmp_path / "quick-short.toml"
    path.write_text(SHORT)
    exp = _run(path, tmp_path / "run", timeout=100)
    assert [c.name for c in exp.cells] == ["go/frame", "c/frame"] and exp.repeats == 3
    _check_run(exp, tmp_path / "run")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_quick_end_to_end(tmp_path: Path) -> None:
    exp = _run(ROOT / "experiments" / "quick.toml", tmp_path / "quick", timeout=800)
    _check_run(exp, tmp_path / "quick")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
