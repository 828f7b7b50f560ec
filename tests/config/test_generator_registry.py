"""The load-driver registry (xferbench/config/drivers.py): every entry is complete and has its Generator; what an
entry says a driver lacks is refused when the experiment is read, naming the driver and the [load] key, and
what it says the driver has is accepted. Each capability is also taken away from a driver that has them all
(Locust speaking gob too), so the one generic check is shown to refuse every capability a future entry may
lack."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import pytest

from loadgen._options import PROFILES
from xferbench import config as xe
from xferbench.config import drivers
from xferbench.config.drivers import DRIVERS, DriverSpec
from xferbench.config.servers import CALLS
from xferbench.run import generators

LOCUST = DRIVERS["locust"]
ALL = replace(LOCUST, frame_codecs=("protobuf", "gob"))  # every capability: each probe takes one away
# A load every driver runs: one method, over frames, all users started at once. Each probe adds to it.
BASE: dict[str, Any] = {"transport": "frame", "mix": "meta:1", "users": 2, "spawn_rate": 2}


@dataclass(frozen=True)
class Probe:
    """A [load] that needs one capability: whether an entry has it, and the entry without it."""

    name: str
    load: dict[str, Any]
    key: str  # the [load] key a refusal names
    has: Callable[[DriverSpec], bool]
    without: Callable[[DriverSpec], DriverSpec]


def _probes(locustfile: str) -> list[Probe]:
    per_profile = [
        Probe(f"profile={p}", {"profile": p}, "profile", lambda d, p=p: p in d.profiles,
              lambda d, p=p: replace(d, profiles=tuple(x for x in d.profiles if x != p)))
        for p in PROFILES
    ]
    per_call = [
        Probe(f"call={c}", {"mix": f"{c}:1"}, "mix", lambda d, c=c: c in d.calls,
              lambda d, c=c: replace(d, calls=tuple(x for x in d.calls if x != c)))
        for c in CALLS
    ]
    grpc = {"transport": "grpc"}
    return [
        *(Probe(f"transport={t}", {"transport": t}, "transport", lambda d, t=t: t in d.transports,
                lambda d, t=t: replace(d, transports=tuple(x for x in d.transports if x != t)))
          for t in xe.TRANSPORTS),
        Probe("grpc_inflight", {"grpc_inflight": "4"}, "grpc_inflight", lambda d: "grpc" in d.transports,
              lambda d: replace(d, transports=("frame",))),
        Probe("frame_codec=gob", {"frame_codec": "gob"}, "frame_codec", lambda d: "gob" in d.frame_codecs,
              lambda d: replace(d, frame_codecs=("protobuf",))),
        Probe("call", {**grpc, "call": "xfer.v1.FileTransfer/Echo"}, "call", lambda d: d.call,
              lambda d: replace(d, call=False)),
        Probe("locustfile", {"locustfile": locustfile}, "locustfile", lambda d: d.locustfile,
              lambda d: replace(d, locustfile=False)),
        Probe("processes", {"processes": 2}, "processes", lambda d: d.processes, lambda d: replace(d, processes=False)),
        Probe("hosts", {"hosts": ["gen1"]}, "hosts", lambda d: d.hosts, lambda d: replace(d, hosts=False)),
        *per_profile,
        Probe("mix", {"mix": "meta:1,echo:1"}, "mix", lambda d: d.mix, lambda d: replace(d, mix=False)),
        *per_call,
        Probe("open loop", {"rate": "100"}, "rate", lambda d: d.open_loop, lambda d: replace(d, open_loop=False)),
        Probe("closed loop", {"mode": "closed"}, "mode", lambda d: d.closed_loop,
              lambda d: replace(d, closed_loop=False)),
        Probe("poisson", {"rate": "poisson:100"}, "rate", lambda d: d.poisson, lambda d: replace(d, poisson=False)),
        Probe("capacity", {"mode": "capacity", "rate": "100", "slo_p99": "20ms"}, "mode", lambda d: d.capacity,
              lambda d: replace(d, capacity=False)),
        Probe("echo sizes", {"mix": "echo:1", "echo_size": "64,128"}, "echo_size", lambda d: d.echo_sizes,
              lambda d: replace(d, echo_sizes=False)),
        Probe("gradual start", {"users": 4, "spawn_rate": 1}, "spawn_rate", lambda d: d.gradual_start,
              lambda d: replace(d, gradual_start=False)),
        Probe("inflight 300", {"inflight": 300}, "inflight",
              lambda d: d.max_inflight is None or d.max_inflight >= 300, lambda d: replace(d, max_inflight=256)),
    ]


@pytest.fixture
def probes(tmp_path: Path) -> list[Probe]:
    locustfile = tmp_path / "users.py"
    locustfile.write_text("from locust import User\n\n\nclass Idle(User):\n    pass\n")
    return _probes(str(locustfile))


def _parse(driver: str, load: dict[str, Any]) -> xe.Experiment:
    doc = {"experiment": {"name": "drivers", "repeats": 1, "duet": False},
           "load": {**BASE, **load, "driver": driver}, "servers": [{"server": "xferd-go"}],
           "hosts": {"gen1": {"ssh": "root@10.0.0.2"}}}  # the "hosts" probe's
    return xe.parse(doc, "drivers.toml")


def test_every_entry_is_complete_and_has_its_generator() -> None:
    assert set(generators.GENERATORS) == set(DRIVERS)
    for name, spec in DRIVERS.items():
        assert spec.name == name and generators.generator_class(name).name == name
        assert spec.transports and set(spec.transports) <= set(xe.TRANSPORTS), name
        assert spec.calls and set(spec.calls) <= set(CALLS), name
        assert "steady" in spec.profiles and set(spec.profiles) <= set(PROFILES), name
        assert "protobuf" in spec.frame_codecs, name
        assert spec.open_loop or spec.closed_loop, name
        assert set(spec.why) <= set(drivers.CHECKS), (name, spec.why)
        assert _parse(name, {}).cells[0].load.driver == name  # the schema knows every entry by its name
    with pytest.raises(KeyError, match=r"unknown driver 'wrk'; known: locust \| xferload"):
        generators.generator_class("wrk")


def test_every_capability_has_a_probe(probes: list[Probe]) -> None:
    """A field added to DriverSpec without a probe here (and a check in drivers.CHECKS) fails this test."""
    capabilities = {f.name for f in fields(DriverSpec)} - {"name", "why"}
    probed = {f.name for p in probes for f in fields(DriverSpec)
              if getattr(p.without(ALL), f.name) != getattr(ALL, f.name)}
    assert probed == capabilities
    assert all(p.has(ALL) and not p.has(p.without(ALL)) for p in probes)


def test_each_entry_refuses_what_it_lacks_and_accepts_what_it_has(probes: list[Probe]) -> None:
    for name, spec in DRIVERS.items():
        for p in probes:
            if p.has(spec):
                assert _parse(name, p.load).cells[0].load.driver == name, (name, p.name)
                continue
            with pytest.raises(xe.ExperimentError) as info:
                _parse(name, p.load)
            said = str(info.value)
            assert f'load.driver = "{name}": load.' in said and "\n" not in said, (p.name, said)


def test_each_capability_taken_away_is_refused_naming_driver_and_key(
    probes: list[Probe], monkeypatch: pytest.MonkeyPatch
) -> None:
    for p in probes:
        monkeypatch.setitem(DRIVERS, "locust", p.without(ALL))
        with pytest.raises(xe.ExperimentError) as info:
            _parse("locust", p.load)
        said = str(info.value)
        assert f'drivers.toml: servers[0]: load.driver = "locust": load.{p.key} = ' in said, (p.name, said)
        if p.has(DRIVERS["xferload"]):  # the refusal names the drivers that can
            assert said.endswith('use driver = "xferload"'), (p.name, said)
    monkeypatch.setitem(DRIVERS, "locust", ALL)  # nothing taken away: each of the same loads is accepted
    for p in probes:
        assert _parse("locust", p.load).cells[0].load.driver == "locust", p.name


def test_xferload_refusals_say_why_and_name_locust() -> None:
    with pytest.raises(xe.ExperimentError) as info:
        _parse("xferload", {"mix": "download:1"})
    assert str(info.value) == (
        "drivers.toml: servers[0]: load.driver = \"xferload\": load.mix = 'download:1': with xferload the runner "
        "drives echo or meta (its upload and download calls are single frames, while loadgen's are whole "
        'transfers, so their figures would not compare); use driver = "locust"'
    )
