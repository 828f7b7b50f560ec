"""The Python side of the one duration grammar (docs/DESIGN.md, "Sizes, durations and units"): the one Python
duration parser (py_client.durations, used by the runner's experiment TOML, the xferbench CLI, loadgen and
py_client) passes proto/testdata/duration.vectors, as the Go and C servers' unit tests do."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

import loadgen
from py_client import cli as py_cli
from py_client.durations import parse_duration, parse_duration_us
from xferbench import cli as xb_cli
from xferbench import config as xe

VECTORS = Path(__file__).resolve().parents[2] / "proto" / "testdata" / "duration.vectors"


def vectors() -> list[tuple[str, int | None]]:
    """(input, microseconds) per line; None where the input is not a duration. `-` is the empty input."""
    out: list[tuple[str, int | None]] = []
    for line in VECTORS.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        text, want = line.split("\t")
        if want == "error":
            out.append(("" if text == "-" else text, None))
            continue
        us = Decimal(want) * 1_000_000
        assert us == us.to_integral_value(), f"duration.vectors: {want} s is not whole microseconds"
        out.append(("" if text == "-" else text, int(us)))
    return out


def disagreements(parse_us: Callable[[str], int]) -> list[str]:
    out = []
    for text, want in vectors():
        try:
            got: int | None = parse_us(text)
        except ValueError:
            got = None
        if got != want:
            out.append(f"{text!r}: got {got} us, want {'an error' if want is None else f'{want} us'}")
    return out


def test_the_vectors_cover_the_grammar() -> None:
    vs = dict(vectors())
    assert vs["10"] == 10_000_000 and vs["1m30s"] == vs["90s"] == 90_000_000 and vs["500ms"] == 500_000
    assert vs["1h"] == 3_600_000_000 and vs["1.5s"] == 1_500_000 and vs["20us"] == 20
    assert vs["2562047h47m16.854775s"] == (2**63 - 1) // 1000
    assert all(vs[bad] is None for bad in ("", "1s1m", "1m1m", "-1s", " 1s", "1S", "s", "1m30", "1µs", "1ns"))


def test_the_python_parser_passes_the_vectors() -> None:
    problems = disagreements(parse_duration_us)
    assert not problems, ("py_client.durations.parse_duration_us differs from proto/testdata/duration.vectors:\n"
                          + "\n".join(problems))


def test_toml_numbers_are_seconds() -> None:
    assert parse_duration(15) == 15.0 and parse_duration(0.02) == 0.02 and parse_duration_us(1e-05) == 10
    for bad in (True, -1, -0.5, float("inf"), float("nan"), 1e-7, 1e20):
        with pytest.raises(ValueError, match="duration"):
            parse_duration(bad)


def test_every_user_of_durations_shares_the_grammar() -> None:
    # loadgen options: bare seconds as before, and now the units too; their messages are kept
    assert loadgen.option("timeout").parse("15") == 15.0 and loadgen.option("timeout").parse("1m30s") == 90.0
    assert loadgen.option("step_s").parse("2m") == 120.0
    with pytest.raises(ValueError, match="--xfer-timeout '1s1m': want seconds per call"):
        loadgen.option("timeout").parse("1s1m")
    # experiment TOML: [experiment], [load], [network] and server flags
    exp = xe.parse({"experiment": {"warmup_s": "30s"}, "load": {"duration_s": "2m", "slo_p99": "500us"},
                    "network": {"latency": "1s20ms"},
                    "servers": [{"server": "xferd-go", "flags": {"read-timeout": "1m30s", "drain-timeout": 10}}]})
    assert exp.warmup_s == 30.0 and exp.cells[0].load.duration_s == 120.0 and exp.cells[0].load.slo_p99 == 0.0005
    assert exp.cells[0].flags == {"read-timeout": "90000ms", "drain-timeout": "10000ms"}
    assert exp.network is not None and exp.network.latency_ms == 1020
    with pytest.raises(xe.ExperimentError, match=r"servers\[0\]\.flags\.read-timeout = '1s1m'"):
        xe.parse({"servers": [{"server": "xferd-go", "flags": {"read-timeout": "1s1m"}}]})
    with pytest.raises(xe.ExperimentError, match=r"load\.duration_s = '2 m'"):
        xe.parse({"load": {"duration_s": "2 m"}, "servers": [{"server": "xferd-go"}]})
    # the xferbench CLI and py_client's CLI
    assert xb_cli.build_parser().parse_args(["run", "quick", "--budget", "1h30m"]).budget == 5400.0
    args = py_cli.build_parser().parse_args(["stat", "--target", "grpc://127.0.0.1:1", "--name", "x", "--timeout",
                                             "1m"])
    assert args.timeout == 60.0
    with pytest.raises(SystemExit):
        py_cli.build_parser().parse_args(["stat", "--target", "grpc://127.0.0.1:1", "--name", "x", "--timeout", "1S"])
