"""A stepped run cut into one window per user level (xferbench/measure/steps.py), the explicit levels of loadgen's step
profile, and the [load] steps of an experiment: given a series, the windows and their figures; bad levels
refused naming what is wrong."""

from __future__ import annotations

import pytest

from loadgen import _profiles
from loadgen._options import parse_step_s, parse_steps
from xferbench import config as xe
from xferbench.measure import figures, steps
from xferbench.measure.scrape import Snapshot, parse_text

BOUNDS = (0.01, 0.05, 0.1)


def client_expo(users: int, ok: float, failed: float, lat_sum: float, moved: float, cpu: float) -> str:
    """A Locust process's /metrics as loadgen writes it: every operation lands in the 0.05 s bucket."""
    n = ok + failed
    lab = 'transport="frame",method="Download"'
    return "\n".join([
        "# TYPE xfer_client_users gauge", f"xfer_client_users {users}",
        "# TYPE xfer_client_requests_total counter",
        f'xfer_client_requests_total{{{lab},code="ok"}} {ok}',
        f'xfer_client_requests_total{{{lab},code="unavailable"}} {failed}',
        f'xfer_client_requests_total{{transport="frame",method="DownloadChunk",code="ok"}} {ok * 10}',
        "# TYPE xfer_client_request_duration_seconds histogram",
        f'xfer_client_request_duration_seconds_bucket{{{lab},le="0.01"}} 0',
        f'xfer_client_request_duration_seconds_bucket{{{lab},le="0.05"}} {n}',
        f'xfer_client_request_duration_seconds_bucket{{{lab},le="0.1"}} {n}',
        f'xfer_client_request_duration_seconds_bucket{{{lab},le="+Inf"}} {n}',
        f"xfer_client_request_duration_seconds_count{{{lab}}} {n}",
        f"xfer_client_request_duration_seconds_sum{{{lab}}} {lat_sum}",
        # a chunk record with a very different latency: never part of an operation's average
        'xfer_client_request_duration_seconds_count{transport="frame",method="DownloadChunk"} 1e6',
        'xfer_client_request_duration_seconds_sum{transport="frame",method="DownloadChunk"} 9e6',
        "# TYPE xfer_client_transfer_bytes_total counter",
        f'xfer_client_transfer_bytes_total{{direction="download"}} {moved}',
        "# TYPE process_cpu_seconds_total counter", f"process_cpu_seconds_total {cpu}",
    ]) + "\n"


# users at each second from t = 100: spawning to 2, held, spawning to 4, held; each user makes 10 ops/s of
# 1 MiB at 0.04 s, 1 in 10 failing at level 4; Locust's CPU 0.5 cores at level 2 and 0.95 at level 4.
USERS = [1, 2, 2, 2, 2, 3, 4, 4, 4, 4, 4]


def series() -> list[Snapshot]:
    out, ok, failed, cpu = [], 0.0, 0.0, 0.0
    for i, u in enumerate(USERS):
        if i:
            ops = 10 * USERS[i - 1]
            bad = ops / 10 if USERS[i - 1] == 4 else 0
            ok, failed = ok + ops - bad, failed + bad
            cpu += 0.95 if USERS[i - 1] == 4 else 0.5
        out.append(parse_text(client_expo(u, ok, failed, (ok + failed) * 0.04, ok * (1 << 20), cpu), t=100.0 + i))
    return out


def test_windows_follow_the_users_gauge_after_the_settle_time() -> None:
    ws = steps.windows(series(), [2, 4], settle_s=1.0)
    assert [w.users for w in ws] == [2, 4]
    assert [[s.t for s in w.snaps] for w in ws] == [[102.0, 103.0, 104.0], [107.0, 108.0, 109.0, 110.0]]
    assert all(w.note is None for w in ws)


