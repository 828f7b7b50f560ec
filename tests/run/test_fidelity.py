"""The instrument checks itself, on the real servers with real Locust: one A/A experiment run as duets calls
no difference and states a noise floor within a bound; each duet runs its pair at once and the report pairs
by duet; every process runs on the CPU set the runner chose; capacity mode finds less under a strict SLO than
under a loose one, and says so when the load generator saturates before the server."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.runs import experiment_file
from xferbench.analysis import metrics, stats, summary
from xferbench.config import Experiment, available_cpus
from xferbench.measure import capacity
from xferbench.run import sweep


def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "runs.jsonl").read_text().splitlines()]


# One A/A experiment run as duets carries the A/A, duet and pinning checks: the baseline and its identical
# copy run side by side in every round, each server pinned to the server's CPUs, each Locust to the generator's.
# 5 rounds: the floor is t x spread / sqrt(rounds), 2.8 / 2.2 at 5 rounds against 4.3 / 1.7 at 3, and 3 rounds
# would double it past the bound below on a loaded machine. 2 s measured windows after a 1 s warm-up: with
# 1 s windows a loaded machine left runs without two server scrapes in the window (no server figures at all).
# 28-39 s in all; it cannot be shorter for those two reasons, and it replaces three runs (the A/A test's
# 5 rounds x 2 runs one after another, the duet test's 3 duets and the pinning test's run).
AA_DUET = """
[experiment]
name = "aa-duet-test"
repeats = 5
warmup_s = 1
baseline = "c/frame"
aa = true
duet = true
# the A/A pair must not differ, and this test must not flake; the default 0.05's false verdict rate is
# checked by simulation in tests/analysis/test_stats.py
alpha = 0.01

[load]
users = 4
spawn_rate = 4
duration_s = 2
rate = "60"
mix = "upload:1,download:1,echo:1"
sizes = "1MiB"
chunk = "256KiB"
inflight = 2
transport = "frame"

