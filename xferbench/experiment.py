"""Experiment files: the TOML schema, its validation, and the cells it expands to.

An experiment is read and checked completely before anything starts; every error names the field (as a
TOML path such as ``servers[1].flags.alloc``) and what it accepts.

Schema (every key below is optional unless marked *required*)::

    [experiment]
    name = "quick"              # default: the file's stem
    description = "..."
    repeats = 6                 # rounds: every cell once per round; the default gives a planted 15% effect
                                # 80% power on this machine (tests/unit/test_stats.py)
    warmup_s = 2                # seconds of load discarded before the measured window; every time here
                                # takes a number of seconds or a duration ("30s", "1m30s"; docs/DESIGN.md)
    baseline = "go/grpc/pool=on"  # cell the ranking compares with; default: the first cell
    aa = false                  # also run the baseline a second time per round as "<baseline> (A/A)": the
                                # pair's verdicts show what the machine's noise alone produces
    alpha = 0.05                # family-wise rate of false verdicts in one report (Holm)
    profile = false             # sample the server's CPU in each measured window and attribute it to
                                # allocator, gc, copy, ... (xferbench/profile/; docs/EXPERIMENTS.md "CPU attribution")
    duet = true                 # run each cell at the same time as the baseline, so the machine's noise hits
                                # both alike (xferbench/matrix.py); the default when every cell has a fixed
                                # offered load, there are two cells or more, and the CPUs can be pinned
    backend = "process"         # process: servers run as host processes | docker: each in a container on the
                                # Docker-API engine (xferbench/containers/; docs/EXPERIMENTS.md "Servers in containers")

    [load]                      # the load of every cell (a server group may override any key)
    users = 8
    spawn_rate = 8              # users started per second
    duration_s = 8              # measured seconds (after warm-up)
    profile = "steady"          # steady | ramp | step | spike | soak
    steps = "50,100,200"        # with profile "step": explicit user levels, strictly increasing (a list of
                                # whole numbers in [load]); users becomes the last level
    step_s = 20                 # seconds each level is held; duration_s becomes levels x step_s; the runner
                                # cuts one measured window per level (xferbench/steps.py), no warm-up apart
    settle_s = 5                # seconds after a level's users are all running before its window starts
    mix = "upload:1,download:1,echo:1"
    sizes = "64KiB"
    chunk = "64KiB"
    inflight = 4
    verify = "on"               # on | off
    meta_entries = 64           # Meta calls (mix "meta:1"): entries per call and bytes per key and value;
    meta_size = "8-64"          # these, echo_size and grpc_inflight are loadgen's options, its defaults if unset
    mode = "open"               # open: a fixed offered load (`rate`), the default whenever rate is set;
                                # closed: users call as fast as answers come (QPS then depends on scheduling);
                                # capacity: the highest rate meeting the SLO, searched per cell
    rate = "200"                # open: arrivals per second, "R" or "poisson:R"; capacity: the first step
    slo_p99 = "20ms"            # capacity: the client P99 that must hold
    slo_failures = 0.01         # capacity: the failed fraction of calls that must not be exceeded
    transport = "grpc"          # grpc | frame; may be a list in a server group (a matrix axis)
    driver = "locust"           # locust | xferload (frame, one method of echo/meta, steady; xferbench/generator.py)
    frame_codec = "protobuf"    # protobuf | gob: xferload --codec (gob needs driver = "xferload")
    call = "pkg.Service/Method" # any gRPC method (loadgen's CallUser), with data = '{"id": "{{seq}}"}' or
                                # "@req.json", proto / import_path / protoset; or locustfile = "users.py": your
                                # own Locust users; processes = N: Locust distributed (xferbench/userload.py;
                                # paths relative to the experiment file; docs/EXPERIMENTS.md "Any gRPC method")

    [pinning]                   # CPU sets (CPU numbers as the kernel counts them). Default with >= 2 CPUs:
    server = [0]                # the server on the lower half, Locust on the upper half, disjoint
    generator = [1]
    mode = "auto"               # auto (the default above) | manual (server/generator as given) | none

    [network]                   # a Toxiproxy in front of each cell's server: Locust's traffic crosses it, the
                                # server's /metrics is still scraped directly (docs/EXPERIMENTS.md "Network conditions")
    latency = "20ms"            # added to every round trip (server → client side), whole milliseconds
    jitter = "5ms"              # ± uniformly around latency; needs latency, at most latency
    bandwidth = "100MiB/s"      # per connection and direction; size units as in `sizes`, at least 1000/s
    [soak]                      # a leak check instead of a ranking (xferbench/soak.py): per run, RSS and live-heap
    growth_max = 0.05           # growth over the last third of the measured window (>= 30 s) above this fraction, or
    held_slack = 2              # descriptors, threads or goroutines held after the load above their count
                                # before it by more than this, flag the run "LEAK?"; no verdicts, no ranking;
                                # duet defaults to false

    [[servers]]                 # *required*, one or more groups; each expands to a matrix of cells
    server = "xferd-go"         # *required*: xferd-go | xferd-c (a kind of xferbench/servers.py) | command (any
                                # executable: command, ready, metrics, alloc, gogc, ... as in xferbench/command.py)
    label = "go"                # short name used in cell names; default from the server
    binary = "build/bin/xferd-go"   # default: $XFERD_GO_BIN / $XFERD_C_BIN or build/bin/<server>
    args = ["--max-conns=256"]  # extra flags passed verbatim
    [servers.flags]             # server flags; a list is a matrix axis
    pool = ["on", "off"]
    [servers.env]               # environment; a list is a matrix axis; "" means "leave unset"
    MALLOC_ARENA_MAX = ["1", "2", "4", ""]
    [servers.load]              # overrides of [load]; a list is a matrix axis
    transport = ["grpc", "frame"]
    [servers.limits]            # backend = "docker" only: cgroup limits of the server's container; a list is
    cpus = 1.5                  # a matrix axis. cpus: CPU time in cores (CFS quota); memory: a size (the
    memory = "256MiB"           # container's memory limit, no swap beyond it)
    # image = "localhost/xferbench/xferd-go:dev"   # in [[servers]]: the container image (default per server)

A cell is one point of a group's matrix; its name joins the label, the transport and every axis value
(``go/grpc/pool=on``), unless ``name`` in the group gives a template like ``"go-{pool}-{transport}"``.
"""

