"""What an experiment is once read: its constants and dataclasses (Load, Limits, Cell, Pinning, Network, Soak,
Experiment). The parsing that builds them lives beside this module; see the package's docstring for the schema."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import loadgen
from py_client.durations import parse_duration
from xferbench.config import servers, tls

DEFAULT_REPEATS = 6
LOAD_MODES = ("open", "closed", "capacity")
PIN_MODES = ("auto", "manual", "none")
TRANSPORTS = ("grpc", "frame")
BACKENDS = ("process", "docker")
AA_SUFFIX = " (A/A)"


class ExperimentError(ValueError):
    """An invalid experiment file; the message names the file, the field and what it accepts."""


def slug(name: str) -> str:
    """A cell name as a file name: "c/frame/alloc=glibc (A/A)" → "c_frame_alloc=glibc_A_A_"."""
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", name.replace("/", "_"))


@dataclass(frozen=True)
class Load:
    users: int = 8
    spawn_rate: float = 8.0
    duration_s: float = 8.0
    profile: str = "steady"
    mix: str = "upload:1,download:1,echo:1"
    sizes: str = "64KiB"
    chunk: str = "64KiB"
    inflight: int = 4
    verify: str = "on"
    rate: str | None = None
    # Loadgen's own defaults when unset (loadgen/_options.py); as command-line text when set.
    echo_size: str | None = None
    meta_entries: str | None = None
    meta_size: str | None = None
    grpc_inflight: str | None = None
    connections: str | None = None  # user | call | pool:N (loadgen's --xfer-connections)
    transport: str = "grpc"
    steps: str | None = None  # explicit step levels as --xfer-steps text ("50,100,200"); None: no levels
    step_s: str | None = None  # seconds each level is held, as --xfer-step-s text
    settle_s: float = 0.0  # seconds from a level's last user started to its measured window
    mode: str | None = None  # None until the cell is built: "open" when a rate is given, else "closed"
    slo_p99: float | None = None  # seconds (the file may say "20ms")
    slo_failures: float = 0.01
    driver: str = "locust"  # the load generator: locust (loadgen) or xferload (xferbench/run/generators.py)
    frame_codec: str = "protobuf"  # xferload --codec: the frame listener's codec (gob: xferd-go's net/rpc default)
    # Any gRPC method (loadgen's --xfer-call ...), or the user's own Locust users: xferbench/config/userload.py.
    call: str | None = None
    data: str | None = None
    proto: str | None = None
    import_path: str | None = None  # DIR,DIR (a TOML list in the file)
    protoset: str | None = None
    locustfile: str | None = None
    options: dict[str, str | bool] | None = None  # a user locustfile's own options: {"my-flag": "v"} → --my-flag v
    processes: int = 1  # Locust processes (--processes N: a master and N workers)
    # A user locustfile whose users hold a fixed rate themselves (constant_throughput): ranked and paired like an
    # open-loop load, by cost, since every cell then serves the same rate (userload.py)
    paced: bool = False
    # [hosts] names: the load's Locust workers run there (`processes` per host), its master here (config/hosts.py)
    hosts: tuple[str, ...] = ()
    tls: str = "off"  # off | on | on-resume: the load over the server's TLS listener (xferbench/config/tls.py)

    @property
    def offered(self) -> bool:
        """Whether the load offers a fixed rate, whatever a cell can serve: loadgen's open loop, or a paced
        locustfile. Its rate is then the experiment's choice, never a figure to rank."""
        return self.mode == "open" or self.paced

    @property
    def levels(self) -> tuple[int, ...]:
        """The explicit step levels, () when the load has none."""
        return tuple(int(x) for x in self.steps.split(",")) if self.steps else ()

    @property
    def step_seconds(self) -> float:
        return parse_duration(self.step_s) if self.step_s and self.step_s != "auto" else 0.0

    def with_step_s(self, step_s: float, settle_s: float) -> Load:
        """This stepped load with each level held step_s, so duration_s is levels x step_s."""
        return replace(self, step_s=f"{step_s:g}", settle_s=settle_s, duration_s=step_s * len(self.levels))

    @property
    def rate_per_second(self) -> float | None:
        """ "poisson:200" → 200.0."""
        return float(self.rate.rpartition(":")[2]) if self.rate else None

    def at_rate(self, per_second: float) -> Load:
        """This load at another rate, keeping the kind of arrivals (constant or poisson)."""
        kind = self.rate.partition(":")[0] if self.rate and ":" in self.rate else "constant"
        return replace(self, rate=f"{kind}:{per_second:.6g}")


LOAD_KEYS = tuple(Load.__dataclass_fields__)
# The [load] keys a cell's recorded configuration leaves out at these values.
_UNSET: dict[str, object] = {"hosts": (), "tls": "off"}
# The [load] keys that are loadgen options (--xfer-<key>): checked by loadgen and passed to Locust as such.
LOADGEN_KEYS = tuple(k for k in LOAD_KEYS if k in loadgen.OPTIONS_BY_KEY)


