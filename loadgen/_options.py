"""Every `--xfer-*` option, declared once: name, default, help and parser.

From `OPTIONS` come Locust's parser registration (`register`), the typed `Config` a run uses
(`config_from`), the runner's validation of an experiment's `[load]` values (`check_text`) and the
runner's Locust command line (`command_line`). No Locust import here: the runner imports this module.

Every parser takes the option's text and raises ValueError with a message naming the option, the value
and what it accepts.
"""

from __future__ import annotations

import argparse
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from loadgen._call_options import CALL_HELP, parse_call, parse_import_path, parse_proto, parse_protoset
from loadgen._checks import CHECK_HELP, Check, parse_checks
from loadgen._template import TEMPLATE_HELP, Template, parse_data
from py_client.durations import DURATION_HELP, parse_duration
from py_client.sizes import MIB, SIZE_HELP, parse_size

MAX_FILE = 1 << 30  # PROTOCOL.md: declared file size limit
MAX_CHUNK = 4 * MIB  # PROTOCOL.md: chunk size, Read length and Echo payload limit

PROFILES = ("steady", "ramp", "step", "spike", "soak")
METHODS = ("upload", "download", "echo", "meta")


# ---- sizes: a list or a distribution ----------------------------------------------------------------

SIZES_HELP = ("a list of sizes, optionally weighted: '64KiB,1MiB,10MiB' or '64KiB*3,1MiB'; "
              "or 'uniform:MIN:MAX'; or 'lognormal:MEDIAN:SIGMA[:MAX]' (SIGMA of ln(size), "
              f"MAX default 64 x MEDIAN); each size {SIZE_HELP}")


@dataclass(frozen=True)
class SizeSpec:
    """Picks transfer sizes. kind: list | uniform | lognormal."""

    kind: str
    values: tuple[int, ...] = ()
    weights: tuple[float, ...] = ()
    lo: int = 0
    hi: int = 0
    median: int = 0
    sigma: float = 0.0

    @property
    def max_size(self) -> int:
        return max(self.values) if self.kind == "list" else self.hi

    def pick(self, rng: random.Random) -> int:
        if self.kind == "list":
            if len(self.values) == 1:
                return self.values[0]
            return rng.choices(self.values, self.weights)[0]
        if self.kind == "uniform":
            return rng.randint(self.lo, self.hi)
        v = round(self.median * math.exp(rng.gauss(0.0, self.sigma)))
        return min(max(v, self.lo), self.hi)


def _uniform(parts: list[str], hi: int) -> SizeSpec:
    if len(parts) != 3:
        raise ValueError("want uniform:MIN:MAX")
    lo, up = (parse_size(p, hi=hi) for p in parts[1:])
    if lo > up:
        raise ValueError(f"MIN {lo} is above MAX {up}")
    return SizeSpec("uniform", lo=lo, hi=up)


def _lognormal(parts: list[str], hi: int) -> SizeSpec:
    if len(parts) not in (3, 4):
        raise ValueError("want lognormal:MEDIAN:SIGMA[:MAX]")
    median = parse_size(parts[1], what="MEDIAN", lo=1, hi=hi)
    try:
        sigma = float(parts[2])
    except ValueError:
        raise ValueError(f"SIGMA {parts[2]!r} is not a number") from None
    if not 0 <= sigma <= 10:
        raise ValueError(f"SIGMA {parts[2]!r} is outside 0..10")
    up = parse_size(parts[3], what="MAX", lo=median, hi=hi) if len(parts) == 4 else min(hi, 64 * median)
    return SizeSpec("lognormal", lo=1, hi=up, median=median, sigma=sigma)


def _size_list(text: str, hi: int) -> SizeSpec:
    values: list[int] = []
    weights: list[float] = []
    for item in text.split(","):
        size_text, star, w_text = item.partition("*")
        values.append(parse_size(size_text, hi=hi))
        w = 1.0
        if star:
            try:
                w = float(w_text)
            except ValueError:
                raise ValueError(f"weight {w_text!r} is not a number") from None
            if not 0 < w < math.inf:
                raise ValueError(f"weight {w_text!r} must be a positive number")
        weights.append(w)
    return SizeSpec("list", values=tuple(values), weights=tuple(weights))


def parse_sizes(text: str, *, what: str = "--xfer-sizes", hi: int = MAX_FILE) -> SizeSpec:
    t = text.strip()
    if not t:
        raise ValueError(f"{what} is empty: want {SIZES_HELP}")
    try:
        kind = t.split(":", 1)[0] if ":" in t else ""
        if kind == "uniform":
            return _uniform(t.split(":"), hi)
        if kind == "lognormal":
            return _lognormal(t.split(":"), hi)
        if kind:
            raise ValueError(f"unknown distribution {kind!r}")
        return _size_list(t, hi)
    except ValueError as e:
        raise ValueError(f"{what} {text!r}: {e}; accepted: {SIZES_HELP}, at most {hi} bytes") from None