from __future__ import annotations

import itertools
import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import loadgen
from py_client.durations import parse_duration
from py_client.sizes import SIZE_HELP, parse_size
from xferbench import command, servers, userload
from xferbench.servers import ALLOCATORS as ALLOCATORS  # cost.py reads it here

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS_DIR = ROOT / "experiments"

DEFAULT_REPEATS = 6
LOAD_MODES = ("open", "closed", "capacity")
PIN_MODES = ("auto", "manual", "none")
TRANSPORTS = ("grpc", "frame")

_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FLAG_NAME_RE = re.compile(r"^[a-z][a-z0-9-]*$")


class ExperimentError(ValueError):
    """An invalid experiment file; the message names the file, the field and what it accepts."""


def slug(name: str) -> str:
    """A cell name as a file name: "c/frame/alloc=glibc (A/A)" → "c_frame_alloc=glibc_A_A_"."""
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", name.replace("/", "_"))


def parse_seconds(text: str | int | float) -> float:
    """A positive duration in the one grammar (py_client/durations.py): '20ms' → 0.02, '1m30s' → 90.0; a TOML
    number, or a bare number, is seconds. Raises ValueError."""
    value = parse_duration(text)
    if value <= 0:
        raise ValueError(f"{text!r} is not a positive duration")
    return value


def _seconds_key(v: Any, *, positive: bool) -> float | None:
    """A TOML `*_s` value: a number of seconds or a duration string ("2m"), >= 0 (> 0 if positive); None if not."""
    try:
        value = parse_duration(v)
    except ValueError:
        return None
    return None if positive and value == 0 else value


# --- servers ------------------------------------------------------------------------------------------

# The kinds of server and what each accepts live in the registry (xferbench/servers.py); these names stay
# here for the modules and tests that read them from the experiment.
SERVER_SPECS = servers.SERVERS


# --- load ---------------------------------------------------------------------------------------------


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
    driver: str = "locust"  # the load generator: locust (loadgen) or xferload (xferbench/generator.py)
    frame_codec: str = "protobuf"  # xferload --codec: the frame listener's codec (gob: xferd-go's net/rpc default)
    # Any gRPC method (loadgen's --xfer-call ...), or the user's own Locust users: xferbench/userload.py.
    call: str | None = None
    data: str | None = None
    proto: str | None = None
    import_path: str | None = None  # DIR,DIR (a TOML list in the file)
    protoset: str | None = None
    locustfile: str | None = None
    processes: int = 1  # Locust processes (--processes N: a master and N workers)

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
        """"poisson:200" → 200.0."""
        return float(self.rate.rpartition(":")[2]) if self.rate else None

    def at_rate(self, per_second: float) -> Load:
        """This load at another rate, keeping the kind of arrivals (constant or poisson)."""
        kind = self.rate.partition(":")[0] if self.rate and ":" in self.rate else "constant"
        return replace(self, rate=f"{kind}:{per_second:.6g}")


LOAD_KEYS = tuple(Load.__dataclass_fields__)
# The [load] keys that are loadgen options (--xfer-<key>): checked by loadgen and passed to Locust as such.
LOADGEN_KEYS = tuple(k for k in LOAD_KEYS if k in loadgen.OPTIONS_BY_KEY)


def _loadgen_value(key: str, v: Any, where: str) -> Any:
    """A [load] value that is a loadgen option, checked by that option's own parser (so refused here exactly
    when Locust would refuse it): its command-line text; inflight as a number; an "off" rate as None."""
    opt = loadgen.option(key)
    if not isinstance(v, str | int | float | bool):
        raise ExperimentError(f"{where}.{key} = {v!r}: expected a string or a number, as {opt.flag} takes")
    try:
        text = opt.text(v)
    except ValueError as e:
        raise ExperimentError(f"{where}.{key} = {v!r}: {e}") from None
    if key == "inflight":
        return int(text)
    if key == "rate":
        return text if opt.parse(text) is not None else None
    if key == "steps":
        return text.replace(" ", "") if opt.parse(text) else None
    return text


