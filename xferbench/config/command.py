"""`server = "command"`: any executable measured as a server, described by its [[servers]] entry.

    [[servers]]
    server = "command"
    label = "mine"
    command = ["./my-server", "--port", "{port}", "--metrics", "{metrics_port}"]
    ready = { port = "{port}" }      # or { log = "regex" } or { http = "http://127.0.0.1:{metrics_port}/healthz" };
                                     # timeout = "30s" beside it bounds the wait
    metrics = "http://127.0.0.1:{metrics_port}/metrics"   # optional: scraped like ours
    requests = { counter = 'grpc_server_handled_total{grpc_type="unary"}', errors = 'grpc_code!="OK"' }
                                     # optional, with metrics: its own request series (xferbench/config/series.py)
    pprof = "http://127.0.0.1:{metrics_port}/debug/pprof" # optional: with profile = true, sampled there, not by perf
    cwd = "."                        # optional: its working directory (default: the runner's)
    alloc = ["glibc", "jemalloc"]    # LD_PRELOAD of Debian's library; a dynamically linked, non-Go program only
    gogc = [100, 400]                # gogc, gomemlimit, gomaxprocs, godebug: GOGC, ...; a Go program only
    [servers.env]
    [servers.files]
    "my.conf" = "my.conf.in"         # rendered as {dir}/my.conf at each start (xferbench/config/commandfiles.py)

Every `{port}` and `{<name>_port}` placeholder gets a free loopback port at each start; `{port}` is the
load's target; `{addr}` the address to listen on (127.0.0.1 here); `{dir}` is the start's folder, `{tmpdir}` a
fresh folder removed after it stops; `{cert}` and `{key}` the run's TLS certificate and key (a command using them
may be given `[load] tls`: its load then speaks TLS to `{port}`, xferbench/config/tls.py); any other `{name}` is
refused (xferbench/config/placeholders.py).
Relative paths (command[0] with a slash, the templates, cwd) start at the experiment file's folder. What can be
refused is refused here, while the experiment is read: the program is inspected (an ELF's PT_INTERP says dynamic,
its `.go.buildinfo` section says Go), never started. Starting it, its readiness and the preload check are
xferbench/run/commandserver.py's. With `image` (backend = "docker") the command runs in that image
(xferbench/run/containers/backend.py) and nothing of it is inspected here: alloc and the Go keys are refused
(their variables can be set in [servers.env]), and so are files, cwd, {dir}, {tmpdir}, {cert} and {key}.
With `host` (`[[servers]] host = "NAME"`, xferbench/run/remoteserver.py) the command runs on that host: command[0]
is the host's (an absolute path or a name on its PATH, checked there by xferbench/run/hostcheck.py, with the
program's ELF checks of alloc and the Go keys), so a relative one is refused; it must listen at `{addr}` (or
0.0.0.0), where the load and the runner reach it, and a URL the runner reads must not name loopback; files, cwd,
{dir}, {tmpdir}, {cert} and {key} are this machine's, and refused.

The profiler `profile = true` samples it with is chosen here too, once per cell, and recorded in its config:
pprof at the `pprof` address when one is given; otherwise perf, which unwinds a Go program by its frame
pointers (Go keeps them; perf's DWARF unwinding stops at a Go program's first frame) and anything else by
DWARF (what Debian's libraries need, xferbench/measure/profile/perf.py).

What is read is a `Command`, its cells' kind: it answers what the runner asks of any server
(xferbench/config/servers.py's `ServerKind`) as a registry entry does for ours, so that no reader of a cell
asks which of the two it holds.
"""

from __future__ import annotations

import platform
import re
import signal
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from py_client.durations import parse_duration
from xferbench.config import commandfiles, placeholders, series
from xferbench.config.commandfiles import Template
from xferbench.config.servers import (
    ALLOCATORS,
    CALLS,
    Image,
    Launcher,
    Profiler,
    ProfilerKind,
    Validator,
    bytes_or_off,
    one_of,
    pos_int,
)

KEYS = ("command", "ready", "metrics", "requests", "pprof", "cwd", "files",
        "alloc", "gogc", "gomemlimit", "gomaxprocs", "godebug")
