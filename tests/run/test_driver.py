"""`[load] driver = "xferload"`: a short real sweep on both servers with xferload as the generator gives rows
with QPS, latency percentiles and generator CPU, whose client counts agree with the server's /metrics; and
every [load] combination xferload cannot honour is refused when the experiment is read, naming the key."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tests.support.runs import experiment_file, one_round
from xferbench import config as xe
from xferbench.run import generators as generator
from xferbench.run import sweep

SWEEP = one_round("driver").replace("[load]\n", "warmup_s = 1\n[load]\n") + """users = 2
spawn_rate = 2
inflight = 4
duration_s = 3
mix = "meta:1"
meta_entries = "16"
rate = "400"
driver = "xferload"
[[servers]]
server = "xferd-go"
[[servers]]
server = "xferd-c"
"""


def test_xferload_sweep_on_both_servers(tmp_path: Path) -> None:
    exp = experiment_file(tmp_path / "driver.toml", SWEEP)
    res = sweep.sweep(exp, tmp_path / "run")
    assert [r.status for r in res.rows] == ["ok", "ok"], [(r.error, r.stderr_tail) for r in res.rows]
    for r in res.rows:
        assert r.pids and "xferload" in r.pids and "locust" not in r.pids
        assert r.client_qps is not None and 0.9 * 400 < r.client_qps < 1.1 * 400, r.client_qps
        assert r.client_p50_s is not None and r.client_p95_s is not None and r.client_p99_s is not None
        assert 0 < r.client_p50_s <= r.client_p95_s <= r.client_p99_s < 1
        assert r.gen_cpu_cores is not None and r.gen_cpu_cores > 0
        assert r.gen_cpu_cores_psutil is not None and r.gen_cpu_cores_psutil > 0
        assert not r.client_failures
        # The server's own count of the same window: the same calls, but for the window's edges.
        assert r.server_qps is not None and abs(r.client_qps / r.server_qps - 1) < 0.1, (r.client_qps, r.server_qps)
        assert (r.client_methods or {}).keys() == {"Meta"}


BASE = {"mix": '"meta:1"', "driver": '"xferload"', "users": "2", "spawn_rate": "2"}


@pytest.mark.parametrize(("extra", "named"), [
    ({"transport": '"grpc"'}, "load.transport = 'grpc': xferload speaks the frame protocol only"),
    ({"mix": '"meta:1,echo:1"'}, "xferload runs one method per process"),
    ({"profile": '"ramp"'}, "load.profile = 'ramp'"),
    ({"mix": '"upload:1"'}, "with xferload the runner drives echo or meta"),
    ({"rate": '"poisson:100"'}, "xferload sends at constant intervals"),
    ({"mix": '"echo:1"', "echo_size": '"64,128"'}, "xferload sends one payload size"),
    ({"spawn_rate": "1"}, "xferload opens every connection at once"),
    ({"grpc_inflight": '"4"'}, "load.grpc_inflight"),
    ({"driver": '"locust"', "frame_codec": '"gob"'},
     'load.driver = "locust": load.frame_codec = \'gob\': locust has no gob client'),
    ({"driver": '"wrk"'}, 'expected "locust" | "xferload"'),
    ({"frame_codec": '"json"'}, 'expected "protobuf" | "gob"'),
])
def test_bad_combinations_are_refused(extra: dict[str, str], named: str) -> None:
    keys = {**BASE, **extra}
    text = one_round("bad") + "".join(f"{k} = {v}\n" for k, v in keys.items()) + '[[servers]]\nserver = "xferd-go"\n'
    if "transport" in extra:
        text = text.replace('transport = "frame"\n', "", 1)
    with pytest.raises(xe.ExperimentError) as info:
        xe.parse(tomllib.loads(text), "bad.toml")
    assert named in str(info.value), str(info.value)


def test_xferload_command_maps_the_load() -> None:
    load = xe.Load(users=3, inflight=5, mix="meta:1", rate="constant:250", meta_entries="32", meta_size="4-8",
                   transport="frame", driver="xferload", spawn_rate=3)
    argv = generator.XferloadGenerator.command("frame://127.0.0.1:7071", load, 9999, 20)
    assert argv[0] == str(generator.XFERLOAD)
    flags = dict(zip(argv[1::2], argv[2::2], strict=False))
    assert flags["--addr"] == "127.0.0.1:7071" and flags["--metrics-addr"] == "127.0.0.1:9999"
    assert flags["--method"] == "meta" and flags["--conns"] == "3" and flags["--inflight"] == "5"
    assert flags["--rate"] == "250" and flags["--entries"] == "32" and flags["--entry-size"] == "4-8"
    assert "--codec" not in argv  # the default codec needs no flag
    gob = xe.xferload_args(xe.Load(mix="echo:1", transport="frame", driver="xferload", frame_codec="gob",
                                   users=1, spawn_rate=1))
    assert gob[-2:] == ["--codec", "gob"]