def _check_load_value(key: str, v: Any, where: str) -> Any:
    def bad(allowed: str) -> ExperimentError:
        return ExperimentError(f"{where}.{key} = {v!r}: expected {allowed}")

    if key == "steps" and isinstance(v, list):  # [load] steps = [50, 100, 200]: the option's own text
        if not v or not all(type(x) is int for x in v):
            raise bad("increasing whole numbers of users, e.g. [50, 100, 200] or \"50,100,200\"")
        v = ",".join(map(str, v))
    if key in LOADGEN_KEYS:
        return _loadgen_value(key, v, where)
    if key == "settle_s":
        settle = _seconds_key(v, positive=False)
        if settle is None:
            raise bad('a number of seconds >= 0, or a duration such as "5s"')
        return settle
    if key == "users":
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise bad("a positive integer")
        return v
    if key == "duration_s":
        duration = _seconds_key(v, positive=True)
        if duration is None:
            raise bad('a positive number of seconds, or a duration such as "2m"')
        return duration
    if key == "spawn_rate":
        if isinstance(v, bool) or not isinstance(v, int | float) or v <= 0:
            raise bad("a positive number")
        return float(v)
    if key == "mode":
        if v not in LOAD_MODES:
            raise bad(" | ".join(LOAD_MODES))
        return v
    if key == "slo_p99":
        try:
            return parse_seconds(v)
        except ValueError:
            raise bad('a latency such as "20ms", "500us" or 0.02 (seconds)') from None
    if key == "slo_failures":
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < 1:
            raise bad("a fraction of calls, 0 <= x < 1 (0.01 = 1%)")
        return float(v)
    if key == "transport":
        if v not in TRANSPORTS:
            raise bad(" | ".join(TRANSPORTS))
        return v
    if key in userload.OWN_KEYS:
        try:
            return userload.check_value(key, v)
        except ValueError as e:
            raise ExperimentError(f"{where}.{key} = {e}") from None
    if key in ("driver", "frame_codec"):
        allowed = ("locust", "xferload") if key == "driver" else ("protobuf", "gob")
        if v not in allowed:
            raise bad(" | ".join(f'"{a}"' for a in allowed))
        return v
    raise ExperimentError(f"{where}.{key}: unknown key; allowed: {', '.join(LOAD_KEYS)}")


# --- cells and the experiment -------------------------------------------------------------------------

BACKENDS = ("process", "docker")
MEMORY_LIMIT_MIN = 6 << 20  # what Docker refuses below ("Minimum memory limit allowed is 6MB")


@dataclass(frozen=True)
class Limits:
    """[servers.limits] of one cell: the cgroup limits its server's container gets."""

    cpus: float | None = None  # cores of CPU time per period (nano_cpus)
    memory: int | None = None  # bytes

    def to_json(self) -> dict[str, Any]:
        return {"cpus": self.cpus, "memory_bytes": self.memory}


def _limit_cpus(v: Any) -> str:
    ncpu = len(os.sched_getaffinity(0))
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= ncpu:
        raise ValueError(f"a number of cores, 0 < cpus <= {ncpu} (this machine's CPUs)")
    return f"{v:g}"


def _limit_memory(v: Any) -> str:
    try:
        n = parse_size(v, lo=MEMORY_LIMIT_MIN)
    except ValueError:
        raise ValueError(f'a size of at least 6MiB, {SIZE_HELP} (e.g. "256MiB")') from None
    return str(v) if isinstance(v, str) else str(n)


LIMIT_KEYS: dict[str, Callable[[Any], str]] = {"cpus": _limit_cpus, "memory": _limit_memory}


@dataclass(frozen=True)
class Cell:
    name: str
    server: str
    binary: str
    flags: dict[str, str]
    env: dict[str, str]  # "" values mean: remove the variable
    args: tuple[str, ...]
    load: Load
    axes: dict[str, str]  # the values that distinguish this cell within its group
    limits: Limits = field(default_factory=Limits)  # backend = "docker": the container's cgroup limits
    image: str | None = None  # backend = "docker": the image; None: the server's default image
    command: command.Command | None = None  # server = "command": what to run and how it is ready

    @property
    def transport(self) -> str:
        return self.load.transport

    @property
    def slug(self) -> str:
        return slug(self.name)

    def server_argv(self) -> list[str]:
        spec = SERVER_SPECS[self.server]
        return [self.binary, *spec.port0_flags, *(f"--{k}={v}" for k, v in self.flags.items()), *self.args]

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
            "load": {k: getattr(self.load, k) for k in LOAD_KEYS},
            **({"limits": self.limits.to_json()} if self.limits != Limits() else {}),
            **({"image": self.image} if self.image else {}),
            **({"command": self.command.to_json()} if self.command else {}),
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