GO_ENV = {"gogc": "GOGC", "gomemlimit": "GOMEMLIMIT", "gomaxprocs": "GOMAXPROCS", "godebug": "GODEBUG"}
READY_TIMEOUT_S = 30.0
# Debian's shared libraries (the ones xferd-c's --alloc preloads, servers/c/src/allocdet.h); glibc: none.
LIB_DIR = Path("/usr/lib") / f"{platform.machine()}-linux-gnu"
ALLOC_LIBS = {"jemalloc": "libjemalloc.so.2", "tcmalloc": "libtcmalloc_minimal.so.4", "mimalloc": "libmimalloc.so.2"}
ReadyKind = Literal["port", "log", "http"]
NAME = "command"  # what [[servers]] server names for any executable


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


# Its flags: the [[servers]] keys that become its environment (LD_PRELOAD for alloc, GOGC, GOMEMLIMIT,
# GOMAXPROCS, GODEBUG: runtime_env), each checked by its validator as any server's flags are.
FLAGS: dict[str, Validator] = {
    "alloc": one_of(*(a for a in ALLOCATORS if a != "pool")),
    "gogc": go_gc,
    "gomemlimit": bytes_or_off,
    "gomaxprocs": pos_int,
    "godebug": godebug,
}
# How a user's server stopped by the runner's SIGTERM may end without anything to warn of: exit 0, or ended by
# the signal itself (a program with no handler for it, a Python server among them: -15; a shell reports 143).
STOPPED_CLEANLY: tuple[int | None, ...] = (0, None, -signal.SIGTERM, 128 + signal.SIGTERM)
# A program of its own, inspected or not, unless its pprof address says otherwise (_profiler).
NATIVE_PROFILER = Profiler("perf", "dwarf", why="a native program")


class CommandError(ValueError):
    """A [[servers]] entry of a command server that cannot run as written; the message names the key."""


@dataclass(frozen=True)
class Ready:
    kind: ReadyKind
    value: str  # a port (placeholder), a regular expression, or a URL (placeholders filled at start)
    timeout_s: float = READY_TIMEOUT_S


@dataclass(frozen=True)
class Command:
    """A command server as its [[servers]] entry describes it: the `ServerKind` its cells hold
    (xferbench/config/servers.py), as a registry entry is for our servers."""

    argv: tuple[str, ...]  # argv[0] an absolute path
    ready: Ready
    metrics_url: str | None  # `metrics`: http(s)://HOST:PORT/PATH, placeholders unfilled; None: no server series
    ports: tuple[str, ...]  # the port placeholders' names, e.g. ("port", "metrics_port")
    profiler: Profiler = NATIVE_PROFILER
    requests: series.Requests | None = None  # its own request series; None: ours (xfer_requests_total, ...)
    files: tuple[Template, ...] = ()  # [servers.files], rendered into {dir} at each start
    cwd: Path | None = None  # None: the runner's working directory
    dirs: tuple[str, ...] = ()  # the folders it uses, "dir" (always with files) and "tmpdir": made at each start
    tls: bool = False  # it is given the run's certificate ({cert}, {key}), so its {port} may serve TLS

    def fill(self, text: str, values: Mapping[str, object]) -> str:
        return placeholders.fill(text, values)

    def to_json(self) -> dict[str, Any]:
        return {
            "argv": list(self.argv),
            "ready": {self.ready.kind: self.ready.value, "timeout_s": self.ready.timeout_s},
            "metrics": self.metrics_url,
            "profiler": self.profiler.to_json(),
            **({"files": {t.name: str(t.source) for t in self.files}} if self.files else {}),
            **({"cwd": str(self.cwd)} if self.cwd else {}),
            **({"requests": self.requests.to_json()} if self.requests else {}),
            **({"tls": True} if self.tls else {}),
        }

    # --- its answers as a ServerKind ---

    @property
    def name(self) -> str:
        return NAME

    @property
    def label(self) -> str:
        return "cmd"

    @property
    def transports(self) -> tuple[str, ...]:
        return ("grpc", "frame")  # whatever {port} serves: the load says which

    @property
    def tls_transports(self) -> tuple[str, ...]:
        return self.transports if self.tls else ()

    def tls_listener(self, transport: str) -> str:
        return transport  # {port}: a command serving TLS serves it where the load connects

    @property
    def flags(self) -> Mapping[str, Validator]:
        return FLAGS

    @property
    def flag_path(self) -> str:
        return ""  # alloc, gogc, ... are keys of the entry itself

    @property
    def calls(self) -> tuple[str, ...]:
        return CALLS

    @property
    def metrics(self) -> bool:
        return self.metrics_url is not None

    @property
    def soak(self) -> bool:
        return False  # a soak reads our servers' own counts, not a command's series

    @property
    def profiler_kind(self) -> ProfilerKind | None:
        return self.profiler.kind

    @property
    def image(self) -> Image | None:
        return None  # the user's, named by the cell's `image`

    @property
    def needs_image(self) -> bool:
        return True

    @property
    def launcher(self) -> Launcher:
        return "command"

    @property
    def clean_exits(self) -> tuple[int | None, ...]:
        return STOPPED_CLEANLY

    @property
    def probed_ports(self) -> tuple[str, ...]:
        return tuple(p for p in self.ports if p != "port")

    def default_binary(self) -> str:
        return self.argv[0]

    def metrics_at(self, addr: Callable[[str], str]) -> str:
        return addr("metrics_url")  # the whole URL (any path, https), as xferbench/run/commandserver.py filled it

    def sampling(self, addr: Callable[[str], str]) -> Profiler | None:
        """Its cell's profiler, a pprof address filled with the ports of this start (the ready field `ports`)."""
        if self.profiler.pprof is None:
            return self.profiler
        ports = dict(kv.split("=", 1) for kv in addr("ports").split(",") if kv)
        values: dict[str, object] = {k: int(v) for k, v in ports.items()}
        values[placeholders.ADDR] = placeholders.in_url(addr(placeholders.ADDR))
        return replace(self.profiler, pprof=self.fill(self.profiler.pprof, values))

    def config_json(self) -> dict[str, Any]:
        return {"command": self.to_json()}