def test_each_window_has_the_figures_of_its_level() -> None:
    ticks = [(100.0 + i, 50.0 + 0.6 * i, 0.0) for i in range(11)]  # the generator's CPU 0.6 cores idle
    two, four = steps.per_step(series(), [], ticks, [2, 4], settle_s=1.0)
    assert two.duration_s == 2.0 and four.duration_s == 3.0
    assert two.client_qps == pytest.approx(20.0) and four.client_qps == pytest.approx(40.0)
    assert two.client_bytes_per_s == pytest.approx(20.0 * (1 << 20))
    assert four.client_bytes_per_s == pytest.approx(36.0 * (1 << 20))  # the failed tenth moved nothing
    assert two.client_avg_s == pytest.approx(0.04) and four.client_avg_s == pytest.approx(0.04)
    assert 0.01 < four.client_p95_s <= 0.05
    assert two.client_failure_rate == 0.0 and four.client_failure_rate == pytest.approx(0.1)
    assert two.gen_cpu_cores == pytest.approx(0.5) and four.gen_cpu_cores == pytest.approx(0.95)
    assert two.gen_cpus_idle_cores == pytest.approx(0.6)
    assert (two.gen_saturated, four.gen_saturated) == (False, True)
    warned = steps.warnings([two, four])
    assert len(warned) == 1 and warned[0].startswith("step 4 users: load generator saturated (0.95 cores")


def test_idle_generator_cpus_alone_mark_a_step_saturated() -> None:
    ticks = [(100.0 + i, 50.0 + 0.05 * i, 0.4 * i) for i in range(11)]  # 0.05 cores idle, the rest stolen
    two = steps.per_step(series(), [], ticks, [2], settle_s=1.0)[0]
    assert two.gen_cpu_cores == pytest.approx(0.5) and two.gen_saturated is True


def test_a_level_never_reached_or_too_short_has_no_figures_and_says_why() -> None:
    never, short = steps.per_step(series(), [], [], [8, 4], settle_s=0.0)[0], None
    assert never.client_qps is None and "no scrape of the generator showed all 8 users running" in never.note
    short = steps.per_step(series(), [], [], [2], settle_s=3.5)[0]
    assert short.client_qps is None and "fewer than two scrapes after the 3.5 s settle time" in short.note
    assert steps.warnings([never, short])[0].startswith("step 8 users: no figures:")


def test_a_levels_row_entry_keeps_the_keys_runs_jsonl_always_had() -> None:
    two = steps.per_step(series(), [], [], [2], settle_s=1.0)[0].to_json()
    assert list(two) == ["users", "note", "duration_s", "client_bytes_per_s", "client_qps", "client_avg_s",
                         "client_p50_s", "client_p95_s", "client_p99_s", "client_requests", "client_failures",
                         "client_failure_rate", "gen_cpu_cores", "gen_cpus_idle_cores", "gen_saturated",
                         "server_cpu_cores", "server_bytes_per_s", "rss_peak_bytes"]
    assert (two["users"], two["note"], two["client_qps"]) == (2, None, pytest.approx(20.0))


def test_loadgen_steps_hold_each_level_then_the_last() -> None:
    levels = parse_steps("50,100,200")
    assert levels == (50, 100, 200) and parse_steps("off") == () and parse_step_s("auto") is None
    at = [_profiles.users_at("step", t, 200, 100.0, levels, 20.0) for t in (0, 19.9, 20, 45, 60, 99)]
    assert at == [50, 50, 100, 200, 200, 200]
    assert _profiles.users_at("step", 30, 200, 60.0, levels) == 100  # auto: -t divided among the levels
    assert _profiles.users_at("step", 100, 200, 100.0, levels, 20.0) is None


@pytest.mark.parametrize(("text", "message"), [
    ("100,50", "level 50 does not increase on 100"),
    ("50,50", "level 50 does not increase on 50"),
    ("0,50", "level '0' is not a whole number of users"),
    ("50,abc", "level 'abc' is not a whole number of users"),
    ("50,,100", "level '' is not a whole number of users"),
    ("-5", "level '-5' is not a whole number of users"),
])
def test_bad_step_levels_are_refused_naming_the_level(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="--xfer-steps") as e:
        parse_steps(text)
    assert message in str(e.value)