[[servers]]
server = "xferd-c"
"""
ROUNDS = 5
AA_CELLS = ["c/frame", "c/frame (A/A)"]
# The A/A noise floor in server CPU per request: at most ±40%. Measured here with this experiment, 8 runs at a
# load average of 5-9 on 2 CPUs: ±5.7% to ±19% (a paired log-ratio spread of 0.04-0.14); on a quiet machine
# with 20 s windows ±4% (BENCHMARKS.md). ±40% needs a spread of 0.27 between two identical servers measured
# over the same seconds, which is an instrument that cannot tell the pair apart from noise, not a loaded machine.
FLOOR_MAX = 0.40


@dataclass(frozen=True)
class AaRun:
    exp: Experiment
    run_dir: Path
    rows: list[dict]
    summary: summary.Summary


@pytest.fixture(scope="module")
def aa_duet(tmp_path_factory: pytest.TempPathFactory) -> AaRun:
    tmp = tmp_path_factory.mktemp("aa-duet")
    exp = experiment_file(tmp / "aa.toml", AA_DUET)
    assert [c.name for c in exp.cells] == AA_CELLS and exp.duet and exp.repeats == ROUNDS
    res = sweep.sweep(exp, tmp / "run")
    assert not res.interrupted
    return AaRun(exp, res.run_dir, _rows(res.run_dir), summary.load(res.run_dir))


@pytest.mark.timeout(150)
def test_aa_calls_no_difference_within_a_bounded_floor(aa_duet: AaRun) -> None:
    rows, s = aa_duet.rows, aa_duet.summary
    assert len(rows) == 2 * ROUNDS
    for r in rows:
        assert r["status"] == "ok", (r["cell"], r["error"], r["stderr_tail"])
        assert r["server_cpu_per_request_s"] > 0 and r["server_cpu_per_gib_s"] > 0
    # Every round holds both cells once.
    rounds: dict[int, list[str]] = {}
    for r in rows:
        rounds.setdefault(r["repeat"], []).append(r["cell"])
    assert sorted(rounds) == list(range(1, ROUNDS + 1)) and all(sorted(c) == AA_CELLS for c in rounds.values())
    meta = json.loads((aa_duet.run_dir / "experiment.json").read_text())
    assert meta["aa_cell"] == "c/frame (A/A)" and meta["duet"] is True
    assert s.rank_metric == "server_cpu_per_request_s"  # fixed offered load: cost ranks, not client QPS
    aa = [v for v in s.verdicts if v.cell == "c/frame (A/A)"]
    assert {v.metric for v in aa} >= {"server_cpu_per_request_s", "client_p99_s"}
    # The rate the open loop offers is held fixed by it: listed as such, never judged.
    assert "client_qps" not in {v.metric for v in aa}
    assert any(v.metric == "client_qps" and v.comparison.verdict == stats.HELD for v in s.others)
    for v in aa:
        assert v.comparison.has_ci, v
        assert v.comparison.verdict in (stats.SAME, stats.BELOW_FLOOR), (v.metric, v.comparison.text())
    floor = s.floors["server_cpu_per_request_s"]
    assert floor is not None and 0 < floor <= FLOOR_MAX, f"A/A noise floor ±{(floor or 0) * 100:.1f}%"
    assert f"can tell apart differences of ±{floor * 100:.1f}% in server CPU per request" in s.floor_text()


def _first_client_scrape(path: Path) -> float:
    return json.loads(path.read_text().splitlines()[0])["t"]


@pytest.mark.timeout(150)
def test_duet_runs_each_pair_at_once_and_the_report_pairs_by_duet(aa_duet: AaRun) -> None:
    by_pair: dict[str, dict[str, dict]] = {}
    for r in aa_duet.rows:
        by_pair.setdefault(r["pair"], {})[r["cell"]] = r
    assert len(by_pair) == ROUNDS
    for pair, two in by_pair.items():
        assert sorted(two) == AA_CELLS, pair
        a, b = (_first_client_scrape(aa_duet.run_dir / r["timeseries"].replace(".csv", ".snapshots.jsonl"))
                for r in two.values())
        assert abs(a - b) < 1.0, f"{pair}: the duet's loads started {abs(a - b):.2f} s apart"
    # The report compares the two runs of each duet and nothing else: its interval for every A/A metric is
    # the paired one over the duets (the ratio alone would not show it: a geometric mean of ratios is the same
    # whichever runs are paired; the spread of the ratios, and so the interval and the floor, is not).
    for v in aa_duet.summary.verdicts:
        if any(v.metric in (r.get("bounds") or {}) for r in aa_duet.rows):
            # A run whose clock could only bound the figure (a light window on /proc's 10 ms ticks: the fresh-machine
            # container, where the runner gets no cgroup of its own) makes its cell's figure that bound, never compared.
            assert v.comparison.verdict == stats.NO_DATA, (v.metric, v.comparison)
            continue
        a = [two["c/frame"][v.metric] for two in by_pair.values()]
        b = [two["c/frame (A/A)"][v.metric] for two in by_pair.values()]
        want = stats.compare(a, b, metrics.BY_NAME[v.metric].higher_is_better, paired=True)
        got = v.comparison
        assert got.n_a == want.n_a >= 3, (v.metric, got, want)
        assert (got.ratio, got.lo, got.hi) == pytest.approx((want.ratio, want.lo, want.hi), rel=1e-9), v.metric


@pytest.mark.timeout(150)
def test_server_and_generator_run_on_disjoint_cpu_sets(aa_duet: AaRun) -> None:
    cpus = available_cpus()
    assert len(cpus) >= 2, "this machine has one CPU: pinning cannot separate server and generator"
    half = len(cpus) // 2
    exp = aa_duet.exp
    assert exp.pinning.mode == "auto"
    assert exp.pinning.server == tuple(cpus[:half]) and exp.pinning.generator == tuple(cpus[half:])
    # Read back from the kernel (os.sched_getaffinity of the live PIDs), not copied from the request: both
    # servers of every duet on the server's CPUs, both Locusts on the generator's.
    for r in aa_duet.rows:
        assert r["cpus"] == {"server": cpus[:half], "generator": cpus[half:]}, (r["cell"], r["pair"], r["cpus"])
    meta = json.loads((aa_duet.run_dir / "experiment.json").read_text())
    assert meta["pinning"]["mode"] == "auto" and meta["pinning"]["server"] == cpus[:half]
    assert "server on CPUs" in meta["pinning"]["text"]


CAPACITY = """
[experiment]
name = "capacity-test"
repeats = 1
warmup_s = 0.5