def alloc_library(alloc: str) -> Path | None:
    """The library LD_PRELOAD names for an allocator; None for glibc's own malloc."""
    return LIB_DIR / ALLOC_LIBS[alloc] if alloc in ALLOC_LIBS else None


def runtime_env(flags: Mapping[str, str], env: Mapping[str, str]) -> dict[str, str]:
    """The variables a cell's alloc and Go settings set, on top of `env` (an LD_PRELOAD there stays, after)."""
    out = {GO_ENV[k]: v for k, v in flags.items() if k in GO_ENV}
    lib = alloc_library(flags.get("alloc", "glibc"))
    if lib is not None:
        out["LD_PRELOAD"] = ":".join(p for p in (str(lib), env.get("LD_PRELOAD", "")) if p)
    return out


# What a command's [[servers]] shares with ours; image and limits: backend = "docker" (the image is the user's).
GROUP_KEYS = ("server", "label", "name", "env", "load", "image", "limits", "host")


def group(g: Mapping[str, Any], where: str, folder: Path) -> tuple[Command, dict[str, Any]]:
    """A command server's [[servers]] entry as the schema reads any server's: its command, and the entry
    with the alloc/Go keys as its flags (its program is its cells' binary: `Command.default_binary`). `folder`:
    the experiment file's, where its relative paths start."""
    for k in g:
        if k not in (*GROUP_KEYS, *KEYS):
            raise CommandError(f"{where}.{k}: unknown key of a command server; allowed: " + ", ".join((*GROUP_KEYS, *KEYS)))
    try:
        cmd, flags = parse(g, where, folder)
    except (commandfiles.PathError, placeholders.PlaceholderError) as e:
        raise CommandError(str(e)) from None
    rest = {k: v for k, v in g.items() if k in GROUP_KEYS}
    return cmd, {**rest, "flags": flags}


