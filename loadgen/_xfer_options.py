"""Option values of the xfer locustfiles: parsing and validation (no Locust imports; unit-tested alone).

Every parser raises ValueError with a message that says what the option accepts; `register()` wires
them into Locust's argparse parser as `type=` checks, so a malformed value stops Locust before the
test starts (argparse prints "argument --xfer-...: <message>" and exits 2).
"""

from __future__ import annotations

import argparse
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
MAX_FILE = GIB  # PROTOCOL.md: declared file size limit
MAX_CHUNK = 4 * MIB  # PROTOCOL.md: chunk size, Read length and Echo payload limit

_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
    "kib": KIB, "mib": MIB, "gib": GIB,
}
_SIZE_RE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*")
SIZE_HELP = "a byte count like 65536, 64KiB, 1MiB, 1.5MB (B, KB/MB/GB = 1000^n, KiB/MiB/GiB = 1024^n)"

PROFILES = ("steady", "ramp", "step", "spike", "soak")
METHODS = ("upload", "download", "echo")


def parse_size(text: str, *, what: str = "size", lo: int = 0, hi: int = MAX_FILE) -> int:
    m = _SIZE_RE.fullmatch(text)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNITS:
        raise ValueError(f"{what} {text!r} is not {SIZE_HELP}")
    value = float(m.group(1)) * _UNITS[unit]
    if value != int(value):
        raise ValueError(f"{what} {text!r} is not a whole number of bytes")
    n = int(value)
    if not lo <= n <= hi:
        raise ValueError(f"{what} {text!r} = {n} bytes is outside {lo}..{hi}")
    return n


# ---- sizes: a list or a distribution ----------------------------------------------------------------

SIZES_HELP = ("a list of sizes, optionally weighted: '64KiB,1MiB,10MiB' or '64KiB*3,1MiB'; "
              "or 'uniform:MIN:MAX'; or 'lognormal:MEDIAN:SIGMA[:MAX]' (SIGMA of ln(size), "
              "MAX default 64 x MEDIAN); sizes up to 1GiB")


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


def parse_sizes(text: str, *, what: str = "--xfer-sizes", hi: int = MAX_FILE) -> SizeSpec:
    t = text.strip()
    if not t:
        raise ValueError(f"{what} is empty: want {SIZES_HELP}")
    try:
        if t.startswith("uniform:"):
            parts = t.split(":")
            if len(parts) != 3:
                raise ValueError("want uniform:MIN:MAX")
            lo, up = (parse_size(p, what="size", hi=hi) for p in parts[1:])
            if lo > up:
                raise ValueError(f"MIN {lo} is above MAX {up}")
            return SizeSpec("uniform", lo=lo, hi=up)
        if t.startswith("lognormal:"):
            parts = t.split(":")
            if len(parts) not in (3, 4):
                raise ValueError("want lognormal:MEDIAN:SIGMA[:MAX]")
            median = parse_size(parts[1], what="MEDIAN", lo=1, hi=hi)
            try:
                sigma = float(parts[2])
            except ValueError:
                raise ValueError(f"SIGMA {parts[2]!r} is not a number") from None
            if not 0 <= sigma <= 10 or math.isnan(sigma):
                raise ValueError(f"SIGMA {parts[2]!r} is outside 0..10")
            if len(parts) == 4:
                up = parse_size(parts[3], what="MAX", lo=median, hi=hi)
            else:
                up = min(hi, 64 * median)
            return SizeSpec("lognormal", lo=1, hi=up, median=median, sigma=sigma)
        if ":" in t:
            raise ValueError(f"unknown distribution {t.split(':', 1)[0]!r}")
        values: list[int] = []
        weights: list[float] = []
        for item in t.split(","):
            size_text, star, w_text = item.partition("*")
            values.append(parse_size(size_text, what="size", hi=hi))
            w = 1.0
            if star:
                try:
                    w = float(w_text)
                except ValueError:
                    raise ValueError(f"weight {w_text!r} is not a number") from None
                if not w > 0 or math.isinf(w):
                    raise ValueError(f"weight {w_text!r} must be a positive number")
            weights.append(w)
        return SizeSpec("list", values=tuple(values), weights=tuple(weights))
    except ValueError as e:
        raise ValueError(f"{what} {text!r}: {e}; accepted: {SIZES_HELP}") from None


# ---- small scalar options ---------------------------------------------------------------------------

def parse_chunk(text: str) -> int:
    try:
        return parse_size(text, what="chunk size", lo=1, hi=MAX_CHUNK)
    except ValueError as e:
        raise ValueError(f"--xfer-chunk: {e}; accepted: 1B..4MiB, e.g. 64KiB or 1MiB") from None


