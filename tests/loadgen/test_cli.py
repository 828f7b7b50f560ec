"""`locust -f loadgen/` refuses malformed options before any test starts (no server needed)."""

from __future__ import annotations

import pytest

from tests.loadgen.support import run_locust

BASE = ["--headless", "-u", "1", "-r", "1", "-t", "1s", "--xfer-metrics-port", "0", "--only-summary"]
HOST = ["--host", "grpc://127.0.0.1:1"]


@pytest.mark.parametrize(("args", "message"), [
    (["--xfer-sizes", "10XB"], "argument --xfer-sizes: --xfer-sizes '10XB'"),
    (["--xfer-sizes", "lognormal:1MiB"], "want lognormal:MEDIAN:SIGMA[:MAX]"),
    (["--xfer-chunk", "8MiB"], "argument --xfer-chunk"),
    (["--xfer-inflight", "0"], "argument --xfer-inflight"),
    (["--xfer-grpc-inflight", "0"], "argument --xfer-grpc-inflight"),
    (["--xfer-grpc-engine", "threads"], "--xfer-grpc-engine 'threads': want aio"),
    (["--xfer-verify", "maybe"], "--xfer-verify 'maybe': want on or off"),
    (["--xfer-profile", "wave"], "--xfer-profile 'wave': want one of steady, ramp, step, spike, soak"),
    (["--xfer-mix", "upload:1,stat:1"], "argument --xfer-mix"),
    (["--xfer-mix", "upload:0"], "every weight is 0"),
    (["--xfer-rate", "gauss:10"], "argument --xfer-rate"),
    (["--xfer-check", "p95<fast"], "argument --xfer-check"),
    (["--xfer-metrics-port", "99999"], "argument --xfer-metrics-port"),
    (["--xfer-timeout", "0"], "argument --xfer-timeout"),
    (["--xfer-meta-entries", "-1"], "--xfer-meta-entries '-1': want a whole number of entries"),
    (["--xfer-meta-size", "64-8"], "--xfer-meta-size '64-8': want MIN-MAX bytes"),
    (["--xfer-meta-size", "8-300"], "--xfer-meta-size '8-300'"),
])
def test_bad_option_is_rejected_before_start(args: list[str], message: str) -> None:
    r = run_locust([*BASE, *HOST, *args], timeout=60)
    assert r.returncode == 2, r.stderr[-2000:]
    assert message in r.stderr, r.stderr[-2000:]
    assert "xfer-metrics role=" not in r.stderr  # stopped before any Locust process started


@pytest.mark.parametrize(("host", "message"), [
    ("http://127.0.0.1:8089", "unknown scheme 'http'; accepted schemes: grpc, frame"),
    ("grpc://127.0.0.1", "has no port"),
])
def test_bad_host_is_rejected(host: str, message: str) -> None:
    r = run_locust([*BASE, "--host", host], timeout=60)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "--host: " in r.stderr and message in r.stderr, r.stderr[-2000:]


def test_missing_host_and_run_time_are_rejected() -> None:
    r = run_locust(BASE, timeout=60)
    assert r.returncode == 2 and "--host is required: grpc://HOST:PORT or frame://HOST:PORT" in r.stderr
    no_t = [a for a in BASE if a not in ("-t", "1s")]
    r = run_locust([*no_t, *HOST, "--xfer-profile", "ramp"], timeout=60)
    assert r.returncode == 2 and "--xfer-profile ramp needs -t/--run-time" in r.stderr, r.stderr[-2000:]