def parse(g: Mapping[str, Any], where: str, folder: Path) -> tuple[Command, dict[str, Any]]:
    """The command of a [[servers]] entry, and its alloc/Go keys as a flags table (values still unchecked:
    FLAGS' validators check them, as any server's flags)."""
    in_image = "image" in g  # backend = "docker": command[0] is the image's, never looked at on this host
    on_host = "host" in g and not in_image  # command[0] is that host's: checked there (xferbench/run/hostcheck.py)
    argv = _argv(g.get("command"), where, folder if not (in_image or on_host) else None, on_host)
    ready = _ready(g.get("ready"), where)
    metrics = _metrics(g.get("metrics"), where)
    requests = _requests(g.get("requests"), metrics, where)
    pprof = _pprof(g.get("pprof"), where)
    if on_host:  # before they are read: this machine's paths, which the host would not have
        _refuse_on_host(g, [k for k in ("files", "cwd") if k in g], where)
    files = commandfiles.templates(g.get("files"), folder, where)
    cwd = commandfiles.cwd(g.get("cwd"), folder, where)
    keyed = _checked_texts(g, argv, ready, where)
    texts = [t for _, t in keyed] + [t.text for t in files]
    used = placeholders.used(texts)
    # What the server is given (not where the runner looks: the default ready port is {port} itself).
    given = [t for k, t in keyed if k.startswith((f"{where}.command", f"{where}.env"))] + [t.text for t in files]
    if "port" not in placeholders.used(given):
        raise CommandError(
            f"{where}.command = {list(argv)!r}: needs a {{port}} placeholder (in command, [servers.env] or a "
            "[servers.files] template), the port the load connects to (the runner gives it a free loopback port)"
        )
    names = sorted((n for n in used if placeholders.PORT.fullmatch(n)), key=lambda n: (n != "port", n))
    flags = {k: g[k] for k in ("alloc", *GO_ENV) if k in g}
    if in_image:
        _check_image(g, flags, texts, where)
        return Command(argv, ready, metrics, tuple(names), _profiler(None, pprof), requests), flags
    if on_host:
        _check_on_host(g, keyed, given, where)
        return Command(argv, ready, metrics, tuple(names), _profiler(None, pprof, "on another host"), requests), flags
    _check_program(Path(argv[0]), flags, where)
    dirs = tuple(d for d in placeholders.DIRS if d in used or (d == "dir" and files))
    return Command(argv, ready, metrics, tuple(names), _profiler(Path(argv[0]), pprof), requests, files, cwd,
                   dirs, tls=bool(used & set(placeholders.FILES))), flags


def _checked_texts(g: Mapping[str, Any], argv: tuple[str, ...], ready: Ready, where: str) -> list[tuple[str, str]]:
    """Every text whose placeholders are filled at a start, by its key, each checked for unknown ones (an
    address takes ports only); the templates' are checked as they are read."""
    texts: list[tuple[str, str, bool]] = [(f"{where}.command[{i}]", a, True) for i, a in enumerate(argv)]
    texts.append((f"{where}.ready.{ready.kind}", ready.value, ready.kind == "log"))
    texts += [(f"{where}.{k}", g[k], False) for k in ("metrics", "pprof") if isinstance(g.get(k), str)]
    env = g.get("env", {})
    if isinstance(env, Mapping):
        texts += [(f"{where}.env.{k}", str(x), True) for k, v in env.items() for x in (v if isinstance(v, list) else [v])]
    for key, text, dirs in texts:
        placeholders.check(text, key, dirs)
    return [(k, t) for k, t, _ in texts]


def _check_image(g: Mapping[str, Any], flags: Mapping[str, Any], texts: list[str], where: str) -> None:
    """What a command in the user's image cannot have: its program is not inspected, and the runner's folders
    are not in the container."""
    if flags:
        key = next(iter(flags))
        raise CommandError(
            f"{where}.{key}: not for a command server in a container (its program cannot be inspected "
            'before it runs); set the variable in [servers.env] instead, e.g. GOGC = ["100", "400"] '
            'or LD_PRELOAD = "<the library\'s path in the image>"'
        )
    mine = [k for k in ("files", "cwd") if k in g] + [
        f"{{{n}}}" for n in placeholders.used(texts) if n in (*placeholders.DIRS, *placeholders.FILES)]
    if mine:
        raise CommandError(f"{where}: {mine[0]} is not for a command server in a container (the runner's folders "
                           "are not in it): put the file in the image")


def _check_on_host(g: Mapping[str, Any], keyed: list[tuple[str, str]], given: list[str], where: str) -> None:
    """What a command on another host cannot have: this machine's folders and files; a listener the load and the
    runner cannot reach (it must listen at {addr}, the host's address, or 0.0.0.0); a URL the runner reads at
    loopback (this machine's, not the host's)."""
    on = _on_host(g)
    used = sorted(placeholders.used(t for _, t in keyed))
    _refuse_on_host(g, [f"{{{n}}}" for n in used if n in (*placeholders.DIRS, *placeholders.FILES)], where)
    if placeholders.ADDR not in placeholders.used(given) and not any(WILDCARD in t for t in given):
        raise CommandError(f"{where}.command = {list(g['command'])!r}: {on} must listen at {{addr}}, the host's "
                           "address, where the load and the runner reach it (e.g. \"--listen={addr}:{port}\"), or at "
                           f"{WILDCARD}; neither is in its command or [servers.env]")
    for key, text in keyed:
        if key.endswith((".metrics", ".pprof", ".ready.http")) and LOOPBACK.match(text):
            raise CommandError(f"{key} = {text!r}: {on} is reached from this machine, where loopback is not the "
                               f"host: name it by {{addr}}, e.g. \"http://{{addr}}:{{metrics_port}}/metrics\"")