def available_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def auto_pinning() -> Pinning:
    """Disjoint halves of the CPUs this process may use: the server on the lower half, Locust on the upper
    (on 2 CPUs: one each). With one CPU there is nothing to separate."""
    cpus = available_cpus()
    if len(cpus) < 2:
        return Pinning(mode="none")
    half = len(cpus) // 2
    return Pinning(tuple(cpus[:half]), tuple(cpus[half:]), "auto")


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
        return {"latency_ms": self.latency_ms, "jitter_ms": self.jitter_ms, "bandwidth_bytes_s": self.bandwidth,
                "text": self.describe()}


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


AA_SUFFIX = " (A/A)"


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
    profile: bool = False  # sample the server's CPU in every measured window (xferbench/profile/)
    backend: str = "process"  # process | docker (each cell's server in a container: xferbench/containers/)

    @property
    def aa_cell(self) -> str | None:
        return self.baseline + AA_SUFFIX if self.aa else None

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
        cells = [c for c in self.cells if c.name != self.baseline] if self.duet else self.cells
        return sum(self.warmup_s + c.load.duration_s + per_run_overhead_s for c in cells) * self.repeats


def _quick_load(load: Load) -> Load:
    """--quick: 3 s measured (a stepped load: 4 s per level, 1 s of it settling), a spawn as fast as -u."""
    load = replace(load, spawn_rate=max(load.spawn_rate, float(load.users)))
    if load.levels:
        return load.with_step_s(min(load.step_seconds, 4.0), min(load.settle_s, 1.0))
    return replace(load, duration_s=min(load.duration_s, 3.0))


def _table(d: Any, where: str) -> dict[str, Any]:
    if not isinstance(d, dict):
        raise ExperimentError(f"{where}: expected a table")
    return d


