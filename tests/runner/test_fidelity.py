"""The instrument checks itself, on the real servers with real Locust: an A/A experiment calls no
difference and states a finite noise floor; duets run the pair at once; every process runs on the CPU set
the runner chose; capacity mode finds less under a strict SLO than under a loose one, and says so when the
load generator saturates before the server."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.runner.conftest import experiment_file
from xferbench import capacity, runner, stats
from xferbench.experiment import available_cpus
from xferbench.report import summary


def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "runs.jsonl").read_text().splitlines()]


AA = """
[experiment]
name = "aa-test"
repeats = 5
warmup_s = 1
baseline = "c/frame"
aa = true
{extra}

[load]
users = 4
spawn_rate = 4
duration_s = 3
rate = "60"
mix = "upload:1,download:1,echo:1"
sizes = "1MiB"
chunk = "256KiB"
inflight = 2
transport = "frame"

[[servers]]
server = "xferd-c"
"""


def _check_aa(run_dir: Path, exp_cells: int, rounds: int) -> summary.Summary:
    rows = _rows(run_dir)
    assert len(rows) == exp_cells * rounds
    for r in rows:
        assert r["status"] == "ok", (r["cell"], r["error"], r["stderr_tail"])
        assert r["server_cpu_per_request_s"] > 0 and r["server_cpu_per_gib_s"] > 0
    s = summary.load(run_dir)
    assert s.rank_metric == "server_cpu_per_request_s"  # fixed offered load: cost ranks, not client QPS
    aa = [v for v in s.verdicts if v.cell == "c/frame (A/A)"]
    assert {v.metric for v in aa} >= {"server_cpu_per_request_s", "client_qps", "client_p99_s"}
    for v in aa:
        assert v.comparison.has_ci, v
        assert v.comparison.verdict in (stats.SAME, stats.BELOW_FLOOR), (v.metric, v.comparison.text())
    floor = s.floors["server_cpu_per_request_s"]
    assert floor is not None and 0 < floor < 1 and math.isfinite(floor)
    assert "can tell apart differences of ±" in s.floor_text()
    return s


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_aa_experiment_calls_no_difference_and_states_its_floor(tmp_path: Path) -> None:
    # alpha 0.01: the A/A pair must not differ, and this test must not flake; the default 0.05's false
    # verdict rate is checked by simulation in tests/unit/test_stats.py.
    exp = experiment_file(tmp_path / "aa.toml", AA.format(extra="alpha = 0.01"))
    assert [c.name for c in exp.cells] == ["c/frame", "c/frame (A/A)"]
    res = runner.sweep(exp, tmp_path / "run")
    assert not res.interrupted
    _check_aa(res.run_dir, 2, 5)
    meta = json.loads((res.run_dir / "experiment.json").read_text())
    assert meta["aa_cell"] == "c/frame (A/A)"
    assert meta["pinning"]["mode"] == ("auto" if len(available_cpus()) > 1 else "none")
    # Every round holds both cells once, in the seeded shuffled order.
    rounds: dict[int, list[str]] = {}
    for r in _rows(res.run_dir):
        rounds.setdefault(r["repeat"], []).append(r["cell"])
    assert all(sorted(cells) == ["c/frame", "c/frame (A/A)"] for cells in rounds.values())


def _first_client_scrape(path: Path) -> float:
    return json.loads(path.read_text().splitlines()[0])["t"]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_duet_runs_the_pair_at_once_and_pairs_by_duet(tmp_path: Path) -> None:
    text = AA.format(extra="alpha = 0.01\nduet = true").replace("repeats = 5", "repeats = 3")
    exp = experiment_file(tmp_path / "duet.toml", text)
    res = runner.sweep(exp, tmp_path / "run")
    rows = _rows(res.run_dir)
    s = _check_aa(res.run_dir, 2, 3)
    by_pair: dict[str, list[dict]] = {}
    for r in rows:
        by_pair.setdefault(r["pair"], []).append(r)
    assert len(by_pair) == 3
    for pair, two in by_pair.items():
        assert sorted(r["cell"] for r in two) == ["c/frame", "c/frame (A/A)"], pair
        a, b = (_first_client_scrape(res.run_dir / r["timeseries"].replace(".csv", ".snapshots.jsonl")) for r in two)
        assert abs(a - b) < 1.0, f"{pair}: the duet's loads started {abs(a - b):.2f} s apart"
    assert all(v.comparison.n_a == 3 for v in s.verdicts)


@pytest.mark.timeout(120)
def test_server_and_generator_run_on_disjoint_cpu_sets(tmp_path: Path) -> None:
    cpus = available_cpus()
    assert len(cpus) >= 2, "this machine has one CPU: pinning cannot separate server and generator"
    text = AA.format(extra="").replace("repeats = 5", "repeats = 1").replace("aa = true", "")
    exp = experiment_file(tmp_path / "pin.toml", text)
    half = len(cpus) // 2
    assert exp.pinning.server == tuple(cpus[:half]) and exp.pinning.generator == tuple(cpus[half:])
    res = runner.sweep(exp, tmp_path / "run")
    (row,) = _rows(res.run_dir)
    assert row["status"] == "ok", row["error"]
    # Read back from the kernel (os.sched_getaffinity of the live PIDs), not copied from the request.
    assert row["cpus"] == {"server": cpus[:half], "generator": cpus[half:]}
    meta = json.loads((res.run_dir / "experiment.json").read_text())
    assert meta["pinning"]["server"] == cpus[:half] and "server on CPUs" in meta["pinning"]["text"]


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
    (rs,) = _rows(runner.sweep(strict, tmp_path / "strict").run_dir)
    (rl,) = _rows(runner.sweep(loose, tmp_path / "loose").run_dir)
    for r in (rs, rl):
        assert r["status"] == "ok", r["error"]
        assert r["capacity_steps"], r
    assert rs["capacity_status"] == capacity.NONE_PASSED and rs["capacity_rps"] is None
    assert all(not s["ok"] and "P99" in s["why"] for s in rs["capacity_steps"])
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
    (row,) = _rows(runner.sweep(exp, tmp_path / "run").run_dir)
    assert row["status"] == "ok", row["error"]
    assert row["capacity_status"] == capacity.GENERATOR_BOUND, row["capacity_steps"]
    last = row["capacity_steps"][-1]
    # Saturated: its own CPU above 0.9 cores, or its pinned CPU with no idle time left (the rest stolen).
    assert last["gen_cpu_cores"] > 0.9 or last["gen_idle_cores"] < 0.1, last
    assert "saturated" in last["why"]
    assert any("lower bound" in w for w in row["warnings"])