def parse_echo_sizes(text: str) -> SizeSpec:
    return parse_sizes(text, what="--xfer-echo-size", hi=MAX_CHUNK)


# ---- small scalar options ---------------------------------------------------------------------------

def parse_chunk(text: str) -> int:
    try:
        return parse_size(text, what="chunk size", lo=1, hi=MAX_CHUNK)
    except ValueError as e:
        raise ValueError(f"--xfer-chunk: {e}; accepted: 1..4MiB, e.g. 64KiB or 1MiB") from None


def parse_inflight(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= 1024:
        raise ValueError(f"--xfer-inflight {text!r}: want a whole number of calls in flight, 1..1024")
    return n


META_MAX_ENTRIES = 65536  # the client's own bound; servers refuse more than their --max-meta-entries
META_MAX_SIZE = 256  # PROTOCOL.md's longest key, so every drawn key is one the servers accept


def parse_meta_entries(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if not 0 <= n <= META_MAX_ENTRIES:
        raise ValueError(f"--xfer-meta-entries {text!r}: want a whole number of entries, 0..{META_MAX_ENTRIES}")
    return n


def parse_meta_size(text: str) -> tuple[int, int]:
    lo, sep, hi = text.strip().partition("-")
    try:
        pair = (int(lo), int(hi if sep else lo))
    except ValueError:
        pair = (-1, -1)
    if not 0 <= pair[0] <= pair[1] <= META_MAX_SIZE:
        raise ValueError(f"--xfer-meta-size {text!r}: want MIN-MAX bytes with 0 <= MIN <= MAX <= {META_MAX_SIZE}, "
                         f"e.g. 8-64")
    return pair


def parse_grpc_inflight(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= 1024:
        raise ValueError(f"--xfer-grpc-inflight {text!r}: want a whole number of calls in flight per user, 1..1024")
    return n


CONNECTIONS_HELP = ("user (one connection per Locust user for its life), call (a new connection per operation, "
                    "closed after it) or pool:N (N connections per Locust process, 1..1024, that the users borrow)")


@dataclass(frozen=True)
class Connections:
    """How users hold connections. kind: user | call | pool (size connections per process)."""

    kind: str
    size: int = 0

    def __str__(self) -> str:
        return f"pool:{self.size}" if self.kind == "pool" else self.kind


def parse_connections(text: str) -> Connections:
    t = text.strip().lower()
    if t in ("user", "call"):
        return Connections(t)
    kind, sep, n_text = t.partition(":")
    try:
        n = int(n_text) if kind == "pool" and sep else 0
    except ValueError:
        n = 0
    if not 1 <= n <= 1024:
        raise ValueError(f"--xfer-connections {text!r}: want {CONNECTIONS_HELP}")
    return Connections("pool", n)


def parse_verify(text: str) -> bool:
    t = text.strip().lower()
    if t in ("on", "true", "yes", "1"):
        return True
    if t in ("off", "false", "no", "0"):
        return False
    raise ValueError(f"--xfer-verify {text!r}: want on or off")


def parse_profile(text: str) -> str:
    if text not in PROFILES:
        raise ValueError(f"--xfer-profile {text!r}: want one of {', '.join(PROFILES)}")
    return text


STEPS_MAX = 100_000  # users of one level: far above what one machine's Locust runs; a typo guard


def parse_steps(text: str) -> tuple[int, ...]:
    """'' or 'off' -> () (the step profile's five equal steps of -u/5); '50,100,200' -> explicit levels, each a
    whole number of users > 0, strictly increasing (a stress matrix climbs; a level that repeats or falls would
    be measured as another point of the same curve)."""
    t = text.strip().lower()
    if t in ("", "off"):
        return ()
    levels: list[int] = []
    for item in t.split(","):
        item = item.strip()
        if not item.isdigit() or not 0 < int(item) <= STEPS_MAX:
            raise ValueError(f"--xfer-steps {text!r}: level {item!r} is not a whole number of users 1..{STEPS_MAX}; "
                             "want increasing levels such as 50,100,200,500,1000, or off")
        if levels and int(item) <= levels[-1]:
            raise ValueError(f"--xfer-steps {text!r}: level {item} does not increase on {levels[-1]}; want strictly "
                             "increasing levels such as 50,100,200,500,1000")
        levels.append(int(item))
    return tuple(levels)


def parse_step_s(text: str) -> float | None:
    """'' or 'auto' -> None (-t divided among the levels); else seconds each level of --xfer-steps is held."""
    if text.strip().lower() in ("", "auto"):
        return None
    return _seconds(text, 86400, f"--xfer-step-s {text!r}: want seconds each step is held, 0 < S <= 86400, or auto")


MIX_HELP = ("METHOD:WEIGHT pairs joined by ',', METHOD one of upload, download, echo, meta, WEIGHT a number >= 0 "
            "(0 or leaving a method out disables it), e.g. upload:1,download:1,echo:0.5")


def parse_mix(text: str) -> dict[str, float]:
    """'upload:1,download:1,echo:1' -> weights; unnamed methods get 0; at least one must be > 0."""
    mix = dict.fromkeys(METHODS, 0.0)
    seen: set[str] = set()
    for item in text.split(","):
        name, sep, w_text = item.strip().partition(":")
        name = name.strip().lower()
        if not sep or name not in METHODS:
            raise ValueError(f"--xfer-mix {text!r}: bad entry {item!r}; accepted: {MIX_HELP}")
        if name in seen:
            raise ValueError(f"--xfer-mix {text!r}: {name} given twice; accepted: {MIX_HELP}")
        seen.add(name)
        try:
            w = float(w_text)
        except ValueError:
            w = -1.0
        if not 0 <= w < math.inf:
            raise ValueError(f"--xfer-mix {text!r}: weight {w_text!r} of {name}; accepted: {MIX_HELP}")
        mix[name] = w
    if not any(w > 0 for w in mix.values()):
        raise ValueError(f"--xfer-mix {text!r}: every weight is 0; accepted: {MIX_HELP}")
    return mix


@dataclass(frozen=True)
class Rate:
    per_second: float
    poisson: bool


def parse_rate(text: str) -> Rate | None:
    """'' or 'off' -> None (closed loop); 'R', 'constant:R' or 'poisson:R' arrivals per second."""
    t = text.strip().lower()
    if t in ("", "off", "none"):
        return None
    kind, sep, value = t.partition(":")
    if not sep:
        kind, value = "constant", kind
    try:
        r = float(value)
    except ValueError:
        r = -1.0
    if kind not in ("constant", "poisson") or not 0 < r <= 1e7:
        raise ValueError(f"--xfer-rate {text!r}: want arrivals per second as R, constant:R or poisson:R "
                         "(0 < R <= 1e7), or off")
    return Rate(r, kind == "poisson")


def parse_metrics_port(text: str) -> int | None:
    """'off' -> None; 0 -> any free port; else the port (workers take the next free ones)."""
    t = text.strip().lower()
    if t in ("off", "none", "-1"):
        return None
    try:
        p = int(t)
    except ValueError:
        p = -1
    if not 0 <= p <= 65535:
        raise ValueError(f"--xfer-metrics-port {text!r}: want a TCP port 1..65535, 0 for any free port, "
                         "or off")
    return p


def parse_timeout(text: str) -> float:
    return _seconds(text, 3600, f"--xfer-timeout {text!r}: want seconds per call, 0 < T <= 3600")


def _seconds(text: str, hi: float, error: str) -> float:
    """A duration (py_client/durations.py: 15, 15s, 500ms, 1m30s) in (0, hi] seconds; else ValueError(error
    and the grammar)."""
    try:
        v = parse_duration(text)
    except ValueError:
        v = -1.0
    if not 0 < v <= hi:
        raise ValueError(f"{error}; a duration is {DURATION_HELP}")
    return v


def parse_text(text: str) -> str:
    return text


def parse_tls_ca(text: str) -> str:
    """'' -> plaintext; else the CA file's path (read, and refused when it is no CA file, at start:
    loadgen._tls.start_check, on the machine Locust runs on)."""
    return text.strip()


def parse_tls_server_name(text: str) -> str:
    t = text.strip()
    if any(c.isspace() or c == "/" for c in t):
        raise ValueError(f"--xfer-tls-server-name {text!r}: want the name the server's certificate carries, "
                         "e.g. xferd.test, or nothing for the target's host")
    return t


def parse_tls_resume(text: str) -> bool | None:
    """'' -> None (on with --xfer-tls-ca, and not given: a TLS option without it is refused at start)."""
    t = text.strip().lower()
    if not t:
        return None
    try:
        return parse_verify(t)
    except ValueError:
        raise ValueError(f"--xfer-tls-resume {text!r}: want on or off") from None


# ---- the declaration ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class XferOption:
    """One `--xfer-<key>` option. `key` is also the Config field and, where the runner sets the option from
    an experiment, the `[load]` key."""

    key: str
    default: str
    parse: Callable[[str], Any]
    help: str
    switch: bool = False  # on/off: a TOML true/false is accepted for it

    @property
    def flag(self) -> str:
        return "--xfer-" + self.key.replace("_", "-")

    @property
    def dest(self) -> str:
        return "xfer_" + self.key

    @property
    def env_var(self) -> str:
        return "LOCUST_" + self.dest.upper()

    def text(self, value: str | int | float | bool) -> str:
        """The command-line text of a value (a TOML scalar too), checked; raises ValueError."""
        if isinstance(value, bool):
            if not self.switch:
                raise ValueError(f"{self.flag} {value!r}: true/false is not a value of this option")
            value = "on" if value else "off"
        text = value if isinstance(value, str) else f"{value:g}" if isinstance(value, float) else str(value)
        self.parse(text)
        return text


OPTIONS: tuple[XferOption, ...] = (
    XferOption("sizes", "1MiB", parse_sizes, "Upload/download sizes: " + SIZES_HELP),
    XferOption("chunk", "1MiB", parse_chunk, "Chunk size of uploads and downloads, at most 4MiB"),
    XferOption("inflight", "8", parse_inflight,
               "Calls in flight per frame connection (pipelining depth), 1..1024; gRPC multiplexes by itself"),
    XferOption("grpc_inflight", "4", parse_grpc_inflight,
               "gRPC calls (whole operations) in flight per user, 1..1024; each is "
               "still one Locust request timed from its own start to its end"),
    XferOption("connections", "user", parse_connections,
               "Connection strategy: " + CONNECTIONS_HELP + "; gRPC channels get a connection each (a local "
               "subchannel pool), frame pools lend a connection to one operation at a time, gRPC pools spread "
               "operations over their channels"),
    XferOption("verify", "on", parse_verify, "on|off: check every CRC-32 and echo payload", switch=True),
    XferOption("profile", "steady", parse_profile,
               "Load profile: steady (plain -u/-r/-t), ramp, step, spike, soak (scaled to -u and -t)"),
    XferOption("steps", "off", parse_steps,
               "With --xfer-profile step: the user levels, strictly increasing (e.g. 50,100,200,500,1000), each "
               "held --xfer-step-s; off = five equal steps of -u/5"),
    XferOption("step_s", "auto", parse_step_s,
               "Seconds (20) or a duration (1m30s) each level of --xfer-steps is held (the last is held to the end "
               "of -t); auto = -t divided among the levels"),
    XferOption("mix", "upload:1,download:1,echo:1", parse_mix, "Weights of the user classes: " + MIX_HELP),
    XferOption("rate", "off", parse_rate,
               "Open loop: total arrivals per second (R, constant:R or poisson:R), latency from the intended "
               "start; off = closed loop"),
    XferOption("echo_size", "256", parse_echo_sizes, "Echo payload sizes, same syntax as --xfer-sizes, at most 4MiB"),
    XferOption("meta_entries", "64", parse_meta_entries,
               "Entries per Meta call (key/value pairs drawn once per user), 0..65536; the server's "
               "--max-meta-entries (default 1024) bounds what it accepts"),
    XferOption("meta_size", "8-64", parse_meta_size,
               "Bytes of each Meta key and value, MIN-MAX (drawn uniformly), 0..256 (keys take at least 1)"),
    XferOption("timeout", "60", parse_timeout,
               "Deadline of one call or whole transfer: seconds (60) or a duration (500ms, 1m30s)"),
    XferOption("metrics_port", "9646", parse_metrics_port,
               "Client /metrics port of this process (master/local); workers take the next free ports; "
               "0 = any free port, off = none"),
    XferOption("metrics_host", "127.0.0.1", parse_text, "Address the client /metrics binds"),
    XferOption("metrics_dump", "", parse_text,
               "Folder where each Locust process writes its final metrics (<role>-<pid>.prom) at exit"),
    XferOption("check", "", parse_checks,
               "Thresholds that set the exit code (3 when one fails or has no samples): " + CHECK_HELP),
    XferOption("call", "", parse_call,
               "Call this gRPC method instead of the --xfer-mix users (CallUser): " + CALL_HELP + "; found by the "
               "server's reflection unless --xfer-proto or --xfer-protoset is given"),
    XferOption("data", "", parse_data, "The --xfer-call request: " + TEMPLATE_HELP),
    XferOption("proto", "", parse_proto, "A .proto file defining the --xfer-call service (compiled at start)"),
    XferOption("import_path", "", parse_import_path,
               "Folders (DIR[,DIR...]) that --xfer-proto's imports are found in; default its own folder"),
    XferOption("protoset", "", parse_protoset,
               "A descriptor set (protoc --descriptor_set_out) defining the --xfer-call service"),
    XferOption("tls_ca", "", parse_tls_ca,
               "PEM CA file: speak TLS (gRPC and frame) with the host, which is then the server's TLS listener, "
               "trusting only these certificates; none = plaintext"),
    XferOption("tls_server_name", "", parse_tls_server_name,
               "With --xfer-tls-ca: the name the server's certificate must carry, and SNI; none = the host's"),
    XferOption("tls_resume", "", parse_tls_resume,
               "With --xfer-tls-ca: on|off, resume TLS sessions across connections (frame: one session shared by "
               "the process's connections; gRPC: grpcio's session cache); none = on", switch=True),
)
BY_KEY: dict[str, XferOption] = {o.key: o for o in OPTIONS}

# Options that are gone, by key, and what to say to anyone still giving one: argparse's "unrecognized
# arguments" would not tell a user that the option once existed and what replaced it.
REMOVED: dict[str, str] = {
    "grpc_engine": ("--xfer-grpc-engine was removed: gRPC users always run on grpc.aio (the former gevent path "
                    "reached about 1% of ghz's rate; BENCHMARKS.md \"Locust users vs ghz\")"),
}


def option(key: str) -> XferOption:
    """The option called `key` (`sizes` for --xfer-sizes); KeyError names the known ones (or why it is gone)."""
    if key in REMOVED:
        raise KeyError(REMOVED[key])
    try:
        return BY_KEY[key]
    except KeyError:
        raise KeyError(f"no option --xfer-{key.replace('_', '-')}; known: {', '.join(BY_KEY)}") from None


def command_line(values: Mapping[str, str | int | float | bool]) -> list[str]:
    """`--xfer-<key> TEXT` for each (key, value), every value checked; raises ValueError or KeyError."""
    argv: list[str] = []
    for key, value in values.items():
        opt = option(key)
        argv += [opt.flag, opt.text(value)]
    return argv


# ---- Locust's parser and the typed values -----------------------------------------------------------

@dataclass(frozen=True)
class Config:
    """The parsed value of every option; field names are the options' keys."""

    sizes: SizeSpec
    chunk: int
    inflight: int
    grpc_inflight: int
    connections: Connections
    verify: bool
    profile: str
    steps: tuple[int, ...]
    step_s: float | None
    mix: dict[str, float]
    rate: Rate | None
    echo_size: SizeSpec
    meta_entries: int
    meta_size: tuple[int, int]
    timeout: float
    metrics_port: int | None
    metrics_host: str
    metrics_dump: str
    check: list[Check]
    call: str
    data: Template | None
    proto: str
    import_path: tuple[str, ...]
    protoset: str
    tls_ca: str
    tls_server_name: str
    tls_resume: bool | None


def _argparse_type(opt: XferOption) -> Callable[[str], str]:
    def check(text: str) -> str:
        try:
            opt.parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return text  # options stay strings, so the web UI shows and edits them as typed

    check.__name__ = opt.key
    return check


def _removed_action(message: str) -> type[argparse.Action]:
    class Refuse(argparse.Action):
        def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
            raise argparse.ArgumentError(None, message)  # None: the message names the option itself

    return Refuse


def register(parser: Any) -> None:
    """Adds every option to Locust's parser (a configargparse parser: env_var is its keyword), and the removed
    ones as hidden options that refuse any use, with or without a value, saying why."""
    for opt in OPTIONS:
        parser.add_argument(opt.flag, dest=opt.dest, type=_argparse_type(opt), default=opt.default,
                            help=f"{opt.help} (default: {opt.default or 'none'})", env_var=opt.env_var)
    for key, message in REMOVED.items():
        gone = XferOption(key, "", parse_text, "")
        parser.add_argument(gone.flag, dest=gone.dest, nargs="?", default=None, help=argparse.SUPPRESS,
                            env_var=gone.env_var, action=_removed_action(message), include_in_web_ui=False)


def config_from(values: object) -> Config:
    """The Config of parsed options (an argparse Namespace, or a mapping dest -> text); a missing or None
    value takes the default. Raises ValueError naming the bad option."""
    get: Callable[[str], Any]
    if isinstance(values, Mapping):
        get = values.get
    else:
        def get(dest: str) -> Any:
            return getattr(values, dest, None)
    parsed = {}
    for opt in OPTIONS:
        v = get(opt.dest)
        parsed[opt.key] = opt.parse(opt.default if v is None else str(v))
    return Config(**parsed)


def defaults() -> Config:
    return config_from({})