def _exp(load: dict[str, object]) -> xe.Experiment:
    return xe.parse({"load": load, "servers": [{"server": "xferd-go", "load": {"transport": "frame"}}]})


STEPPED = {"profile": "step", "steps": [50, 100], "step_s": 10, "settle_s": 2}


def test_an_experiments_levels_set_users_and_duration() -> None:
    load = _exp(STEPPED).cells[0].load
    assert (load.levels, load.users, load.duration_s, load.settle_s, load.mode) == ((50, 100), 100, 20.0, 2.0, "closed")
    assert _exp({**STEPPED, "steps": "50, 100"}).cells[0].load.steps == "50,100"
    quick = _exp(STEPPED).with_overrides(quick=True).cells[0].load
    assert (quick.step_s, quick.settle_s, quick.duration_s) == ("4", 1.0, 8.0)


@pytest.mark.parametrize(("load", "message"), [
    ({**STEPPED, "steps": [100, 50]}, "load.steps = '100,50': --xfer-steps '100,50': level 50 does not increase"),
    ({**STEPPED, "steps": [0, 50]}, "level '0' is not a whole number of users"),
    ({**STEPPED, "steps": "garbage"}, "level 'garbage' is not a whole number of users"),
    ({**STEPPED, "steps": [50, "x"]}, "load.steps = [50, 'x']: expected increasing whole numbers of users"),
    ({**STEPPED, "steps": []}, "load.steps = []: expected increasing whole numbers of users"),
    ({**STEPPED, "profile": "ramp"}, 'load.steps = \'50,100\' needs load.profile = "step"'),
    ({k: v for k, v in STEPPED.items() if k != "step_s"}, "load.steps needs load.step_s"),
    ({**STEPPED, "settle_s": 10}, "want settle_s < step_s"),
    ({**STEPPED, "settle_s": -1}, "load.settle_s = -1: expected a number of seconds >= 0"),
    ({**STEPPED, "rate": "100"}, "the levels are concurrent users in a closed loop"),
    ({**STEPPED, "step_s": "0"}, "--xfer-step-s '0': want seconds each step is held"),
])
def test_bad_stepped_loads_are_refused_naming_the_field(load: dict[str, object], message: str) -> None:
    with pytest.raises(xe.ExperimentError) as e:
        _exp(load)
    assert message in str(e.value), str(e.value)


def test_the_shipped_stress_matrix_is_the_issues() -> None:
    exp = xe.load_file("netrpc-stress")
    assert [c.name for c in exp.cells] == ["go/frame/100KiB", "go/frame/1MiB", "go/frame/10MiB"]
    assert exp.repeats == 3 and not exp.duet
    for c in exp.cells:
        assert (c.server, c.transport, c.load.levels) == ("xferd-go", "frame", (50, 100, 200, 500, 1000))
        assert c.load.mix == "download:1"  # memory stays bounded: nothing is staged or stored
    assert exp.estimated_seconds() < 25 * 60


def test_a_window_starting_before_the_first_completed_call_counts_from_zero() -> None:
    """loadgen exports a method's series from its first completed call on: a 10 MiB level's (or a run's)
    window can begin before it, and what completed after is counted, not lost."""
    first = parse_text("# TYPE xfer_client_users gauge\nxfer_client_users 2\n", t=100.0)
    later = series()[4]
    got = figures.client_figures([first, later])
    assert got["client_requests"] == later.sum("xfer_client_requests_total", lambda d: d["method"] == "Download")
    assert got["client_qps"] == pytest.approx(got["client_requests"] / (later.t - 100.0))
    assert got["client_failure_rate"] == 0.0