@dataclass(frozen=True)
class Limits:
    """[servers.limits] of one cell: the cgroup limits its server's container gets."""

    cpus: float | None = None  # cores of CPU time per period (nano_cpus)
    memory: int | None = None  # bytes

    def to_json(self) -> dict[str, Any]:
        return {"cpus": self.cpus, "memory_bytes": self.memory}


@dataclass(frozen=True)
class Cell:
    name: str
    kind: servers.ServerKind  # its server: a registry entry or a command server's description (servers.ServerKind)
    binary: str
    flags: dict[str, str]
    env: dict[str, str]  # "" values mean: remove the variable
    args: tuple[str, ...]
    load: Load
    axes: dict[str, str]  # the values that distinguish this cell within its group
    limits: Limits = field(default_factory=Limits)  # backend = "docker": the container's cgroup limits
    image: str | None = None  # backend = "docker": the image; None: the server's default image
    host: str | None = None  # [[servers]] host: the [hosts] name its server runs on; None: this machine

    @property
    def server(self) -> str:
        """Its kind's name, as reports and rows spell it ("xferd-go", "command")."""
        return self.kind.name

    @property
    def transport(self) -> str:
        return self.load.transport

    @property
    def slug(self) -> str:
        return slug(self.name)

    def server_argv(self, address: str | None = None, tls_files: tls.TLSFiles | None = None) -> list[str]:
        """A registry server's command line: its binary, every listener on a free loopback port (its transports' at
        `address` when given: a load on other hosts), with a tls load its TLS listener for the cell's transport and
        `tls_files`' certificate, its flags and args (a command's is its own, xferbench/run/commandserver.py)."""
        spec = self.kind
        if not isinstance(spec, servers.ServerSpec):
            raise TypeError(f"cell {self.name!r}: a {spec.name} server has no registry command line")
        ports = spec.port0_flags if address is None else spec.port0_at(address)
        secure: list[str] = []
        if self.load.tls != "off":
            if tls_files is None:
                raise ValueError(f"cell {self.name!r}: load.tls = {self.load.tls!r} needs the run's certificate")
            secure = spec.tls_argv(self.transport, str(tls_files.cert), str(tls_files.key), tls.tickets(self.load.tls),
                                   address)
        return [self.binary, *ports, *secure, *(f"--{k}={v}" for k, v in self.flags.items()), *self.args]

    def server_env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        for k, v in self.env.items():
            if v == "":
                env.pop(k, None)
            else:
                env[k] = v
        return env

    def config(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "transport": self.transport,
            "flags": dict(self.flags),
            "env": {k: v for k, v in self.env.items()},
            "args": list(self.args),
            # hosts and tls only when set: a run's configuration without them reads as it always did (xferbench compare)
            "load": {k: getattr(self.load, k) for k in LOAD_KEYS if k not in _UNSET or getattr(self.load, k) != _UNSET[k]},
            **({"limits": self.limits.to_json()} if self.limits != Limits() else {}),
            **({"image": self.image} if self.image else {}),
            **({"host": self.host} if self.host else {}),
            **self.kind.config_json(),
        }


@dataclass(frozen=True)
class Pinning:
    server: tuple[int, ...] = ()
    generator: tuple[int, ...] = ()
    mode: str = "none"

    def describe(self) -> str:
        if not self.server and not self.generator:
            return "not pinned"
        return f"server on CPUs {_cpu_list(self.server)}, load generator on CPUs {_cpu_list(self.generator)} ({self.mode})"


def _cpu_list(cpus: tuple[int, ...]) -> str:
    return ",".join(map(str, cpus)) if cpus else "any"


@dataclass(frozen=True)
class Network:
    """[network]: the conditions Toxiproxy puts between Locust and each cell's server."""

    latency_ms: int = 0
    jitter_ms: int = 0
    bandwidth: int | None = None  # bytes per second, each direction of each connection

    def describe(self) -> str:
        parts = []
        if self.latency_ms:
            jitter = f" ± {self.jitter_ms} ms" if self.jitter_ms else ""
            parts.append(f"+{self.latency_ms} ms{jitter} per round trip")
        if self.bandwidth:
            parts.append(f"{_rate_text(self.bandwidth)} per connection each way")
        return "toxiproxy between Locust and the server: " + ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "latency_ms": self.latency_ms,
            "jitter_ms": self.jitter_ms,
            "bandwidth_bytes_s": self.bandwidth,
            "text": self.describe(),
        }


def _rate_text(bytes_s: int) -> str:
    for unit, mult in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if bytes_s >= mult:
            return f"{bytes_s / mult:g} {unit}/s"
    return f"{bytes_s} B/s"