def _on_host(g: Mapping[str, Any]) -> str:
    return f"a command server on another host (host = {g['host']!r})"


def _refuse_on_host(g: Mapping[str, Any], mine: list[str], where: str) -> None:
    """The first of `mine` (keys or placeholders naming this machine's folders and files) refused."""
    if mine:
        raise CommandError(f"{where}: {mine[0]} is not for {_on_host(g)}: the runner's folders and files are this "
                           "machine's; put the file on the host and give its path there")


# A listener on every address of the host; a URL whose host is this machine's loopback.
WILDCARD = "0.0.0.0"
LOOPBACK = re.compile(r"https?://(127\.[0-9.]+|localhost|\[::1\])(:|/|$)", re.I)


def _metrics(v: Any, where: str) -> str | None:
    if v is not None and not (isinstance(v, str) and re.fullmatch(r"https?://[^/\s]+/\S*", v)):
        raise CommandError(
            f"{where}.metrics = {v!r}: expected the URL the runner scrapes, http(s)://HOST:PORT/PATH, "
            'e.g. "http://127.0.0.1:{metrics_port}/metrics" or "https://127.0.0.1:{port}/actuator/prometheus"'
        )
    return v


def _requests(v: Any, metrics: str | None, where: str) -> series.Requests | None:
    if v is None:
        return None
    if metrics is None:
        raise CommandError(f"{where}.requests: names series of the server's /metrics, which needs the metrics key "
                           '(e.g. metrics = "http://127.0.0.1:{metrics_port}/metrics")')
    try:
        return series.requests(v, f"{where}.requests")
    except series.SelectorError as e:
        raise CommandError(str(e)) from None


def _pprof(v: Any, where: str) -> str | None:
    if v is None:
        return None
    if not (isinstance(v, str) and re.fullmatch(r"http://[^/\s]+(/\S*)?", v)):
        raise CommandError(
            f"{where}.pprof = {v!r}: expected the http:// address its pprof handlers are under (the runner "
            'GETs <pprof>/profile?seconds=N), e.g. "http://127.0.0.1:{metrics_port}/debug/pprof"'
        )
    return v.rstrip("/")


def _profiler(exe: Path | None, pprof: str | None, elsewhere: str = "in an image") -> Profiler:
    """The profiler `profile = true` would use: chosen here, once, from the program itself (None: `elsewhere`)."""
    if pprof is not None:
        return Profiler("pprof", pprof=pprof, why="its pprof address")
    if exe is None:
        return Profiler("perf", "dwarf", why=f"a program {elsewhere}, not inspected: perf, unwound by DWARF")
    try:
        info = elf_info(exe)
        what = "a native program" if info is not None else "not an ELF program (a script: its interpreter)"
    except (OSError, IndexError, struct.error):
        info, what = None, "a program not readable now"  # its start will say why; DWARF suits whatever runs
    if info is not None and info[1]:
        return Profiler("perf", "fp", why="a Go program without a pprof address: perf, unwound by frame pointers")
    return Profiler("perf", "dwarf", why=f"{what}: perf, unwound by DWARF")


def _argv(v: Any, where: str, folder: Path | None, on_host: bool = False) -> tuple[str, ...]:
    """command, its program made absolute; `folder` None: in an image or on another host (`on_host`), where it is
    not looked at here."""
    if not isinstance(v, list) or not v or not all(isinstance(a, str) and a for a in v):
        raise CommandError(
            f'{where}.command = {v!r}: required; expected a list of strings, e.g. ["./my-server", "--port", "{{port}}"]'
        )
    if on_host and "/" in v[0] and not v[0].startswith("/"):
        raise CommandError(f"{where}.command[0] = {v[0]!r}: a command server on another host (host = ...) runs the "
                           "host's program: give its absolute path there or a name on the host's PATH (a relative "
                           "path would start at the experiment file's folder, a folder of this machine)")
    if folder is None:  # the image's (or host's) path or a name on its PATH, as `docker run IMAGE ...` takes it
        return tuple(v)
    return (str(commandfiles.program(v[0], folder, where)), *v[1:])