def parse_inflight(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= 1024:
        raise ValueError(f"--xfer-inflight {text!r}: want a whole number of calls in flight, 1..1024")
    return n


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


def parse_mix(text: str) -> dict[str, float]:
    """'upload:1,download:1,echo:1' -> weights; unnamed methods get 0; at least one must be > 0."""
    accepted = "accepted: METHOD:WEIGHT pairs joined by ',', METHOD one of upload, download, echo, " \
               "WEIGHT a number >= 0 (0 disables), e.g. upload:1,download:1,echo:1"
    mix = dict.fromkeys(METHODS, 0.0)
    seen: set[str] = set()
    for item in text.split(","):
        name, sep, w_text = item.strip().partition(":")
        name = name.strip().lower()
        if not sep or name not in METHODS:
            raise ValueError(f"--xfer-mix {text!r}: bad entry {item!r}; {accepted}")
        if name in seen:
            raise ValueError(f"--xfer-mix {text!r}: {name} given twice; {accepted}")
        seen.add(name)
        try:
            w = float(w_text)
        except ValueError:
            w = -1.0
        if not 0 <= w < math.inf:
            raise ValueError(f"--xfer-mix {text!r}: weight {w_text!r} of {name}; {accepted}")
        mix[name] = w
    if not any(w > 0 for w in mix.values()):
        raise ValueError(f"--xfer-mix {text!r}: every weight is 0; {accepted}")
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
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not 0 < v <= 3600:
        raise ValueError(f"--xfer-timeout {text!r}: want seconds per call, 0 < T <= 3600")
    return v


def parse_echo_sizes(text: str) -> SizeSpec:
    return parse_sizes(text, what="--xfer-echo-size", hi=MAX_CHUNK)


# ---- --xfer-check -----------------------------------------------------------------------------------

CHECK_HELP = ("conditions joined by ',', each METRIC OP VALUE with OP one of < <= > >= == !=; METRIC: "
              "failures, failure_ratio, requests, rps, cpu (generator CPU, % of one core), "
              "avg, max, pNN / pNN.N (e.g. p95, p99.9); avg/max/pNN take an optional (Method), "
              "e.g. p95(Echo), default all of Upload, Download, Echo; VALUE: a number, times with "
              "us/ms/s, ratios and cpu with %; e.g. failures==0,p95<2s,p99(Echo)<=50ms")
_CHECK_RE = re.compile(
    r"\s*(?P<metric>failures|failure_ratio|requests|rps|cpu|avg|max|p(?P<q>[0-9]{1,2}(?:\.[0-9]+)?))"
    r"\s*(?:\((?P<method>[A-Za-z]+)\))?\s*(?P<op><=|>=|==|!=|<|>)\s*"
    r"(?P<value>[0-9]+(?:\.[0-9]+)?(?:e-?[0-9]+)?)\s*(?P<unit>us|µs|ms|s|%)?\s*"
)
_TIME_UNITS = {None: 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}
CHECK_METHODS = ("Upload", "Download", "Echo", "UploadChunk", "DownloadChunk")
_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
}


@dataclass(frozen=True)
class Check:
    text: str
    metric: str  # failures | failure_ratio | requests | rps | cpu | avg | max | quantile
    op: str
    value: float  # seconds for times, a fraction for ratios, percent for cpu
    quantile: float = 0.0
    method: str | None = None

    def holds(self, actual: float) -> bool:
        return _OPS[self.op](actual, self.value)


def parse_checks(text: str) -> list[Check]:
    t = text.strip()
    if not t:
        return []
    checks: list[Check] = []
    for item in t.split(","):
        m = _CHECK_RE.fullmatch(item)
        if m is None:
            raise ValueError(f"--xfer-check {text!r}: cannot read {item.strip()!r}; accepted: {CHECK_HELP}")
        metric, unit, method = m.group("metric"), m.group("unit"), m.group("method")
        value = float(m.group("value"))
        quantile = 0.0
        timed = metric in ("avg", "max") or m.group("q") is not None
        if m.group("q") is not None:
            quantile = float(m.group("q")) / 100.0
            if not 0 < quantile < 1:
                raise ValueError(f"--xfer-check {text!r}: quantile in {item.strip()!r} must be in (0, 100)")
            metric = "quantile"
        if method is not None and not timed:
            raise ValueError(f"--xfer-check {text!r}: {metric} takes no (Method); accepted: {CHECK_HELP}")
        if method is not None and method not in CHECK_METHODS:
            raise ValueError(f"--xfer-check {text!r}: unknown method {method!r}; "
                             f"want one of {', '.join(CHECK_METHODS)}")
        if timed:
            if unit == "%":
                raise ValueError(f"--xfer-check {text!r}: {item.strip()!r} is a time: use s, ms or us")
            value *= _TIME_UNITS[unit]
        elif metric == "failure_ratio":
            if unit not in (None, "%"):
                raise ValueError(f"--xfer-check {text!r}: failure_ratio is a ratio: a number or N%")
            value = value / 100.0 if unit == "%" else value
        elif unit not in (None, "%") or (unit == "%" and metric != "cpu"):
            raise ValueError(f"--xfer-check {text!r}: {metric} takes a plain number")
        checks.append(Check(item.strip(), metric, m.group("op"), value, quantile, method))
    return checks


