"""`locust -f loadgen/` refuses malformed options before any test starts (no server needed).

Each malformed option is checked in-process, through Locust's own parser with loadgen's options registered
and the start-up checks `_on_init` runs (a Locust process costs a second or more to start). A few cases
run the real `locust` command, to prove the same parser and checks are the ones it wires in."""

from __future__ import annotations

import pytest

from loadgen import command_line, option
from tests.loadgen.inprocess import accepted, refusal
from tests.loadgen.support import run_locust

BASE = ["--headless", "-u", "1", "-r", "1", "-t", "1s", "--xfer-metrics-port", "0", "--only-summary"]
HOST = ["--host", "grpc://127.0.0.1:1"]

BAD_OPTIONS = [
    (["--xfer-sizes", "10XB"], "argument --xfer-sizes: --xfer-sizes '10XB'"),
    (["--xfer-sizes", "lognormal:1MiB"], "want lognormal:MEDIAN:SIGMA[:MAX]"),
    (["--xfer-chunk", "8MiB"], "argument --xfer-chunk"),
    (["--xfer-inflight", "0"], "argument --xfer-inflight"),
    (["--xfer-grpc-inflight", "0"], "argument --xfer-grpc-inflight"),
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
]


@pytest.mark.parametrize(("args", "message"), BAD_OPTIONS)
def test_bad_option_is_rejected_before_start(args: list[str], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert message in refusal([*BASE, *HOST, *args], capsys)


@pytest.mark.parametrize(("host", "message"), [
    ("http://127.0.0.1:8089", "unknown scheme 'http'; accepted schemes: grpc, frame"),
    ("grpc://127.0.0.1", "has no port"),
])
def test_bad_host_is_rejected(host: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    err = refusal([*BASE, "--host", host], capsys)
    assert "--host: " in err and message in err, err


def test_missing_host_and_run_time_are_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    assert "--host is required: grpc://HOST:PORT or frame://HOST:PORT" in refusal(BASE, capsys)
    no_t = [a for a in BASE if a not in ("-t", "1s")]
    assert "--xfer-profile ramp needs -t/--run-time" in refusal([*no_t, *HOST, "--xfer-profile", "ramp"], capsys)


def test_good_options_pass_the_checks() -> None:
    """The in-process path accepts what a real run accepts: the refusals above come from the options."""
    cfg, transport = accepted([*BASE, *HOST, "--xfer-sizes", "64KiB,1MiB"])
    assert transport == "grpc" and cfg.profile == "steady"


GRPC_ENGINE_REMOVED = "--xfer-grpc-engine was removed: gRPC users always run on grpc.aio"


@pytest.mark.parametrize("given", [["gevent"], ["aio"], []])
def test_the_removed_grpc_engine_option_is_refused_by_name(given: list[str],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Any use of the removed option, even its former default or no value, is one line saying it was removed
    (not argparse's "unrecognized arguments")."""
    err = refusal([*BASE, *HOST, "--xfer-grpc-engine", *given], capsys)
    (line,) = [ln for ln in err.splitlines() if "error:" in ln]
    assert line.endswith(GRPC_ENGINE_REMOVED + " (the former gevent path reached about 1% of ghz's rate; "
                         'BENCHMARKS.md "Locust users vs ghz")'), err
    assert "unrecognized" not in err, err


def test_the_removed_grpc_engine_option_is_refused_from_the_environment(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LOCUST_XFER_GRPC_ENGINE", "gevent")
    assert GRPC_ENGINE_REMOVED in refusal([*BASE, *HOST], capsys)


def test_the_runner_is_told_the_grpc_engine_option_was_removed() -> None:
    """An experiment's [load] key reaches the Locust command line through command_line/option."""
    with pytest.raises(KeyError, match=GRPC_ENGINE_REMOVED):
        option("grpc_engine")
    with pytest.raises(KeyError, match=GRPC_ENGINE_REMOVED):
        command_line({"sizes": "1MiB", "grpc_engine": "aio"})
    with pytest.raises(KeyError, match="no option --xfer-grpc-engines; known: sizes"):
        option("grpc_engines")  # a mistyped name still lists the known ones


@pytest.mark.parametrize(("args", "message"), [
    ([*BASE, *HOST, "--xfer-sizes", "10XB"], "argument --xfer-sizes: --xfer-sizes '10XB'"),  # argparse
    ([*BASE, *HOST, "--xfer-grpc-engine", "gevent"], GRPC_ENGINE_REMOVED),  # argparse, loadgen's own action
    ([*BASE, "--host", "grpc://127.0.0.1"], "has no port"),  # start_checks, from Locust's init event
    ([a for a in BASE if a not in ("-t", "1s")] + [*HOST, "--xfer-profile", "ramp"],
     "--xfer-profile ramp needs -t/--run-time"),
])
def test_the_locust_command_refuses_the_same_way(args: list[str], message: str) -> None:
    r = run_locust(args, timeout=60)
    assert r.returncode == 2, r.stderr[-2000:]
    assert message in r.stderr, r.stderr[-2000:]
    assert "xfer-metrics role=" not in r.stderr  # stopped before any Locust process started


def test_checking_in_process_leaves_this_process_unpatched() -> None:
    """Locust's import would patch the pytest process with gevent (tests/loadgen/inprocess.py says why not)."""
    from gevent import monkey

    assert accepted([*BASE, *HOST])[1] == "grpc"
    assert not any(monkey.is_module_patched(m) for m in ("socket", "threading", "ssl", "subprocess"))
