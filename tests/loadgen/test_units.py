"""Unit tests of loadgen's modules: option parsing, histograms, snapshots, the exporter, profiles."""

from __future__ import annotations

import math
import random

import pytest
from prometheus_client import generate_latest

from loadgen import _checks as xc
from loadgen import _exporter
from loadgen import _options as xo
from loadgen import _profiles as xp
from loadgen import _recorder as xm
from tests.loadgen.support import parse_prom, total


def test_sizes_list_and_distributions() -> None:
    rng = random.Random(1)
    spec = xo.parse_sizes("64KiB,1MiB,10MiB")
    assert spec.values == (65536, 1 << 20, 10 << 20) and spec.max_size == 10 << 20
    assert {spec.pick(rng) for _ in range(200)} == set(spec.values)
    weighted = xo.parse_sizes("1KiB*9,2KiB")
    picks = [weighted.pick(rng) for _ in range(2000)]
    assert 0.85 < picks.count(1024) / len(picks) < 0.95
    uni = xo.parse_sizes("uniform:1KiB:2KiB")
    assert all(1024 <= uni.pick(rng) <= 2048 for _ in range(200))
    ln = xo.parse_sizes("lognormal:1MiB:2")
    assert ln.max_size == 64 << 20
    vals = sorted(ln.pick(rng) for _ in range(4001))
    assert 0.8 * (1 << 20) < vals[2000] < 1.25 * (1 << 20)  # the median
    assert all(1 <= v <= 64 << 20 for v in vals)
    assert xo.parse_sizes("lognormal:1MiB:0.5:4MiB").max_size == 4 << 20


@pytest.mark.parametrize("text", ["", "1MiB,", "lognormal:1MiB", "lognormal:1MiB:x", "lognormal:0:1",
                                  "uniform:2MiB:1MiB", "pareto:1:2", "1MiB*0", "1MiB*x", "2GiB"])
def test_sizes_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r"--xfer-sizes .*a list of sizes"):
        xo.parse_sizes(text)


def test_small_options() -> None:
    assert xo.parse_chunk("64KiB") == 65536
    for bad in ("0", "5MiB", "x"):
        with pytest.raises(ValueError, match="--xfer-chunk"):
            xo.parse_chunk(bad)
    assert xo.parse_inflight("16") == 16
    for bad in ("0", "-1", "x", "2000"):
        with pytest.raises(ValueError, match="--xfer-inflight"):
            xo.parse_inflight(bad)
    assert xo.parse_grpc_inflight("4") == 4
    for bad in ("0", "x", "1025"):
        with pytest.raises(ValueError, match="--xfer-grpc-inflight"):
            xo.parse_grpc_inflight(bad)
    assert xo.parse_verify("on") is True and xo.parse_verify("off") is False
    with pytest.raises(ValueError, match="--xfer-verify 'maybe': want on or off"):
        xo.parse_verify("maybe")
    assert xo.parse_profile("spike") == "spike"
    with pytest.raises(ValueError, match="--xfer-profile 'flat': want one of steady, ramp"):
        xo.parse_profile("flat")
    assert xo.parse_rate("off") is None and xo.parse_rate("") is None
    assert xo.parse_rate("100") == xo.Rate(100.0, False)
    assert xo.parse_rate("poisson:2.5") == xo.Rate(2.5, True)
    for bad in ("0", "poisson:", "gauss:3", "-5"):
        with pytest.raises(ValueError, match="--xfer-rate"):
            xo.parse_rate(bad)
    assert xo.parse_metrics_port("0") == 0 and xo.parse_metrics_port("off") is None
    with pytest.raises(ValueError, match="--xfer-metrics-port"):
        xo.parse_metrics_port("70000")


def test_mix() -> None:
    assert xo.parse_mix("upload:1,download:1,echo:1") == {"upload": 1, "download": 1, "echo": 1, "meta": 0}
    assert xo.parse_mix("echo:3") == {"upload": 0, "download": 0, "echo": 3, "meta": 0}
    assert xo.parse_mix("meta:1") == {"upload": 0, "download": 0, "echo": 0, "meta": 1}
    for bad in ("upload:0,echo:0", "stat:1", "upload", "upload:-1", "upload:1,upload:2", "echo:x"):
        with pytest.raises(ValueError, match="--xfer-mix"):
            xo.parse_mix(bad)


def test_checks() -> None:
    cs = xc.parse_checks("failures==0, p95<2s,p99(Echo)<=50ms,p99.9<1.5,failure_ratio<1%,rps>=10,cpu<90%")
    assert [c.metric for c in cs] == ["failures", "quantile", "quantile", "quantile", "failure_ratio",
                                      "rps", "cpu"]
    assert cs[1].value == 2.0 and cs[1].quantile == 0.95
    assert cs[2].method == "Echo" and math.isclose(cs[2].value, 0.05)
    assert math.isclose(cs[3].quantile, 0.999)
    assert math.isclose(cs[4].value, 0.01)
    assert math.isclose(cs[6].value, 0.9)  # cpu in cores: 90% of one core
    assert math.isclose(xc.parse_checks("cpu<0.9")[0].value, 0.9)
    # Times are durations in the one grammar (py_client/durations.py): compound terms, no other unit spelling.
    assert xc.parse_checks("max<1m30s")[0].value == 90.0 and math.isclose(xc.parse_checks("avg<20us")[0].value, 2e-5)
    assert cs[0].holds(0) and not cs[0].holds(1)
    for bad in ("p95", "p95<<2", "failures(Echo)==0", "p95(Stat)<1s", "p0<1s", "p95<2%", "latency<1",
                "requests<5ms", "p95<2µs", "p95<1m30", "p95<2 s"):
        with pytest.raises(ValueError, match="--xfer-check"):
            xc.parse_checks(bad)
    assert xc.parse_checks("") == []


