"""`--xfer-check`: the threshold grammar, and its verdicts on one run's measurements.

Each quantity has one unit, printed with every figure: latencies in ms, rates in calls/s, failure ratios
in %, generator CPU in cores (1.0 = one core busy; the busiest worker in a distributed run), as in the
runner's report.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from loadgen._recorder import Snapshot, quantile
from py_client.durations import DURATION_HELP, parse_duration

EXIT_CHECK_FAILED = 3

CHECK_HELP = ("conditions joined by ',', each METRIC OP VALUE with OP one of < <= > >= == !=; METRIC: "
              "failures, failure_ratio, requests, rps, cpu (generator CPU in cores), "
              "avg, max, pNN / pNN.N (e.g. p95, p99.9); avg/max/pNN take an optional (Method), "
              "e.g. p95(Echo), default all of Upload, Download, Echo; VALUE: a number, times as durations "
              "(20us, 50ms, 2s, 1m30s; a bare number is seconds), failure_ratio and cpu as a fraction or with %; "
              "e.g. failures==0,p95<2s,p99(Echo)<=50ms,cpu<0.9")
_CHECK_RE = re.compile(
    r"\s*(?P<metric>failures|failure_ratio|requests|rps|cpu|avg|max|p(?P<q>[0-9]{1,2}(?:\.[0-9]+)?))"
    r"\s*(?:\((?P<method>[A-Za-z]+)\))?\s*(?P<op><=|>=|==|!=|<|>)\s*"
    r"(?P<value>[0-9][0-9a-z.%-]*)\s*"
)
# A number (an exponent allowed), then % for a ratio; a time is read by py_client/durations.py instead.
_NUMBER_RE = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]+)?(?:e-?[0-9]+)?)(?P<percent>%)?")
CHECK_METHODS = ("Upload", "Download", "Echo", "Meta", "UploadChunk", "DownloadChunk")
_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
}
TIMED = ("avg", "max", "quantile")


@dataclass(frozen=True)
class Check:
    text: str
    metric: str  # failures | failure_ratio | requests | rps | cpu | avg | max | quantile
    op: str
    value: float  # seconds for times, a fraction for failure_ratio, cores for cpu
    quantile: float = 0.0
    method: str | None = None

    def holds(self, actual: float) -> bool:
        return _OPS[self.op](actual, self.value)


def _scaled_value(metric: str, value: str, item: str, text: str) -> float:
    """The threshold in the check's unit: seconds (a duration, py_client/durations.py), a fraction, or cores."""
    if metric in TIMED:
        try:
            return parse_duration(value, what="time")
        except ValueError:
            raise ValueError(f"--xfer-check {text!r}: {item!r} is a time: want {DURATION_HELP}") from None
    m = _NUMBER_RE.fullmatch(value)
    if metric in ("failure_ratio", "cpu"):
        if m is None:
            raise ValueError(f"--xfer-check {text!r}: {metric} is a ratio: a fraction or N%")
        return float(m.group("number")) / (100.0 if m.group("percent") else 1.0)
    if m is None or m.group("percent"):
        raise ValueError(f"--xfer-check {text!r}: {metric} takes a plain number")
    return float(m.group("number"))


def _parse_one(item: str, text: str) -> Check:
    m = _CHECK_RE.fullmatch(item)
    if m is None:
        raise ValueError(f"--xfer-check {text!r}: cannot read {item.strip()!r}; accepted: {CHECK_HELP}")
    metric, method = m.group("metric"), m.group("method")
    quantile_q = 0.0
    if m.group("q") is not None:
        quantile_q = float(m.group("q")) / 100.0
        if not 0 < quantile_q < 1:
            raise ValueError(f"--xfer-check {text!r}: quantile in {item.strip()!r} must be in (0, 100)")
        metric = "quantile"
    if method is not None and metric not in TIMED:
        raise ValueError(f"--xfer-check {text!r}: {metric} takes no (Method); accepted: {CHECK_HELP}")
    if method is not None and method not in CHECK_METHODS:
        raise ValueError(f"--xfer-check {text!r}: unknown method {method!r}; "
                         f"want one of {', '.join(CHECK_METHODS)}")
    value = _scaled_value(metric, m.group("value"), item.strip(), text)
    return Check(item.strip(), metric, m.group("op"), value, quantile_q, method)


def parse_checks(text: str) -> list[Check]:
    t = text.strip()
    return [_parse_one(item, text) for item in t.split(",")] if t else []


# ---- verdicts -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunFigures:
    """What a run's checks are judged on: its measurements, its length, and the generator's CPU."""

    snap: Snapshot
    wall_s: float
    cpu_cores: float  # 1.0 = one core busy


def measured(check: Check, run: RunFigures) -> float:
    """The check's quantity in its unit; nan when the run has no call it could be measured on."""
    top = run.snap.methods(None)
    calls = sum(s.count for s in top)
    if check.metric == "failures":
        return float(sum(s.err for s in top))
    if check.metric == "requests":
        return float(calls)
    if check.metric == "failure_ratio":
        return sum(s.err for s in top) / calls if calls else math.nan
    if check.metric == "rps":
        return calls / run.wall_s
    if check.metric == "cpu":
        return run.cpu_cores
    series = run.snap.methods(check.method)
    n = sum(s.count for s in series)
    if n == 0:
        return math.nan
    if check.metric == "avg":
        return sum(s.sum for s in series) / n
    if check.metric == "max":
        return max(s.max for s in series)
    return quantile(series, check.quantile)


def with_unit(check: Check, value: float) -> str:
    """A measured figure as printed: '32.3 ms', '120.5 calls/s', '0.52%', '0.84 cores', '3 calls'."""
    if check.metric in TIMED:
        return f"{value * 1000:.4g} ms"
    if check.metric == "rps":
        return f"{value:.1f} calls/s"
    if check.metric == "failure_ratio":
        return f"{value * 100:.3g}%"
    if check.metric == "cpu":
        return f"{value:.2f} cores"
    return f"{value:.0f} calls"


def verdict(check: Check, run: RunFigures) -> tuple[bool, str]:
    """(passed, the line printed for it). A check with nothing to measure fails: it proved nothing."""
    value = measured(check, run)
    if math.isnan(value):
        what = f"{check.method} calls" if check.method else "calls (Upload, Download, Echo)"
        return False, f"xfer-check FAIL: {check.text} (no {what} measured)"
    ok = check.holds(value)
    return ok, f"xfer-check {'PASS' if ok else 'FAIL'}: {check.text} (measured {with_unit(check, value)})"
