"""experiment.json, typed: what `xferbench run` records about a run beside its rows (runs.jsonl).

The runner writes it when the sweep starts and again when it ends; the report, compare and the terminal view
read it back. The file's keys and layout are the contract with every run directory already on disk, so
`to_json` writes exactly the keys the runner always wrote, in the same order, and `from_json` reads files of
older versions: keys they lack take their defaults, keys this version does not know are kept in `extra`.
Only `experiment` and `cells` are required: without them a file says nothing about which run it describes.
"""

from __future__ import annotations

import json
import types
from dataclasses import MISSING, asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

FILE = "experiment.json"

# Written only once known: the end of the sweep (finished_at, interrupted, rounds) or --until-ci's stop.
_LATE = ("until_ci", "finished_at", "interrupted", "rounds")


class RunMetaError(ValueError):
    """An experiment.json that cannot be read; the message names the file and the key."""


@dataclass
class Pinning:
    """Which CPUs the server and the load generator were pinned to (experiment.Pinning)."""

    mode: str | None = None
    server: list[int] = field(default_factory=list)
    generator: list[int] = field(default_factory=list)
    text: str | None = None


@dataclass
class SoakGoal:
    """A soak's leak thresholds (experiment.Soak)."""

    growth_max: float = 0.05
    held_slack: int = 2


@dataclass
class Machine:
    """The host the run measured on (runner.machine_info)."""

    hostname: str | None = None
    platform: str | None = None
    python: str | None = None
    cpus: int | None = None
    mem_bytes: int | None = None


@dataclass
class Network:
    """The [network] proxy's conditions (experiment.Network.to_json)."""

    latency_ms: float | None = None
    jitter_ms: float | None = None
    bandwidth_bytes_s: int | None = None
    text: str | None = None


@dataclass
class HostFacts:
    """One [hosts.NAME] as the host check found it before the first cell (xferbench/run/hostcheck.py)."""

    name: str
    ssh: str  # the ssh target the experiment gave
    roles: list[str] = field(default_factory=list)  # "load": the load's Locust workers run there
    address: str | None = None  # the host's address, as this machine reached it (SSH_CONNECTION)
    here: str | None = None  # this machine's address, as the host sees it
    hostname: str | None = None
    kernel: str | None = None
    cpu_model: str | None = None
    cpus: int | None = None  # the CPUs its processes may run on
    cpus_free: float | None = None  # idle CPUs over a short sample of /proc/stat, in cores
    clock_offset_s: float | None = None  # its clock minus this machine's, when the host check ran
    clock_uncertainty_s: float | None = None  # half the best round trip: the offset is within ± this
    clock_end_offset_s: float | None = None  # the same, measured again once the sweep's last run ended
    clock_end_uncertainty_s: float | None = None
    clock_end_error: str | None = None  # why the end's could not be measured
    python: str | None = None  # the Python it runs the load with, and its version
    python_version: str | None = None
    locust: str | None = None
    project: str | None = None  # `git describe --always --dirty` of its checkout, else the package version

    def describe(self) -> str:
        """ "gen1 (10.77.0.2: 2 CPUs, 1.9 free, Linux 6.1.0, AMD EPYC 7B13, clock +0.2 ms ± 0.3 ms)"."""
        parts = []
        if self.cpus is not None:
            parts.append(f"{self.cpus} CPU{'s' * (self.cpus != 1)}"
                         + (f", {self.cpus_free:.1f} free" if self.cpus_free is not None else ""))
        if self.kernel:
            parts.append(f"Linux {self.kernel}")
        if self.cpu_model:
            parts.append(self.cpu_model)
        if self.clock_offset_s is not None:
            end = self.clock_end_text()
            parts.append(f"clock {self.clock_text()}" + (f" at start, {end} at end" if end else ""))
        where = f"{self.address}: " if self.address else ""
        return f"{self.name} ({where}{', '.join(parts)})"


    def clock_text(self) -> str:
        """Its clock offset and uncertainty at the host check: "+0.2 ms ± 0.3 ms", "-40 µs ± 25 µs"; "?" unknown."""
        return _offset(self.clock_offset_s, self.clock_uncertainty_s)

    def clock_end_text(self) -> str | None:
        """The same once the sweep ended; "? (why)" when it could not be measured, None before it ended."""
        if self.clock_end_offset_s is None:
            return f"? ({self.clock_end_error})" if self.clock_end_error else None
        return _offset(self.clock_end_offset_s, self.clock_end_uncertainty_s)


def _offset(offset: float | None, uncertainty: float | None) -> str:
    if offset is None:
        return "?"
    unc = f" ± {_duration(uncertainty)}" if uncertainty is not None else ""
    return f"{'-' if offset < 0 else '+'}{_duration(abs(offset))}{unc}"