def test_bounds_contain_protocol_bounds() -> None:
    assert set(map(float, xm.PROTOCOL_BOUNDS)) <= set(xm.BOUNDS)
    assert list(xm.BOUNDS) == sorted(set(xm.BOUNDS))
    assert xm.BOUNDS[0] == 0.00001 and 10.0 in xm.BOUNDS


def test_fine_histogram_quantiles_within_one_percent() -> None:
    rng = random.Random(7)
    values = [rng.lognormvariate(math.log(0.003), 1.0) for _ in range(20000)]
    s = xm.Series()
    for v in values:
        s.observe(v, True)
    values.sort()
    for q in (0.5, 0.9, 0.95, 0.99, 0.999):
        exact = values[math.ceil(q * len(values)) - 1]
        assert abs(xm.quantile([s], q) / exact - 1) < 0.01, q
    assert xm.quantile([s], 1.0) == pytest.approx(values[-1], rel=0.01)
    assert math.isnan(xm.quantile([xm.Series()], 0.5))


def test_snapshot_wire_merge_and_export() -> None:
    a, b = xm.Recorder(), xm.Recorder()
    for i in range(10):
        a.observe("grpc", "Echo", 0.001 * (i + 1), "ok")
        b.observe("grpc", "Echo", 0.002, "ok" if i % 2 == 0 else "unavailable")
    a.add_bytes("upload", 100)
    a.verify("Upload", True)
    back = xm.Snapshot.from_wire(b.total.to_wire())
    assert back.series[("grpc", "Echo")].err == 5 and back.errors[("grpc", "Echo", "unavailable")] == 5
    merged = xm.Snapshot().add(a.total).add(back)
    s = merged.series[("grpc", "Echo")]
    assert (s.ok, s.err, s.count) == (15, 5, 20)
    assert merged.codes("grpc", "Echo") == {"ok": 15, "unavailable": 5}
    a.new_run()
    a.observe("grpc", "Echo", 0.5, "ok")
    assert a.run.series[("grpc", "Echo")].count == 1 and a.total.series[("grpc", "Echo")].count == 11
    assert a.run.series[("grpc", "Echo")].max == 0.5  # a run's own maximum, not the process's

    collector = _exporter.ClientCollector(lambda: merged, lambda: [_exporter.gauge("xfer_client_users", "", 3)])
    samples = parse_prom(generate_latest(_exporter.registry(collector, with_process=False)).decode())
    # The outcome label is `code`, with PROTOCOL.md's values: ok, or the error code.
    assert total(samples, "xfer_client_requests_total", method="Echo", code="ok") == 15
    assert total(samples, "xfer_client_requests_total", method="Echo", code="unavailable") == 5
    assert not any("result" in lab for n, lab, _v in samples if n == "xfer_client_requests_total")
    assert total(samples, "xfer_client_request_duration_seconds_count", method="Echo") == 20
    assert total(samples, "xfer_client_request_duration_seconds_bucket", method="Echo", le="0.002") == 12
    assert total(samples, "xfer_client_request_duration_seconds_bucket", method="Echo", le="+Inf") == 20
    assert total(samples, "xfer_client_request_duration_seconds_sum", method="Echo") == pytest.approx(
        sum(0.001 * (i + 1) for i in range(10)) + 10 * 0.002)
    assert total(samples, "xfer_client_errors_total", method="Echo", code="unavailable") == 5
    assert total(samples, "xfer_client_transfer_bytes_total", direction="upload") == 100
    assert total(samples, "xfer_client_users") == 3
    assert total(samples, "xfer_client_verifications_total", method="Upload", result="ok") == 1


def test_profiles() -> None:
    # ramp: 1 -> 20 over 20 s, then 20 until 40 s, then over
    assert xp.users_at("ramp", 0, 20, 40) == 1
    assert xp.users_at("ramp", 10, 20, 40) == 10
    assert xp.users_at("ramp", 19.9, 20, 40) == 19
    assert xp.users_at("ramp", 25, 20, 40) == 20
    assert xp.users_at("ramp", 40, 20, 40) is None
    assert [xp.users_at("step", t, 10, 50) for t in (0, 10, 20, 30, 49)] == [2, 4, 6, 8, 10]
    assert [xp.users_at("spike", t, 10, 100) for t in (0, 39, 40, 59, 60, 99)] == [2, 2, 10, 10, 2, 2]
    assert xp.users_at("steady", 1e6, 7, None) == 7
    assert xp.users_at("soak", 3, 10, 600) == 1 and xp.users_at("soak", 60, 10, 600) == 10
    with pytest.raises(ValueError, match="needs -t"):
        xp.users_at("ramp", 0, 10, None)
    assert xp.spawn_rate_for("ramp", 20, 1, 40) == 1
    assert xp.spawn_rate_for("ramp", 100, 1, 40) == 5