def _unknown(d: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    for k in d:
        if k not in allowed:
            raise ExperimentError(f"{where}.{k}: unknown key; allowed: {', '.join(allowed)}")


def _as_axis(v: Any) -> list[Any]:
    return list(v) if isinstance(v, list) else [v]


def parse(data: dict[str, Any], source: str = "<experiment>", default_name: str = "experiment",
          base_dir: Path | None = None) -> Experiment:
    """Validates a decoded TOML document; raises ExperimentError naming `source` and the field. Paths in
    [load] are relative to `base_dir`, the experiment file's folder (default: the working directory)."""
    try:
        return _parse(userload.absolute_document(data, base_dir or Path.cwd()), default_name)
    except ExperimentError as e:
        raise ExperimentError(f"{source}: {e}") from None


def _parse(data: dict[str, Any], default_name: str) -> Experiment:
    _unknown(data, ("experiment", "load", "pinning", "servers", "network", "soak"), "(top level)")
    meta = _table(data.get("experiment", {}), "experiment")
    _unknown(meta, ("name", "description", "repeats", "warmup_s", "baseline", "aa", "alpha", "duet", "profile",
                    "backend"), "experiment")
    backend = meta.get("backend", "process")
    if backend not in BACKENDS:
        raise ExperimentError(f"experiment.backend = {backend!r}: expected {' | '.join(BACKENDS)}")
    name = meta.get("name", default_name)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        raise ExperimentError(f"experiment.name = {name!r}: expected letters, digits, '.', '_' or '-'")
    repeats = meta.get("repeats", DEFAULT_REPEATS)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ExperimentError(f"experiment.repeats = {repeats!r}: expected an integer >= 1")
    warmup_value = meta.get("warmup_s", 2)
    warmup = _seconds_key(warmup_value, positive=False)
    if warmup is None:
        raise ExperimentError(f'experiment.warmup_s = {warmup_value!r}: expected a number of seconds >= 0, or a '
                              'duration such as "30s"')

    load_tab = _table(data.get("load", {}), "load")
    base = Load()
    base_vals = {k: _check_load_value(k, v, "load") for k, v in load_tab.items()}
    base = replace(base, **base_vals)

    aa = meta.get("aa", False)
    if not isinstance(aa, bool):
        raise ExperimentError(f"experiment.aa = {aa!r}: expected true or false")
    alpha = meta.get("alpha", 0.05)
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < 0.5:
        raise ExperimentError(f"experiment.alpha = {alpha!r}: expected a number between 0 and 0.5 (0.05 = 5%)")
    profile = meta.get("profile", False)
    if not isinstance(profile, bool):
        raise ExperimentError(f"experiment.profile = {profile!r}: expected true or false")
    duet = meta.get("duet")
    if duet is not None and not isinstance(duet, bool):
        raise ExperimentError(f"experiment.duet = {duet!r}: expected true or false")
    pinning = _pinning(_table(data.get("pinning", {}), "pinning"))
    network = _network(_table(data["network"], "network")) if "network" in data else None

    groups = data.get("servers")
    if not isinstance(groups, list) or not groups:
        raise ExperimentError("servers: required; expected one or more [[servers]] tables")
    cells: list[Cell] = []
    for gi, group in enumerate(groups):
        cells += _group_cells(_table(group, f"servers[{gi}]"), f"servers[{gi}]", base)
    seen: set[str] = set()
    for c in cells:
        if c.name in seen:
            raise ExperimentError(
                f"servers: two cells are both named {c.name!r}; give the groups different labels or name templates"
            )
        seen.add(c.name)

    baseline = meta.get("baseline", cells[0].name)
    if baseline not in seen:
        raise ExperimentError(
            f"experiment.baseline = {baseline!r}: expected one of the cells: " + ", ".join(c.name for c in cells)
        )
    soak = _soak(_table(data["soak"], "soak")) if "soak" in data else None
    limited = [c.name for c in cells if c.limits != Limits()]
    if limited and backend != "docker":
        raise ExperimentError(f"servers.limits (cell {limited[0]!r}): container limits need experiment.backend = "
                              '"docker"; a host process gets no cgroup limits here')
    commands = [c.name for c in cells if c.command is not None]
    if commands and (backend == "docker" or "soak" in data):
        raise ExperimentError(f"servers (cell {commands[0]!r}): a command server runs as a host process without "
                              '[soak] for now; drop experiment.backend = "docker" / [soak]')
    if profile and any(c.load.mode == "capacity" for c in cells):
        raise ExperimentError('experiment.profile = true: a capacity search (load.mode = "capacity") is not '
                              "profiled (its steps have no one measured window); drop one of them")
    if soak is not None and duet is None:
        duet = False  # a soak judges each run alone: a partner would only add load to the shared CPUs
    duet = _duet(duet, cells, aa, pinning)
    if aa:
        i = next(i for i, c in enumerate(cells) if c.name == baseline)
        cells.insert(i + 1, replace(cells[i], name=baseline + AA_SUFFIX))
    return Experiment(
        name, str(meta.get("description", "")), None, repeats, float(warmup), baseline, pinning, tuple(cells),
        aa, float(alpha), duet, network, soak=soak, profile=profile, backend=backend,
    )


def _soak(tab: dict[str, Any]) -> Soak:
    _unknown(tab, ("growth_max", "held_slack"), "soak")
    growth_max = tab.get("growth_max", Soak.growth_max)
    if isinstance(growth_max, bool) or not isinstance(growth_max, int | float) or not 0 < growth_max < 10:
        raise ExperimentError(f"soak.growth_max = {growth_max!r}: expected a fraction > 0 (0.05 = 5% growth)")
    slack = tab.get("held_slack", Soak.held_slack)
    if isinstance(slack, bool) or not isinstance(slack, int) or slack < 0:
        raise ExperimentError(f"soak.held_slack = {slack!r}: expected an integer >= 0")
    return Soak(float(growth_max), slack)


def _duet(asked: bool | None, cells: list[Cell], aa: bool, pinning: Pinning) -> bool:
    """Duets measure ratios far more steadily (BENCHMARKS.md: half the A/A interval here), but only
    make sense for a fixed offered load: in a closed loop the two servers would race for the CPU, and a
    capacity search moves each cell's rate on its own."""
    modes = {c.load.mode for c in cells}
    pair = len(cells) >= 2 or aa
    if asked is None:
        return pair and modes == {"open"} and pinning.mode != "none"
    if asked and not pair:
        raise ExperimentError("experiment.duet = true: needs a second cell (or aa = true) to run beside the baseline")
    if asked and "capacity" in modes:
        raise ExperimentError('experiment.duet = true: a capacity search (load.mode = "capacity") runs each cell '
                              "alone; set duet = false")
    return asked


_RATE_RE = re.compile(r"^\s*(.+?)\s*/\s*s\s*$")
BANDWIDTH_MIN = 1000  # Toxiproxy's bandwidth toxic counts in units of 1000 bytes per second


def _whole_ms(tab: dict[str, Any], key: str) -> int:
    v = tab[key]
    try:
        seconds = parse_seconds(v)
    except ValueError:
        raise ExperimentError(f'network.{key} = {v!r}: expected a duration such as "20ms" or 0.02 (seconds)') from None
    ms = seconds * 1000
    if abs(ms - round(ms)) > 1e-6:
        raise ExperimentError(f"network.{key} = {v!r}: expected whole milliseconds (Toxiproxy delays in ms)")
    return round(ms)


def _network(tab: dict[str, Any]) -> Network:
    """Validates [network]; every error names the key and what it accepts."""
    _unknown(tab, ("latency", "jitter", "bandwidth"), "network")
    if not tab:
        raise ExperimentError("network: empty table; give latency, jitter and/or bandwidth, or drop [network]")
    latency = _whole_ms(tab, "latency") if "latency" in tab else 0
    jitter = _whole_ms(tab, "jitter") if "jitter" in tab else 0
    if jitter and not latency:
        raise ExperimentError("network.jitter: needs network.latency (jitter varies the latency around it)")
    if jitter > latency:
        raise ExperimentError(f"network.jitter = {tab['jitter']!r}: at most network.latency ({latency} ms); a "
                              "delay cannot go below zero")
    bandwidth = None
    if "bandwidth" in tab:
        v = tab["bandwidth"]
        m = _RATE_RE.match(v) if isinstance(v, str) else None
        try:
            bandwidth = parse_size(m.group(1)) if m else None
        except ValueError:
            bandwidth = None
        if bandwidth is None:
            raise ExperimentError(f'network.bandwidth = {v!r}: expected a rate such as "100MiB/s" or "800000/s" '
                                  f"(a size, {SIZE_HELP}, then /s)")
        if bandwidth < BANDWIDTH_MIN:
            raise ExperimentError(f"network.bandwidth = {v!r}: at least 1000/s (Toxiproxy's unit is 1000 B/s)")
    return Network(latency, jitter, bandwidth)


def _pinning(tab: dict[str, Any]) -> Pinning:
    _unknown(tab, ("server", "generator", "mode"), "pinning")
    explicit = "server" in tab or "generator" in tab
    mode = tab.get("mode", "manual" if explicit else "auto")
    if mode not in PIN_MODES:
        raise ExperimentError(f"pinning.mode = {mode!r}: expected {' | '.join(PIN_MODES)}")
    if mode == "none":
        if explicit:
            raise ExperimentError('pinning: mode = "none" pins nothing; drop server/generator or use mode = "manual"')
        return Pinning(mode="none")
    if mode == "auto":
        if explicit:
            raise ExperimentError('pinning: mode = "auto" chooses the CPU sets itself; drop server/generator or '
                                  'use mode = "manual"')
        return auto_pinning()
    cpus = set(available_cpus())
    pins: dict[str, tuple[int, ...]] = {}
    for k in ("server", "generator"):
        v = tab.get(k)
        if v is None:
            continue
        if not isinstance(v, list) or not v or not all(type(c) is int and c in cpus for c in v):
            raise ExperimentError(f"pinning.{k} = {v!r}: expected a non-empty list of CPU numbers from {sorted(cpus)}")
        pins[k] = tuple(v)
    if not pins:
        raise ExperimentError('pinning: mode = "manual" needs server = [...] and/or generator = [...]')
    if set(pins.get("server", ())) & set(pins.get("generator", ())):
        raise ExperimentError(
            f"pinning: server {list(pins['server'])} and generator {list(pins['generator'])} share CPUs; "
            "the load generator would steal the server's time"
        )
    return Pinning(mode="manual", **pins)


def _group_cells(g: dict[str, Any], where: str, base: Load) -> list[Cell]:
    server = g.get("server")
    if server not in SERVER_SPECS and server != servers.COMMAND.name:
        raise ExperimentError(f"{where}.server = {server!r}: expected {' | '.join([*SERVER_SPECS, servers.COMMAND.name])}")
    spec = servers.get(server)
    cmd = None
    if spec is servers.COMMAND:  # any executable: its own keys, read by xferbench/command.py
        try:
            cmd, g = command.group(g, where)
        except command.CommandError as e:
            raise ExperimentError(str(e)) from None
    _unknown(g, ("server", "label", "name", "binary", "args", "flags", "env", "load", "limits", "image"), where)
    label = g.get("label", spec.label)
    if not isinstance(label, str) or not label:
        raise ExperimentError(f"{where}.label = {label!r}: expected a non-empty string")
    binary = g.get("binary")
    if binary is None:
        binary = spec.default_binary()
    elif not isinstance(binary, str):
        raise ExperimentError(f"{where}.binary = {binary!r}: expected a path")
    else:
        binary = str((ROOT / binary) if not Path(binary).is_absolute() else Path(binary))
    args = g.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ExperimentError(f"{where}.args = {args!r}: expected a list of strings")

    axes: list[tuple[str, str, list[Any]]] = []  # (kind, key, values)
    flags = _table(g.get("flags", {}), f"{where}.flags")
    for k, v in flags.items():
        if k not in spec.flags:
            raise ExperimentError(f"{where}.flags.{k}: unknown flag of {server}; allowed: " + ", ".join(spec.flags))
        vals = []
        for item in _as_axis(v):
            try:
                vals.append(spec.flags[k](item))
            except ValueError as e:
                raise ExperimentError(f"{where}.flags.{k} = {item!r}: expected {e}") from None
        if not vals:
            raise ExperimentError(f"{where}.flags.{k}: empty list")
        axes.append(("flag", k, vals))
    env = _table(g.get("env", {}), f"{where}.env")
    for k, v in env.items():
        if not _ENV_NAME_RE.match(k):
            raise ExperimentError(f"{where}.env.{k}: not a valid environment variable name")
        vals = _as_axis(v)
        if not vals or not all(isinstance(x, str | int | float) and not isinstance(x, bool) for x in vals):
            raise ExperimentError(
                f'{where}.env.{k} = {v!r}: expected a string or a list of strings ("" leaves the variable unset)'
            )
        axes.append(("env", k, [str(x) for x in vals]))
    image = g.get("image")
    if image is not None and (not isinstance(image, str) or not image):
        raise ExperimentError(f"{where}.image = {image!r}: expected an image name (localhost/xferbench/xferd-go:dev)")
    limits = _table(g.get("limits", {}), f"{where}.limits")
    for k, v in limits.items():
        if k not in LIMIT_KEYS:
            raise ExperimentError(f"{where}.limits.{k}: unknown key; allowed: {', '.join(LIMIT_KEYS)}")
        vals = []
        for item in _as_axis(v):
            try:
                vals.append(LIMIT_KEYS[k](item))
            except ValueError as e:
                raise ExperimentError(f"{where}.limits.{k} = {item!r}: expected {e}") from None
        if not vals:
            raise ExperimentError(f"{where}.limits.{k}: empty list")
        axes.append(("limit", k, vals))
    load_over = _table(g.get("load", {}), f"{where}.load")
    for k, v in load_over.items():
        vals = [_check_load_value(k, x, f"{where}.load") for x in _as_axis(v)]
        if not vals:
            raise ExperimentError(f"{where}.load.{k}: empty list")
        if k == "transport":
            for t in vals:
                if t not in spec.transports:
                    raise ExperimentError(f"{where}.load.transport = {t!r}: {server} serves " + " | ".join(spec.transports))
        axes.append(("load", k, vals))
    if "transport" not in load_over and base.transport not in spec.transports:
        if len(spec.transports) == 1:
            axes.append(("load", "transport", [spec.transports[0]]))
        else:
            raise ExperimentError(f"load.transport = {base.transport!r}: {server} serves " + " | ".join(spec.transports))

    template = g.get("name")
    if template is not None and not isinstance(template, str):
        raise ExperimentError(f'{where}.name = {template!r}: expected a template string like "go-{{pool}}"')
    cells = []
    for combo in itertools.product(*(vals for _, _, vals in axes)):
        cflags: dict[str, str] = {}
        cenv: dict[str, str] = {}
        load_vals: dict[str, Any] = {}
        limit_vals: dict[str, str] = {}
        axis_vals: dict[str, str] = {}
        for (kind, key, vals), value in zip(axes, combo, strict=True):
            {"flag": cflags, "env": cenv, "load": load_vals, "limit": limit_vals}[kind][key] = value
            if len(vals) > 1:
                axis_vals[key] = str(value) if value != "" else "default"
        load = _resolve_mode(replace(base, **load_vals), where)
        if template:
            fmt = {
                "label": label,
                "server": server,
                "transport": load.transport,
                **cflags,
                **{k: (v or "default") for k, v in cenv.items()},
                **{k: getattr(load, k) for k in LOAD_KEYS},
                **{k: limit_vals.get(k, "none") for k in LIMIT_KEYS},
            }
            try:
                name = template.format(**fmt)
            except (KeyError, IndexError, ValueError) as e:
                raise ExperimentError(
                    f"{where}.name = {template!r}: unknown field {e}; allowed: " + ", ".join(sorted(fmt))
                ) from None
        else:
            parts = [label, load.transport] + [f"{k}={v}" for k, v in axis_vals.items() if k != "transport"]
            name = "/".join(parts)
        cell_limits = Limits(
            float(limit_vals["cpus"]) if "cpus" in limit_vals else None,
            parse_size(limit_vals["memory"]) if "memory" in limit_vals else None,
        )
        cells.append(Cell(name, server, binary, cflags, cenv, tuple(args), load, axis_vals, cell_limits, image,
                          cmd))
    return cells


def _resolve_mode(load: Load, where: str) -> Load:
    """The load mode a cell runs in, and the keys each mode needs."""
    mode = load.mode or ("open" if load.rate else "closed")
    if mode == "open" and not load.rate:
        raise ExperimentError(f'{where}: load.mode = "open" needs load.rate (arrivals per second)')
    if mode == "closed" and load.rate:
        raise ExperimentError(f'{where}: load.mode = "closed" with load.rate = {load.rate!r}: a closed loop has no '
                              'rate; drop one of them')
    if mode == "capacity" and not load.slo_p99:
        raise ExperimentError(f'{where}: load.mode = "capacity" needs load.slo_p99 (e.g. "20ms")')
    if mode == "capacity" and not load.rate:
        raise ExperimentError(f'{where}: load.mode = "capacity" needs load.rate, the first rate it tries')
    try:
        check_driver(load)
    except ValueError as e:
        raise ExperimentError(f'{where}: load.driver = "{load.driver}": load.{e}') from None
    try:
        userload.check(load)
    except ValueError as e:
        raise ExperimentError(f"{where}: load.{e}") from None
    load = replace(load, mode=mode)
    return _stepped(load, where) if load.steps else load


def _stepped(load: Load, where: str) -> Load:
    """Explicit step levels: the step profile in a closed loop, each level held step_s with settle_s of it
    before the level's window; users is the last level and duration_s levels x step_s."""
    if load.profile != "step":
        raise ExperimentError(f'{where}: load.steps = {load.steps!r} needs load.profile = "step" (it is '
                              f"{load.profile!r})")
    if load.mode != "closed":
        raise ExperimentError(f"{where}: load.steps: the levels are concurrent users in a closed loop; drop "
                              f"load.rate / load.mode = {load.mode!r}")
    if not load.step_s or load.step_s == "auto":
        raise ExperimentError(f"{where}: load.steps needs load.step_s, the seconds each level is held (e.g. 20)")
    if load.settle_s >= load.step_seconds:
        raise ExperimentError(f"{where}: load.settle_s = {load.settle_s:g} leaves nothing of load.step_s = "
                              f"{load.step_s} to measure; want settle_s < step_s")
    return replace(load.with_step_s(load.step_seconds, load.settle_s), users=load.levels[-1])


# What each [load] driver can honour, checked while the experiment is read. Here, beside the schema, because
# generator.py builds its command line from this module's Load: the check could not live there without a cycle.
XFERLOAD_METHODS = {"echo", "meta"}  # one call per operation, as loadgen counts them (see xferload_args)
XFERLOAD_MAX_INFLIGHT = 256


def check_driver(load: Load) -> None:
    """Raises ValueError naming the [load] key the cell's driver cannot honour."""
    if load.driver == "xferload":
        xferload_args(load)
    elif load.frame_codec != "protobuf":
        raise ValueError(f'frame_codec = {load.frame_codec!r} needs driver = "xferload": loadgen (Python) has '
                         "no gob client")


def xferload_args(load: Load) -> list[str]:
    """xferload's flags for the [load] keys it honours: users → --conns (one connection per user, as a
    Locust frame user), inflight → --inflight, rate → --rate, echo_size → --size, meta_entries → --entries,
    meta_size → --entry-size, verify, frame_codec → --codec. sizes and chunk only concern upload and
    download, which it does not run here. Raises ValueError for the rest."""
    opt = loadgen.option
    if load.transport != "frame":
        raise ValueError(f'transport = {load.transport!r}: xferload speaks the frame protocol only; use driver = '
                         '"locust" for gRPC')
    if load.profile != "steady":
        raise ValueError(f'profile = {load.profile!r}: xferload keeps a steady load; use driver = "locust" for '
                         "load profiles")
    methods = [m for m, w in opt("mix").parse(load.mix).items() if w > 0]
    if len(methods) != 1:
        raise ValueError(f"mix = {load.mix!r}: xferload runs one method per process; give one method "
                         '(e.g. "meta:1") or use driver = "locust" for a mix')
    method = methods[0]
    if method not in XFERLOAD_METHODS:
        raise ValueError(f"mix = {load.mix!r}: with xferload the runner drives echo or meta; xferload's "
                         f"{method} calls are frames, while loadgen's {method} is a whole transfer, so their "
                         'figures would not compare; use driver = "locust"')
    if load.spawn_rate < load.users:
        raise ValueError(f"spawn_rate = {load.spawn_rate:g} < users = {load.users}: xferload opens every "
                         "connection at once; set spawn_rate >= users")
    if load.grpc_inflight is not None:
        raise ValueError("grpc_inflight: a gRPC setting; xferload speaks the frame protocol")
    if not 1 <= load.inflight <= XFERLOAD_MAX_INFLIGHT:
        raise ValueError(f"inflight = {load.inflight}: xferload keeps 1..{XFERLOAD_MAX_INFLIGHT} calls in flight "
                         "per connection")
    args = ["--method", method, "--conns", str(load.users), "--inflight", str(load.inflight)]
    rate = opt("rate").parse(load.rate) if load.rate else None
    if rate is not None:
        if rate.poisson:
            raise ValueError(f"rate = {load.rate!r}: xferload sends at constant intervals; give R or constant:R")
        args += ["--rate", f"{rate.per_second:g}"]
    if load.echo_size is not None:
        size = opt("echo_size").parse(load.echo_size)
        if size.kind != "list" or len(size.values) != 1:
            raise ValueError(f"echo_size = {load.echo_size!r}: xferload sends one payload size; give one size")
        args += ["--size", str(size.values[0])]
    if load.meta_entries is not None:
        args += ["--entries", str(opt("meta_entries").parse(load.meta_entries))]
    if load.meta_size is not None:
        lo, hi = opt("meta_size").parse(load.meta_size)
        args += ["--entry-size", f"{lo}-{hi}"]
    if load.verify == "off":
        args += ["--verify=false"]
    if load.frame_codec != "protobuf":  # the flag is new; the default needs none
        args += ["--codec", load.frame_codec]
    return args


def load_file(path: str | Path) -> Experiment:
    p = resolve(path)
    try:
        with open(p, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ExperimentError(f"{p}: not valid TOML: {e}") from None
    except OSError as e:
        raise ExperimentError(f"{p}: {e.strerror}") from None
    exp = parse(data, str(p), default_name=p.stem, base_dir=p.resolve().parent)
    return replace(exp, path=p)


def resolve(path: str | Path) -> Path:
    """A path, or the name of a shipped experiment ("quick" → experiments/quick.toml)."""
    p = Path(path)
    if p.exists() or p.suffix == ".toml" or "/" in str(path):
        return p
    shipped = EXPERIMENTS_DIR / f"{path}.toml"
    return shipped if shipped.exists() else p


def shipped() -> list[Path]:
    return sorted(EXPERIMENTS_DIR.glob("*.toml"))
