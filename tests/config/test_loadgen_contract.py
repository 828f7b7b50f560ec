"""The runner and loadgen share one declaration of the --xfer-* options: an experiment's [load] values are
checked by the options' own parsers, and the runner's Locust command line is built from them."""

from __future__ import annotations

import itertools

import pytest

import loadgen
from xferbench import config as xe
from xferbench.run.generators import locust_argv


def _exp(load: dict[str, object]) -> xe.Experiment:
    return xe.parse({"load": load, "servers": [{"server": "xferd-go"}]})


def test_loadgen_keys_are_the_load_keys_loadgen_declares() -> None:
    assert set(xe.LOADGEN_KEYS) == {"sizes", "chunk", "inflight", "verify", "profile", "mix", "rate", "echo_size",
                                    "meta_entries", "meta_size", "grpc_inflight", "connections",
                                    "steps", "step_s", "call", "data", "proto", "import_path", "protoset"}
    assert all(loadgen.option(k).flag == "--xfer-" + k.replace("_", "-") for k in xe.LOADGEN_KEYS)


def test_values_locust_takes_are_taken() -> None:
    load = _exp({"mix": "upload:1.5,echo:0.5", "verify": True, "inflight": 16, "chunk": 65536,
                 "sizes": "lognormal:64KiB:1", "rate": "poisson:50"}).cells[0].load
    assert (load.mix, load.verify, load.inflight, load.chunk, load.sizes, load.rate) == (
        "upload:1.5,echo:0.5", "on", 16, "65536", "lognormal:64KiB:1", "poisson:50")
    assert load.mode == "open"
    assert _exp({"connections": "pool:4"}).cells[0].load.connections == "pool:4"
    assert _exp({"rate": "off"}).cells[0].load.rate is None  # loadgen's "off": a closed loop


@pytest.mark.parametrize(("load", "message"), [
    ({"mix": "upload:x"}, "load.mix = 'upload:x': --xfer-mix 'upload:x': weight 'x' of upload"),
    ({"sizes": "4KB"}, "load.sizes = '4KB': --xfer-sizes '4KB': size '4KB' is not a size"),
    ({"verify": "maybe"}, "load.verify = 'maybe': --xfer-verify 'maybe': want on or off"),
    ({"inflight": True}, "load.inflight = True: --xfer-inflight True: true/false is not a value of this option"),
    ({"profile": ["steady"]}, "load.profile = ['steady']: expected a string or a number"),
    ({"connections": "pool:0"}, "load.connections = 'pool:0': --xfer-connections 'pool:0': want user"),
    ({"connections": "pool:x"}, "load.connections = 'pool:x': --xfer-connections 'pool:x': want user"),
    ({"connections": "foo"}, "load.connections = 'foo': --xfer-connections 'foo': want user"),
])
def test_values_locust_refuses_are_refused_with_its_message(load: dict[str, object], message: str) -> None:
    with pytest.raises(xe.ExperimentError) as e:
        _exp(load)
    assert message in str(e.value), str(e.value)


def test_locust_command_line_is_derived_from_the_declaration() -> None:
    load = _exp({"mix": "echo:2", "sizes": "1MiB", "chunk": "256KiB", "inflight": 2, "verify": False,
                 "profile": "ramp"}).cells[0].load
    argv = locust_argv("grpc://127.0.0.1:1", load, 9999, 10)
    flags = dict(itertools.pairwise(argv))  # each flag -> the word after it
    assert {f: flags[f] for f in ("--xfer-mix", "--xfer-sizes", "--xfer-chunk", "--xfer-inflight", "--xfer-verify",
                                  "--xfer-profile", "--xfer-metrics-port")} == {
        "--xfer-mix": "echo:2", "--xfer-sizes": "1MiB", "--xfer-chunk": "256KiB", "--xfer-inflight": "2",
        "--xfer-verify": "off", "--xfer-profile": "ramp", "--xfer-metrics-port": "9999"}
    assert "--xfer-rate" not in argv  # a closed loop: no rate
    assert argv[argv.index("-f") + 1].endswith("loadgen")
    with pytest.raises(ValueError, match="--xfer-inflight"):
        loadgen.command_line({"inflight": 0})
    with pytest.raises(KeyError, match="no option --xfer-colour"):
        loadgen.command_line({"colour": "red"})
