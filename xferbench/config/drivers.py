"""The load-driver registry: one entry per `[load] driver`, saying what that generator can do.

The schema reads an entry to refuse, while the experiment is read, a cell whose load the driver cannot run
(`check`: one check per capability, naming the driver, what it cannot do and the drivers that can), and
xferbench/run/generators.py maps an entry's name to the Generator that starts it. A new driver is one entry
here plus one Generator subclass there. Like the server registry, this module is data and small callables:
it reads the [load] values only, and imports nothing of the runner's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import loadgen
from loadgen._options import PROFILES
from xferbench.config.model import TRANSPORTS, Load
from xferbench.config.servers import CALLS

# How a refusal names a transport: "xferload speaks the frame protocol only".
TRANSPORT_WORDS = {"grpc": "gRPC", "frame": "the frame protocol"}


@dataclass(frozen=True)
class DriverSpec:
    name: str  # what `[load] driver` names
    transports: tuple[str, ...]  # a cell's transport; grpc_inflight, a gRPC setting, needs "grpc" here
    calls: tuple[str, ...]  # the operations of a [load] mix it sends
    mix: bool  # a weighted mix of operations in one run (False: one method per process)
    frame_codecs: tuple[str, ...]  # [load] frame_codec
    open_loop: bool  # a rate of arrivals (load.rate, mode = "open")
    poisson: bool  # poisson arrivals besides constant intervals (rate = "poisson:R")
    closed_loop: bool  # users each with calls in flight, no rate (mode = "closed", load.steps)
    profiles: tuple[str, ...]  # [load] profile: steady | ramp | step | spike | soak
    capacity: bool  # mode = "capacity": the search over rates
    processes: bool  # processes > 1: distributed over several generator processes
    hosts: bool  # [load] hosts: its workers on other hosts over SSH, its master here (config/hosts.py)
    call: bool  # [load] call: any gRPC method (loadgen's CallUser)
    locustfile: bool  # [load] locustfile: the user's own Locust users
    echo_sizes: bool  # several echo payload sizes in one run (echo_size = "64,128")
    gradual_start: bool  # spawn_rate < users: users started a few a second
    max_inflight: int | None  # the most calls in flight per connection it keeps; None: loadgen's own bound
    # Capability (a key of CHECKS) → why the driver lacks it, added to that refusal.
    why: Mapping[str, str] = field(default_factory=dict)


DRIVERS: dict[str, DriverSpec] = {
    "locust": DriverSpec(
        name="locust",
        transports=TRANSPORTS,
        calls=CALLS,
        mix=True,
        frame_codecs=("protobuf",),
        open_loop=True,
        poisson=True,
        closed_loop=True,
        profiles=PROFILES,
        capacity=True,
        processes=True,
        hosts=True,
        call=True,
        locustfile=True,
        echo_sizes=True,
        gradual_start=True,
        max_inflight=None,
        why={"frame_codec": "loadgen is Python, which has no maintained gob implementation"},
    ),
    # build/bin/xferload, the native frame driver: one method per process with a fixed request.
    "xferload": DriverSpec(
        name="xferload",
        transports=("frame",),
        calls=("echo", "meta"),
        mix=False,
        frame_codecs=("protobuf", "gob"),
        open_loop=True,
        poisson=False,
        closed_loop=True,
        profiles=("steady",),
        capacity=True,
        processes=False,
        hosts=False,
        call=False,
        locustfile=False,
        echo_sizes=False,
        gradual_start=False,
        max_inflight=256,
        why={
            "calls": "its upload and download calls are single frames, while loadgen's are whole transfers, "
            "so their figures would not compare",
        },
    ),
}


def get(name: str) -> DriverSpec:
    """The entry of a driver; KeyError names the known ones."""
    try:
        return DRIVERS[name]
    except KeyError:
        raise KeyError(f"unknown driver {name!r}; known: {' | '.join(DRIVERS)}") from None


# --- what each capability refuses ---------------------------------------------------------------------

# A check: the start of the refusal ("<key> = <value>: <driver> cannot ...") when the driver cannot run this
# load, else None. It reads the load before its mode is resolved: mode None with no rate is a closed loop.
Check = Callable[[DriverSpec, Load], str | None]


def _words(transports: tuple[str, ...]) -> str:
    return " and ".join(TRANSPORT_WORDS.get(t, t) for t in transports)


def _methods(load: Load) -> list[str]:
    return [m for m, w in loadgen.option("mix").parse(load.mix).items() if w > 0]


def _transport(d: DriverSpec, load: Load) -> str | None:
    if load.transport in d.transports:
        return None
    return f"transport = {load.transport!r}: {d.name} speaks {_words(d.transports)} only"


def _grpc_settings(d: DriverSpec, load: Load) -> str | None:
    if load.grpc_inflight is None or "grpc" in d.transports:
        return None
    return f"grpc_inflight = {load.grpc_inflight!r}: a gRPC setting; {d.name} speaks {_words(d.transports)}"


def _frame_codec(d: DriverSpec, load: Load) -> str | None:
    if load.frame_codec in d.frame_codecs:
        return None
    return f"frame_codec = {load.frame_codec!r}: {d.name} has no {load.frame_codec} client"


def _call(d: DriverSpec, load: Load) -> str | None:
    if not load.call or d.call:
        return None
    return f"call = {load.call!r}: {d.name} cannot call any gRPC method (loadgen's CallUser can)"


def _locustfile(d: DriverSpec, load: Load) -> str | None:
    if not load.locustfile or d.locustfile:
        return None
    return f"locustfile = {load.locustfile!r}: {d.name} cannot run Locust users"


def _processes(d: DriverSpec, load: Load) -> str | None:
    if load.processes <= 1 or d.processes:
        return None
    return f"processes = {load.processes}: {d.name} runs as one generator process"


def _hosts(d: DriverSpec, load: Load) -> str | None:
    if not load.hosts or d.hosts:
        return None
    return f"hosts = {list(load.hosts)!r}: {d.name} runs on this machine only"


def _profile(d: DriverSpec, load: Load) -> str | None:
    if load.profile in d.profiles:
        return None
    keeps = "keeps a steady load" if d.profiles == ("steady",) else f"runs {' | '.join(d.profiles)} only"
    return f"profile = {load.profile!r}: {d.name} {keeps}"


def _mix(d: DriverSpec, load: Load) -> str | None:
    if d.mix or len(_methods(load)) == 1:
        return None
    return f'mix = {load.mix!r}: {d.name} runs one method per process; give one method (e.g. "meta:1")'


def _calls(d: DriverSpec, load: Load) -> str | None:
    if all(m in d.calls for m in _methods(load)):
        return None
    return f"mix = {load.mix!r}: with {d.name} the runner drives {' or '.join(d.calls)}"


def _loop(d: DriverSpec, load: Load) -> str | None:
    if load.rate and not d.open_loop:
        return f"rate = {load.rate!r}: {d.name} runs a closed loop only (users, no rate)"
    if not load.rate and not d.closed_loop:
        return f"mode = {load.mode or 'closed'!r}: {d.name} runs an open loop only; give load.rate"
    return None


def _poisson(d: DriverSpec, load: Load) -> str | None:
    rate = loadgen.option("rate").parse(load.rate) if load.rate else None
    if rate is None or not rate.poisson or d.poisson:
        return None
    return f"rate = {load.rate!r}: {d.name} sends at constant intervals; give R or constant:R"


def _capacity(d: DriverSpec, load: Load) -> str | None:
    if load.mode != "capacity" or d.capacity:
        return None
    return f"mode = 'capacity': {d.name} cannot search for the capacity"


def _echo_sizes(d: DriverSpec, load: Load) -> str | None:
    if load.echo_size is None or d.echo_sizes:
        return None
    size = loadgen.option("echo_size").parse(load.echo_size)
    if size.kind == "list" and len(size.values) == 1:
        return None
    return f"echo_size = {load.echo_size!r}: {d.name} sends one payload size; give one size"


def _start(d: DriverSpec, load: Load) -> str | None:
    if d.gradual_start or load.spawn_rate >= load.users:
        return None
    return (f"spawn_rate = {load.spawn_rate:g} < users = {load.users}: {d.name} opens every connection at once; "
            "set spawn_rate >= users")


def _inflight(d: DriverSpec, load: Load) -> str | None:
    if d.max_inflight is None or 1 <= load.inflight <= d.max_inflight:
        return None
    return f"inflight = {load.inflight}: {d.name} keeps 1..{d.max_inflight} calls in flight per connection"


# In the order they are checked: the transport and the kind of user first, then the shape of the load.
CHECKS: dict[str, Check] = {
    "transports": _transport,
    "grpc_settings": _grpc_settings,
    "frame_codec": _frame_codec,
    "call": _call,
    "locustfile": _locustfile,
    "processes": _processes,
    "hosts": _hosts,
    "profiles": _profile,
    "mix": _mix,
    "calls": _calls,
    "loop": _loop,
    "poisson": _poisson,
    "capacity": _capacity,
    "echo_sizes": _echo_sizes,
    "gradual_start": _start,
    "max_inflight": _inflight,
}


def check(load: Load) -> None:
    """Raises ValueError at the first thing the load's driver cannot do: the [load] key and value at fault,
    what the driver cannot do and why, and the drivers that can ("use driver = ...")."""
    spec = get(load.driver)
    for capability, lacks in CHECKS.items():
        said = lacks(spec, load)
        if said is None:
            continue
        if capability in spec.why:
            said += f" ({spec.why[capability]})"
        can = [f'driver = "{o.name}"' for o in DRIVERS.values() if o is not spec and lacks(o, load) is None]
        raise ValueError(said + (f"; use {' or '.join(can)}" if can else ""))
