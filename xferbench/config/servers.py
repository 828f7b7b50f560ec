"""The server registry: one entry per kind of server, holding everything the runner knows about it, and
`ServerKind`, what the runner asks of any cell's server.

The experiment schema (which servers, flags and transports a file may name), the process and container
backends (binary, listeners, ports, ready line), the profilers, the images and the local stack's scrape
targets all read an entry here, so a new kind of server is one entry (plus its Dockerfile when it has an
image). A user's own server (`server = "command"`) is no entry: its [[servers]] entry describes it
(xferbench/config/command.py's `Command`), and both are a `ServerKind`, the one object a cell holds. This
module is data and small callables only: the experiment's parsing (parse.py, cells.py) reads it, and it imports
nothing of the runner's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from py_client.durations import parse_duration_us
from py_client.sizes import SIZE_HELP, parse_size
from xferbench.config import series
from xferbench.config.files import ROOT

ON_OFF = ("on", "off")
ALLOCATORS = ("glibc", "jemalloc", "tcmalloc", "mimalloc", "pool")

# The calls of the FileTransfer service (proto/PROTOCOL.md), spelled as a [load] mix names them.
CALLS = ("upload", "download", "echo", "meta")

# A flag's validator: the TOML value in, the flag's text out; ValueError says what the flag accepts.
Validator = Callable[[Any], str]
# The samplers of xferbench/measure/profile/: perf on the PID, or the server's own pprof endpoint.
ProfilerKind = Literal["perf", "pprof"]
Unwind = Literal["fp", "dwarf"]
# How the run layer starts a kind's server (xferbench/run/serverstart.py, xferbench/run/containers/backend.py):
# "registry": the entry's binary with its flags, up at its ready line; "command": the user's command line, its
# placeholders filled, up once its ready condition holds (xferbench/run/commandserver.py).
Launcher = Literal["registry", "command"]


@dataclass(frozen=True)
class Profiler:
    """How `profile = true` samples a server: perf on its PID (unwinding by frame pointers or DWARF), or
    GET <pprof>/profile; `why` says what decided it. A command's is chosen once per cell (its pprof address
    with placeholders unfilled, xferbench/config/command.py); `ServerKind.sampling` gives the one of a running
    server, its address filled."""

    kind: ProfilerKind
    unwind: Unwind | None = None  # perf only
    pprof: str | None = None  # pprof only: http://HOST:PORT/PATH, e.g. .../debug/pprof
    why: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, **({"unwind": self.unwind} if self.unwind else {}),
                **({"pprof": self.pprof} if self.pprof else {}), "why": self.why}


class ServerKind(Protocol):
    """What the runner asks of a cell's server, whatever its kind: a registry entry (`ServerSpec`) or a user's
    command (xferbench/config/command.py's `Command`). A cell holds one (`Cell.kind`); the schema, the run and
    the measurements read its answers, never which kind it is."""

    @property
    def name(self) -> str:
        """What [[servers]] server names, the cells' and the rows' `server`."""

    @property
    def label(self) -> str:
        """The default first part of its cell names."""

    @property
    def transports(self) -> tuple[str, ...]: ...

    @property
    def tls_transports(self) -> tuple[str, ...]:
        """The transports it can serve over TLS with the run's certificate (xferbench/config/tls.py); () none."""

    def tls_listener(self, transport: str) -> str:
        """The ready field of the address a TLS load of `transport` connects to."""

    @property
    def flags(self) -> Mapping[str, Validator]:
        """Its flags (their [[servers]] keys), each with its validator."""

    @property
    def flag_path(self) -> str:
        """Where its flags are written in its [[servers]] entry, as an error names them: "flags." (the
        [servers.flags] table) or "" (the entry's own keys)."""

    @property
    def calls(self) -> tuple[str, ...]:
        """The calls it serves; the schema refuses a [load] mix naming another."""

    @property
    def metrics(self) -> bool:
        """Whether it serves a Prometheus /metrics the runner scrapes (False: the client and /proc figures only)."""

    @property
    def requests(self) -> series.Requests | None:
        """Its own request series in its /metrics; None: ours (xfer_requests_total, ...)."""

    @property
    def soak(self) -> bool:
        """Whether [soak] can judge it: its /metrics counts heap, descriptors and threads as ours do."""

    @property
    def profiler_kind(self) -> ProfilerKind | None:
        """The sampler `profile = true` uses on it; None: `profile = true` refuses it."""

    @property
    def image(self) -> Image | None:
        """The image xferbench builds for it (`xferbench images build`); None: none."""

    @property
    def needs_image(self) -> bool:
        """Whether its image is the user's: backend = "docker" needs `image =` and `image =` needs that backend;
        xferbench never builds it."""

    @property
    def launcher(self) -> Launcher:
        """How the run layer starts it."""

    @property
    def clean_exits(self) -> tuple[int | None, ...]:
        """The exit statuses that are no warning once the runner's SIGTERM stopped it."""

    @property
    def probed_ports(self) -> tuple[str, ...]:
        """Listeners beyond the load's that the probe before the first run tries once it is ready (a command's
        placeholder ports past {port}); () when its ready line names them."""

    def default_binary(self) -> str:
        """The program a cell runs when its [[servers]] entry names none."""

    def metrics_at(self, addr: Callable[[str], str]) -> str:
        """Where its /metrics is scraped, from `addr` (a running server's ready addresses, KeyError if absent)."""

    def sampling(self, addr: Callable[[str], str]) -> Profiler | None:
        """How `profile = true` samples it now it runs, its addresses read by `addr` (KeyError if absent)."""

    def config_json(self) -> dict[str, Any]:
        """What a cell's config records of it beyond its name (a command's command line, ready condition, ...)."""


# --- flag validators ----------------------------------------------------------------------------------


def one_of(*allowed: str) -> Validator:
    def check(v: Any) -> str:
        s = str(v)
        if s not in allowed:
            raise ValueError(" | ".join(allowed))
        return s

    return check


def pos_int(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ValueError("a positive integer")
    return str(v)


def gogc(v: Any) -> str:
    if v in ("off", "adaptive") or (isinstance(v, int) and not isinstance(v, bool) and v > 0):
        return str(v)
    if isinstance(v, str) and v.isdigit() and int(v) > 0:
        return v
    raise ValueError('a positive integer (percent) | "off" | "adaptive"')


def bytes_or_off(v: Any) -> str:
    if v == "off":
        return "off"
    try:
        return str(parse_size(v, lo=1))
    except ValueError:
        raise ValueError(f'a size, {SIZE_HELP} | "off"') from None


def size(v: Any) -> str:
    try:
        return str(parse_size(v, lo=1))
    except ValueError:
        raise ValueError(f"a size, {SIZE_HELP}") from None


def store(v: Any) -> str:
    s = str(v)
    if s == "mem" or (s.startswith("disk:") and len(s) > 5):
        return s
    raise ValueError('"mem" | "disk:DIR"')


def conns(v: Any) -> str:
    return "auto" if v == "auto" else pos_int(v)


def duration_ms(v: Any) -> str:
    """A duration both servers parse, as whole milliseconds (xferd-c counts its timeouts in ms)."""
    try:
        us = parse_duration_us(v)
    except ValueError:
        raise ValueError('a duration (e.g. "10s", "500ms" or "1m30s"; a number is seconds)') from None
    if us < 1000 or us % 1000:
        raise ValueError("a duration of whole milliseconds, at least 1ms")
    return f"{us // 1000}ms"


# The limits of PROTOCOL.md, spelled alike by both servers.
LIMIT_FLAGS: dict[str, Validator] = {
    "max-chunk": size,
    "min-chunk": size,
    "max-frame": size,
    "max-conns": conns,
    "max-conn-calls": pos_int,
    "max-conn-unsent": size,
    "max-uploads": pos_int,
    "max-uploads-per-conn": pos_int,
    "max-staged-bytes": size,
    "read-timeout": duration_ms,
    "write-timeout": duration_ms,
    "drain-timeout": duration_ms,
}


# --- entries ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Image:
    """A server's container image: deploy/docker/<name>.Dockerfile, tagged localhost/xferbench/<name>:dev;
    its build context is the server's binary (xferbench/run/containers/images.py builds it)."""

    name: str
    # What the image's hash covers: the sources the binary is built from, not the binary, which embeds
    # `git describe` (and Go its VCS stamp) and would rebuild every image at every commit.
    sources: tuple[str, ...]


@dataclass(frozen=True)
class ServerSpec:
    """A kind of server this repository builds: one entry of SERVERS, and a `ServerKind`."""

    name: str  # what [[servers]] server names, the cells' `server` label, the compose service
    label: str  # the default first part of its cell names
    binary_env: str  # the variable naming another binary (an ASan build, a test's copy)
    binary: str  # the default binary, relative to the repository root
    transports: tuple[str, ...]
    # Listener → its default port, which is also the port inside its image (the Dockerfile's EXPOSE). Each
    # listener has a `--<listener>-addr` flag and a `<listener>=` address on the ready line.
    ports: Mapping[str, int]
    flags: Mapping[str, Validator]  # flag name → validator returning the flag's text value
    ready_word: str  # the first word of its ready line (`<word> ready key=value ...`, proto/PROTOCOL.md)
    profiler: ProfilerKind | None  # None: `profile = true` refuses it
    image: Image | None  # None: no image; backend = "docker" needs `image =` in the experiment
    metrics_key: str = "metrics"  # the listener serving /metrics (and pprof for xferd-go)
    # What the kind can do, read by everything that iterates SERVERS rather than by its name:
    calls: tuple[str, ...] = CALLS  # the calls it serves; the schema refuses a [load] mix naming another
    # It serves Prometheus /metrics on ports[metrics_key]: the runner scrapes it and the local stack lists it as a
    # target. False: its cells get the client and /proc figures only.
    metrics: bool = True
    # The protocol suites of tests/ (conformance, badinput, ...) run against it: it serves every call of its
    # transports with PROTOCOL.md's limits. False for a reference server that implements a part only.
    conformance: bool = True
    # The transports it serves over TLS on listeners of their own (`--tls-<transport>-addr`, ready field
    # `tls_<transport>=`; proto/PROTOCOL.md "TLS"), given `--tls-cert`, `--tls-key` and `--tls-tickets`.
    tls_transports: tuple[str, ...] = ()

    @property
    def port0_flags(self) -> tuple[str, ...]:
        """Every listener on a free loopback port; the bound addresses are read back from the ready line."""
        return tuple(f"--{k}-addr=127.0.0.1:0" for k in self.ports)

    def port0_at(self, address: str) -> tuple[str, ...]:
        """Every listener on a free port: its transports' at `address` (where a load on other hosts reaches them,
        [load] hosts), the others (metrics) on loopback, where only the runner reads them."""
        at = f"[{address}]" if ":" in address else address
        return tuple(f"--{k}-addr={at if k in self.transports else '127.0.0.1'}:0" for k in self.ports)

    def tls_argv(self, transport: str, cert: str, key: str, tickets: str, address: str | None = None) -> list[str]:
        """Its TLS listener for `transport` on a free port (at `address`, else loopback), with the run's certificate."""
        host = address or "127.0.0.1"
        at = f"[{host}]" if ":" in host else host
        return [f"--tls-{transport}-addr={at}:0", f"--tls-cert={cert}", f"--tls-key={key}", f"--tls-tickets={tickets}"]

    def tls_listener(self, transport: str) -> str:
        return f"tls_{transport}"

    def default_binary(self) -> str:
        """$<binary_env>, else the built binary under the repository."""
        return os.environ.get(self.binary_env) or str(ROOT / self.binary)

    # --- its answers as a ServerKind ---

    @property
    def flag_path(self) -> str:
        return "flags."

    @property
    def requests(self) -> series.Requests | None:
        return None  # ours: xfer_requests_total and its kin

    @property
    def soak(self) -> bool:
        return self.metrics

    @property
    def profiler_kind(self) -> ProfilerKind | None:
        return self.profiler

    @property
    def needs_image(self) -> bool:
        return False  # its image is `image`, built by xferbench; `image =` in [[servers]] may name another

    @property
    def launcher(self) -> Launcher:
        return "registry"

    @property
    def clean_exits(self) -> tuple[int | None, ...]:
        return (0, None)  # ours drain and exit 0 on SIGTERM (proto/PROTOCOL.md): anything else is worth a warning

    @property
    def probed_ports(self) -> tuple[str, ...]:
        return ()

    def metrics_at(self, addr: Callable[[str], str]) -> str:
        return addr(self.metrics_key)

    def sampling(self, addr: Callable[[str], str]) -> Profiler | None:
        """perf unwinding by DWARF (xferbench/measure/profile/perf.py says why), or the pprof handlers on its
        metrics listener."""
        if self.profiler == "pprof":
            return Profiler("pprof", pprof=f"http://{addr(self.metrics_key)}/debug/pprof", why="its registry entry")
        if self.profiler == "perf":
            return Profiler("perf", "dwarf", why="its registry entry")
        return None

    def config_json(self) -> dict[str, Any]:
        return {}


GO_SOURCES = ("servers/go/go.mod", "servers/go/go.sum", "servers/go/cmd", "servers/go/internal")
C_SOURCES = ("servers/c/Makefile", "servers/c/src", "servers/c/gen")

SERVERS: dict[str, ServerSpec] = {
    "xferd-go": ServerSpec(
        name="xferd-go",
        label="go",
        binary_env="XFERD_GO_BIN",
        binary="build/bin/xferd-go",
        transports=("grpc", "frame"),
        ports={"grpc": 50051, "frame": 7070, "metrics": 9101},
        flags={
            "pool": one_of(*ON_OFF),
            "gogc": gogc,
            # --gogc adaptive's parameters (docs/DESIGN.md "Adaptive GOGC"); xferd-go checks their ranges.
            "gogc-interval": duration_ms,
            "gogc-window": duration_ms,
            "gogc-min": pos_int,
            "gogc-max": pos_int,
            "memlimit": bytes_or_off,
            "store": store,
            "frame-codec": one_of("protobuf", "gob"),  # proto/GOB.md; drive gob with [load] frame_codec
            **LIMIT_FLAGS,
        },
        ready_word="xferd-go",
        profiler="pprof",
        image=Image("xferd-go", GO_SOURCES),
        tls_transports=("grpc", "frame"),
    ),
    "xferd-c": ServerSpec(
        name="xferd-c",
        label="c",
        binary_env="XFERD_C_BIN",
        binary="build/bin/xferd-c",
        transports=("frame",),
        ports={"frame": 7071, "metrics": 9102},
        flags={
            "alloc": one_of(*ALLOCATORS),
            "io-threads": pos_int,
            "workers": pos_int,
            "store": store,
            **LIMIT_FLAGS,
        },
        ready_word="xferd-c",
        profiler="perf",
        image=Image("xferd-c", C_SOURCES),
        tls_transports=("frame",),
    ),
    # grpc-go's defaults and nothing of ours (servers/go/cmd/bare-echo): the anchor xferd-go's Echo is compared
    # with. Echo only, no flags, no metrics endpoint; perf could sample it, but the profiler reads a registry
    # kind's address at its metrics listener, which it has not.
    "bare-echo": ServerSpec(
        name="bare-echo",
        label="bare",
        binary_env="BARE_ECHO_BIN",
        binary="build/bin/bare-echo",
        transports=("grpc",),
        ports={"grpc": 50052},
        flags={},
        ready_word="bare-echo",
        profiler=None,
        image=None,
        calls=("echo",),
        metrics=False,
        conformance=False,
    ),
}


def get(name: str) -> ServerSpec:
    """The entry of a kind of server this repository builds; KeyError names the known ones."""
    try:
        return SERVERS[name]
    except KeyError:
        raise KeyError(f"unknown server {name!r}; known: {' | '.join(SERVERS)}") from None