def _ready(v: Any, where: str) -> Ready:
    if v is None:
        return Ready("port", "{port}")  # listening on the load's port is what the load needs
    if not isinstance(v, Mapping):
        raise CommandError(f"{where}.ready = {v!r}: expected a table: {{ port = ... }}, {{ log = ... }} or {{ http = ... }}")
    kinds = [k for k in ("port", "log", "http") if k in v]
    unknown = set(v) - {"port", "log", "http", "timeout"}
    if len(kinds) != 1 or unknown:
        raise CommandError(f"{where}.ready = {dict(v)!r}: expected exactly one of port, log, http (and timeout)")
    kind: ReadyKind = kinds[0]  # type: ignore[assignment]
    value = v[kind]
    value = str(value) if isinstance(value, int) and not isinstance(value, bool) and kind == "port" else value
    if not isinstance(value, str) or not value:
        raise CommandError(f"{where}.ready.{kind} = {value!r}: expected a string")
    if kind == "port" and not (value.isdigit() or re.fullmatch(r"\{(" + placeholders.PORT.pattern + r")\}", value)):
        raise CommandError(f'{where}.ready.port = {value!r}: expected a port placeholder such as "{{port}}"')
    if kind == "log":
        try:
            re.compile(value)
        except re.error as e:
            raise CommandError(f"{where}.ready.log = {value!r}: not a regular expression: {e}") from None
    if kind == "http" and not value.startswith("http://"):
        raise CommandError(f"{where}.ready.http = {value!r}: expected an http:// URL")
    timeout = v.get("timeout", READY_TIMEOUT_S)
    try:
        timeout_s = parse_duration(timeout)
    except ValueError:
        timeout_s = 0.0
    if timeout_s <= 0:
        raise CommandError(f'{where}.ready.timeout = {timeout!r}: expected a positive duration such as "10s"')
    return Ready(kind, value, timeout_s)


def _check_program(exe: Path, flags: Mapping[str, Any], where: str) -> None:
    """alloc needs a dynamically linked program that calls malloc (not Go's runtime); the Go keys need Go."""
    if not flags:
        return
    key = next(iter(flags))
    try:
        info = elf_info(exe)
    except OSError as e:
        raise CommandError(f"{where}.{key}: cannot inspect {exe} (command[0]): {e.strerror}") from None
    check_elf(str(exe), info, flags, where, Path.exists)


def check_elf(exe: str, info: tuple[bool, bool] | None, flags: Mapping[str, Any], where: str,
              installed: Callable[[Path], bool]) -> None:
    """The program's ELF facts (elf_info's, read here or on the server's host) against alloc and the Go keys;
    `installed` says whether an allocator's library is there. Raises CommandError naming the key."""
    if not flags:
        return
    key = next(iter(flags))
    if info is None:
        raise CommandError(f"{where}.{key}: {exe} is not an ELF program (a script?); give the program itself as command[0]")
    dynamic, go = info
    if "alloc" in flags and go:
        raise CommandError(
            f"{where}.alloc: {exe} is a Go program: Go's runtime allocates its own heap, not through "
            "malloc, so an allocator preload would change nothing (use gogc / gomemlimit)"
        )
    if "alloc" in flags and not dynamic:
        raise CommandError(f"{where}.alloc: {exe} is statically linked: LD_PRELOAD cannot replace its malloc")
    allocs = flags.get("alloc", [])
    for a in allocs if isinstance(allocs, list) else [allocs]:
        lib = alloc_library(str(a))
        if lib is not None and not installed(lib):
            raise CommandError(f"{where}.alloc = {a!r}: {lib} is not installed (Debian's package of {a})")
    go_keys = [k for k in flags if k in GO_ENV]
    if go_keys and not go:
        raise CommandError(
            f"{where}.{go_keys[0]}: {exe} is not a Go program (no .go.buildinfo section), so "
            f"{GO_ENV[go_keys[0]]} would do nothing"
        )


def elf_info(path: Path) -> tuple[bool, bool] | None:
    """(dynamically linked, built by Go) of an ELF64 little-endian program; None when it is not one. Dynamic:
    a PT_INTERP program header (the loader that honours LD_PRELOAD). Go: a `.go.buildinfo` section, what
    `go version -m` reads."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", data, 0x36)
    dynamic = any(struct.unpack_from("<I", data, phoff + i * phentsize)[0] == 3 for i in range(phnum))  # PT_INTERP
    names = []
    if shoff and shstrndx < shnum:
        str_off = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)[0]
        for i in range(shnum):
            name_off = struct.unpack_from("<I", data, shoff + i * shentsize)[0]
            end = data.find(b"\0", str_off + name_off)
            names.append(data[str_off + name_off : end])
    return dynamic, b".go.buildinfo" in names
