"""The server registry: one entry per kind of server, holding everything the runner knows about it.

The experiment schema (which servers, flags and transports a file may name), the process and container
backends (binary, listeners, ports, ready line), the profilers, the images and the local stack's scrape
targets all read an entry here, so a new kind of server is one entry (plus its Dockerfile when it has an
image). This module is data and small callables only: it sits below `experiment` in the import layers and
imports nothing of the runner's.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from py_client.durations import parse_duration_us
from py_client.sizes import SIZE_HELP, parse_size
from xferbench.config.files import ROOT

ON_OFF = ("on", "off")
ALLOCATORS = ("glibc", "jemalloc", "tcmalloc", "mimalloc", "pool")

# The calls of the FileTransfer service (proto/PROTOCOL.md), spelled as a [load] mix names them.
CALLS = ("upload", "download", "echo", "meta")

# A flag's validator: the TOML value in, the flag's text out; ValueError says what the flag accepts.
Validator = Callable[[Any], str]
# The samplers of xferbench/measure/profile/: perf on the PID, or the server's own pprof endpoint.
ProfilerKind = Literal["perf", "pprof"]


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
    # target. False: its cells get the client and /proc figures only. (COMMAND: each cell's `metrics` key says.)
    metrics: bool = True
    # The protocol suites of tests/ (conformance, badinput, ...) run against it: it serves every call of its
    # transports with PROTOCOL.md's limits. False for a reference server that implements a part only.
    conformance: bool = True

    @property
    def port0_flags(self) -> tuple[str, ...]:
        """Every listener on a free loopback port; the bound addresses are read back from the ready line."""
        return tuple(f"--{k}-addr=127.0.0.1:0" for k in self.ports)

    def default_binary(self) -> str:
        """$<binary_env>, else the built binary under the repository."""
        return os.environ.get(self.binary_env) or str(ROOT / self.binary)


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


# Go's own syntax: GOGC=off, GOMEMLIMIT in bytes; checked here so that a typo fails before anything starts.
def go_gc(v: Any) -> str:
    if v == "off" or (isinstance(v, int) and not isinstance(v, bool) and v > 0):
        return str(v)
    if isinstance(v, str) and v.isdigit() and int(v) > 0:  # "400", as GOGC is written in [servers.env]
        return v
    raise ValueError('a positive integer (percent) | "off"')


def godebug(v: Any) -> str:
    if isinstance(v, str) and re.fullmatch(r"[a-z0-9_]+=[^,\s=]+(,[a-z0-9_]+=[^,\s=]+)*", v):
        return v
    raise ValueError('GODEBUG settings, "name=value[,name=value...]"')


# `server = "command"`: any executable, described by the experiment's own command, ready and metrics keys
# (xferbench/config/command.py) rather than by binary, ports and ready line. Kept out of SERVERS, which lists the
# servers this repository builds (the stack, the images and the test suites iterate it). Its flags are the
# [[servers]] keys that become its environment: LD_PRELOAD for alloc, GOGC, GOMEMLIMIT, GOMAXPROCS, GODEBUG.
COMMAND = ServerSpec(
    name="command",
    label="cmd",
    binary_env="XFERBENCH_COMMAND_BIN",  # unused: the command names its executable
    binary="",
    transports=("grpc", "frame"),
    ports={},
    flags={
        "alloc": one_of(*(a for a in ALLOCATORS if a != "pool")),
        "gogc": go_gc,
        "gomemlimit": bytes_or_off,
        "gomaxprocs": pos_int,
        "godebug": godebug,
    },
    ready_word="",
    profiler=None,  # not one per kind: each cell's command chooses perf or pprof (command.Profiler)
    image=None,
)


def get(name: str) -> ServerSpec:
    """The entry of a kind of server; KeyError names the known ones."""
    if name == COMMAND.name:
        return COMMAND
    try:
        return SERVERS[name]
    except KeyError:
        raise KeyError(f"unknown server {name!r}; known: {' | '.join([*SERVERS, COMMAND.name])}") from None