[load]
mode = "capacity"
users = {users}
spawn_rate = 100
duration_s = 2
rate = "{rate}"
slo_p99 = "{slo}"
mix = "{mix}"
sizes = "256KiB"
chunk = "64KiB"
transport = "frame"

[[servers]]
server = "xferd-go"
"""


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_capacity_strict_slo_finds_less_than_loose(tmp_path: Path) -> None:
    # A P99 below what one 256 KiB upload takes on loopback can hold at no rate; one second holds at the
    # rate where the search stops (the server's limit or the generator's, whichever comes first).
    strict = experiment_file(tmp_path / "strict.toml", CAPACITY.format(users=8, rate=40, slo="20us", mix="upload:1"))
    loose = experiment_file(tmp_path / "loose.toml", CAPACITY.format(users=8, rate=40, slo="1s", mix="upload:1"))
    (rs,) = _rows(sweep.sweep(strict, tmp_path / "strict").run_dir)
    (rl,) = _rows(sweep.sweep(loose, tmp_path / "loose").run_dir)
    for r in (rs, rl):
        assert r["status"] == "ok", r["error"]
        assert r["capacity_steps"], r
    # No step passes. The search ends either by halving below its floor or, when the generator's CPUs had no
    # idle left (xdist runs another test beside this one), at the first saturated step, which says so.
    assert rs["capacity_rps"] is None, rs["capacity_steps"]
    assert all(not s["ok"] and "P99" in s["why"] for s in rs["capacity_steps"])
    if rs["capacity_status"] == capacity.GENERATOR_BOUND:
        assert "load generator saturated" in rs["capacity_steps"][-1]["why"]
    else:
        assert rs["capacity_status"] == capacity.NONE_PASSED
        assert rs["capacity_steps"][-1]["rate"] <= 40 * capacity.MIN_RATE_FRACTION, rs["capacity_steps"]
    assert rl["capacity_rps"] is not None and rl["capacity_rps"] >= 40
    assert rl["capacity_status"] in (capacity.FOUND, capacity.GENERATOR_BOUND, capacity.MAX_STEPS)
    best = max((s for s in rl["capacity_steps"] if s["ok"]), key=lambda s: s["rate"])
    assert best["rate"] == rl["capacity_rps"] and best["p99_s"] <= 1.0
    assert rl["server_cpu_per_request_s"] > 0  # the row carries the figures of the best passing step


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_capacity_stops_when_the_generator_saturates_first(tmp_path: Path) -> None:
    # Small echoes over frame: xferd-go answers far faster than one Python process can send.
    exp = experiment_file(tmp_path / "gen.toml", CAPACITY.format(users=64, rate=1500, slo="1s", mix="echo:1"))
    (row,) = _rows(sweep.sweep(exp, tmp_path / "run").run_dir)
    assert row["status"] == "ok", row["error"]
    assert row["capacity_status"] == capacity.GENERATOR_BOUND, row["capacity_steps"]
    last = row["capacity_steps"][-1]
    # Saturated: its own CPU above 0.9 cores, or its pinned CPU with no idle time left (the rest stolen).
    assert last["gen_cpu_cores"] > 0.9 or last["gen_idle_cores"] < 0.1, last
    assert "saturated" in last["why"]
    assert any("lower bound" in w for w in row["warnings"])