def _duration(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


@dataclass
class Placement:
    """Where a run's parts ran when it has [hosts]: the servers and the Locust master on this machine, listening on
    `server_address` for the load; the load's workers on the hosts whose roles say so."""

    server_address: str | None = None  # None: the servers kept to loopback (no load on another host)
    hosts: list[HostFacts] = field(default_factory=list)
    text: str | None = None

    def describe(self) -> str:
        load = [h.describe() for h in self.hosts if "load" in h.roles]
        servers = [h.describe() for h in self.hosts if "server" in h.roles]
        other = [h.describe() for h in self.hosts if not h.roles]
        if servers:  # [[servers]] host: those groups' servers there, the others (if any) here
            out = f"servers on {', '.join(servers)} (those of the groups naming them; any other on this machine)"
            if load:
                out += (f"; the Locust master on this machine, listening on {self.server_address}; "
                        f"Locust workers on {', '.join(load)}")
            else:
                out += "; the load on this machine"
        elif load:
            out = (f"servers and the Locust master on this machine, listening on {self.server_address}; "
                   f"Locust workers on {', '.join(load)}")
        else:
            out = "servers and the load on this machine"
        return out + (f"; also checked: {', '.join(other)}" if other else "")


@dataclass
class UntilCIState:
    """Why --until-ci stopped adding rounds, and the widest interval it saw then."""

    target: float
    budget_s: float
    widest: float | None
    rounds: int
    metric: str
    met: bool
    why: str
    more: int | None = None  # not met: the further rounds that would likely meet it, the noise staying as it was


@dataclass(kw_only=True)
class RunMeta:
    """One run's experiment.json; fields in the file's key order."""

    experiment: str
    description: str = ""
    path: str | None = None
    repeats: int | None = None
    warmup_s: float | None = None
    baseline: str | None = None
    baselines: dict[str, str] | None = None  # a baseline per [[servers]] table: every cell → its own
    aa_cell: str | None = None
    duet: bool = False
    alpha: float | None = None
    soak: SoakGoal | None = None
    order_seed: int | None = None
    pinning: Pinning | None = None
    cells: list[str]
    cell_configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: str = "scrape"
    started_at: str | None = None
    machine: Machine | None = None
    network: Network | None = None
    profile: bool = False
    backend: str = "process"
    placement: Placement | None = None  # an experiment with [hosts]: the host check's facts
    until_ci: UntilCIState | None = None
    finished_at: str | None = None
    interrupted: bool | None = None
    rounds: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # keys of another version, written back unchanged

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        del out["extra"]
        # placement and baselines: only a run with [hosts], or with a baseline per table, has one; older files stay
        # as they were
        for key in (*_LATE, "placement", "baselines"):
            if out[key] is None:
                del out[key]
        if out.get("until_ci") and out["until_ci"]["more"] is None:
            del out["until_ci"]["more"]  # written only when the target was missed: older files stay byte for byte
        return {**out, **self.extra}

    @classmethod
    def from_json(cls, data: object, where: str = FILE) -> RunMeta:
        """The metadata in `data` (a parsed experiment.json); RunMetaError names `where` and the bad key."""
        if not isinstance(data, dict):
            raise RunMetaError(f"{where}: expected a JSON object, got {type(data).__name__}")
        meta = _build(cls, data, where, "")
        known = {f.name for f in fields(cls)} - {"extra"}
        meta.extra = {k: v for k, v in data.items() if k not in known}
        return meta

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2))

    def baseline_of(self, name: str) -> str | None:
        """The baseline the cell `name` was judged against."""
        return (self.baselines or {}).get(name, self.baseline)

    def cell_config(self, name: str) -> dict[str, Any]:
        """A cell's configuration as the run recorded it (experiment.Cell.config), {} when unknown."""
        return self.cell_configs.get(name, {})


def load(path: Path) -> RunMeta:
    """The metadata in the file at `path`; RunMetaError (naming the file and the key) when malformed."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise RunMetaError(f"{path}: {e}") from None
    return RunMeta.from_json(data, str(path))


T = TypeVar("T")


def _build(cls: type[T], data: dict[str, Any], where: str, prefix: str) -> T:
    """An instance of the dataclass `cls` from `data`, each value checked against its field's type."""
    hints = get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]  # cls is one of this module's dataclasses
        if f.name == "extra":
            continue
        key = prefix + f.name
        if f.name in data:
            kwargs[f.name] = _check(data[f.name], hints[f.name], where, key)
        elif f.default is MISSING and f.default_factory is MISSING:
            raise RunMetaError(f"{where}: missing key {key!r}")
    return cls(**kwargs)


def _check(value: Any, hint: Any, where: str, key: str) -> Any:
    """`value` if it is of type `hint` (nested dataclasses built from their dicts); else RunMetaError."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]  # every union here is `X | None`
        return _check(value, inner, where, key)
    if is_dataclass(hint) and isinstance(value, dict):
        return _build(hint, value, where, key + ".")  # type: ignore[arg-type]
    if origin is list and isinstance(value, list):
        return [_check(v, args[0], where, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict and isinstance(value, dict):
        return value
    if hint is Any or _is(value, hint):
        return value
    raise RunMetaError(f"{where}: key {key!r}: expected {_name(hint)}, got {value!r}")


def _is(value: Any, hint: Any) -> bool:
    if isinstance(value, bool):  # a bool is an int to isinstance, never to a reader of the file
        return hint is bool
    if hint is float:
        return isinstance(value, int | float)  # JSON writes 1.0 as 1 when the number was whole
    return isinstance(hint, type) and isinstance(value, hint)


def _name(hint: Any) -> str:
    if is_dataclass(hint) or get_origin(hint) is dict:
        return "an object"
    if get_origin(hint) is list:
        return "a list"
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false"}.get(hint, str(hint))