@dataclass(frozen=True)
class Soak:
    """[soak]: the goal each run is judged against (≤ 5% growth, nothing held back after the load)."""

    growth_max: float = 0.05
    held_slack: int = 2


@dataclass(frozen=True)
class Host:
    """[hosts.NAME]: a machine reached over SSH with the user's own `ssh`, which runs a part of the experiment (the
    load's Locust workers, `[load] hosts`). Read by xferbench/config/hosts.py; checked live by xferbench/run/hostcheck.py."""

    name: str
    ssh: str  # user@address, or an alias of the user's ssh configuration
    ssh_config: str | None = None  # ssh -F FILE (absolute: resolved against the experiment file's folder)
    python: str = ""  # the Python there that has this project (hosts.py gives the default: this checkout's venv)
    root: str = ""  # the checkout there, where the load's code is run from (default: this checkout's path)
    engine: str | None = None  # its container engine's socket there, "unix:///PATH" (reached through ssh -L)

    def describe(self) -> str:
        """How every message names it: "gen1 (root@10.77.0.2)"."""
        return f"{self.name} ({self.ssh})"

    @property
    def engine_socket(self) -> str | None:
        """The path of its engine's socket on the host (`engine` without its unix://)."""
        return self.engine.removeprefix("unix://") if self.engine else None

    def to_json(self) -> dict[str, Any]:
        return {"ssh": self.ssh, "ssh_config": self.ssh_config, "python": self.python, "root": self.root,
                "engine": self.engine}


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    path: Path | None
    repeats: int
    warmup_s: float
    baseline: str
    pinning: Pinning
    cells: tuple[Cell, ...] = field(default_factory=tuple)
    aa: bool = False
    alpha: float = 0.05
    duet: bool = False
    network: Network | None = None
    soak: Soak | None = None
    profile: bool = False  # sample the server's CPU in every measured window (xferbench/measure/profile/)
    backend: str = "process"  # process | docker (each cell's server in a container: xferbench/run/containers/)
    hosts: dict[str, Host] = field(default_factory=dict)  # [hosts.NAME], in the file's order
    # A baseline per [[servers]] table (xferbench/config/baselines.py): every cell's name → its table's baseline;
    # empty when `baseline` is every cell's.
    baselines: dict[str, str] = field(default_factory=dict)

    @property
    def load_hosts(self) -> tuple[str, ...]:
        """The hosts some cell's load runs on (`[load] hosts`), in [hosts]' order."""
        used = {h for c in self.cells for h in c.load.hosts}
        return tuple(h for h in self.hosts if h in used)

    @property
    def server_hosts(self) -> tuple[str, ...]:
        """The hosts some cell's server runs on (`[[servers]] host`), in [hosts]' order."""
        used = {c.host for c in self.cells if c.host}
        return tuple(h for h in self.hosts if h in used)

    @property
    def aa_cell(self) -> str | None:
        return self.baseline + AA_SUFFIX if self.aa else None

    def baseline_of(self, name: str) -> str:
        """The baseline the cell `name` is judged against (and runs beside, in a duet)."""
        return self.baselines.get(name, self.baseline)

    @property
    def baseline_cells(self) -> set[str]:
        """Every cell that is some cell's baseline."""
        return set(self.baselines.values()) or {self.baseline}

    def cell(self, name: str) -> Cell:
        for c in self.cells:
            if c.name == name:
                return c
        raise KeyError(name)

    def with_overrides(self, repeats: int | None = None, quick: bool = False, profile: bool = False) -> Experiment:
        """--repeat N, --quick (CI: 1 s warm-up, 3 s measured, a gentle spawn) and --profile."""
        exp = replace(self, profile=True) if profile else self
        if repeats is not None:
            exp = replace(exp, repeats=repeats)
        if quick:
            cells = tuple(replace(c, load=_quick_load(c.load)) for c in exp.cells)
            exp = replace(exp, warmup_s=min(exp.warmup_s, 1.0), cells=cells)
        return exp

    def estimated_seconds(self, per_run_overhead_s: float = 2.5) -> float:
        """Duets run each other cell beside the baseline: one unit per non-baseline cell a round."""
        cells = [c for c in self.cells if c.name not in self.baseline_cells] if self.duet else self.cells
        return sum(self.warmup_s + c.load.duration_s + per_run_overhead_s for c in cells) * self.repeats


def _quick_load(load: Load) -> Load:
    """--quick: 3 s measured (a stepped load: 4 s per level, 1 s of it settling), a spawn as fast as -u."""
    load = replace(load, spawn_rate=max(load.spawn_rate, float(load.users)))
    if load.levels:
        return load.with_step_s(min(load.step_seconds, 4.0), min(load.settle_s, 1.0))
    return replace(load, duration_s=min(load.duration_s, 3.0))