# ---- all options --------------------------------------------------------------------------------------

@dataclass
class Config:
    sizes: SizeSpec = field(default_factory=lambda: parse_sizes("1MiB"))
    chunk: int = MIB
    inflight: int = 8
    verify: bool = True
    profile: str = "steady"
    mix: dict[str, float] = field(default_factory=lambda: parse_mix("upload:1,download:1,echo:1"))
    rate: Rate | None = None
    metrics_port: int | None = 9646
    metrics_host: str = "127.0.0.1"
    metrics_dump: str = ""
    checks: list[Check] = field(default_factory=list)
    echo_sizes: SizeSpec = field(default_factory=lambda: parse_sizes("256B"))
    timeout: float = 60.0


# (option, dest, default, parser, help)
OPTIONS: list[tuple[str, str, str, Callable[[str], object], str]] = [
    ("--xfer-sizes", "xfer_sizes", "1MiB", parse_sizes, "Upload/download sizes: " + SIZES_HELP),
    ("--xfer-chunk", "xfer_chunk", "1MiB", parse_chunk, "Chunk size of uploads and downloads (<= 4MiB)"),
    ("--xfer-inflight", "xfer_inflight", "8", parse_inflight,
     "Calls in flight per frame connection (pipelining depth); gRPC multiplexes by itself"),
    ("--xfer-verify", "xfer_verify", "on", parse_verify, "on|off: check every CRC-32 and echo payload"),
    ("--xfer-profile", "xfer_profile", "steady", parse_profile,
     "Load profile: steady (plain -u/-r/-t), ramp, step, spike, soak (scaled to -u and -t)"),
    ("--xfer-mix", "xfer_mix", "upload:1,download:1,echo:1", parse_mix,
     "Weights of the upload, download and echo users (0 disables one)"),
    ("--xfer-rate", "xfer_rate", "off", parse_rate,
     "Open loop: total arrivals per second (R, constant:R or poisson:R), latency from the intended "
     "start; off = closed loop"),
    ("--xfer-metrics-port", "xfer_metrics_port", "9646", parse_metrics_port,
     "Client /metrics port of this process (master/local); workers take the next free ports; "
     "0 = any free port, off = none"),
    ("--xfer-metrics-host", "xfer_metrics_host", "127.0.0.1", str, "Address the client /metrics binds"),
    ("--xfer-metrics-dump", "xfer_metrics_dump", "", str,
     "Folder where each Locust process writes its final metrics (<role>-<pid>.prom) at exit"),
    ("--xfer-check", "xfer_check", "", parse_checks,
     "Thresholds that set the exit code (3 when one fails): " + CHECK_HELP),
    ("--xfer-echo-size", "xfer_echo_size", "256B", parse_echo_sizes, "Echo payload sizes (same syntax)"),
    ("--xfer-timeout", "xfer_timeout", "60", parse_timeout, "Deadline of one call or transfer, seconds"),
]


def _validator(fn: Callable[[str], object]) -> Callable[[str], str]:
    def check(text: str) -> str:
        try:
            fn(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return text  # options stay strings, so the web UI shows and edits them as typed

    check.__name__ = fn.__name__.removeprefix("parse_")
    return check


def register(parser) -> None:  # locust's LocustArgumentParser
    for opt, dest, default, fn, help_text in OPTIONS:
        parser.add_argument(opt, dest=dest, type=_validator(fn), default=default, help=help_text,
                           env_var="LOCUST_" + dest.upper())


def from_options(opts: object) -> Config:
    """Builds the Config from parsed options (strings); raises ValueError naming the bad option."""
    def get(dest: str, default: str) -> str:
        v = getattr(opts, dest, None)
        return default if v is None else str(v)

    vals = {dest: fn(get(dest, default)) for _opt, dest, default, fn, _h in OPTIONS}
    return Config(
        sizes=vals["xfer_sizes"], chunk=vals["xfer_chunk"], inflight=vals["xfer_inflight"],
        verify=vals["xfer_verify"], profile=vals["xfer_profile"], mix=vals["xfer_mix"],
        rate=vals["xfer_rate"], metrics_port=vals["xfer_metrics_port"],
        metrics_host=vals["xfer_metrics_host"], metrics_dump=vals["xfer_metrics_dump"],
        checks=vals["xfer_check"], echo_sizes=vals["xfer_echo_size"], timeout=vals["xfer_timeout"],
    )
