"""A bench record: the figures of one `xferbench bench`, the machine they were taken on and its load, kept
one JSON object per line in a history file that is only ever appended to."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import platform
import socket
import statistics
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xferbench.config.files import ROOT
from xferbench.tools.bench.quiet import BUSY_CORES

HISTORY = ROOT / "bench-records" / "history.jsonl"
# One-minute load above which the bench refuses to start: on 2 cores, more than 1.5 runnable tasks before it
# has started anything means someone else is at work. Once it runs, its own server and client load both cores,
# so each figure is judged by the CPU others used meanwhile instead (quiet.py).
BUSY_LOAD = 1.5


def load1() -> float:
    """The one-minute load average (/proc/loadavg)."""
    with open("/proc/loadavg", encoding="ascii") as f:
        return float(f.read().split()[0])


@dataclass
class Samples:
    """The per-round values of one figure as they are measured, and the most CPU (cores) that processes other
    than the bench's used while one was."""

    name: str
    unit: str
    better: str  # "higher" | "lower": which way is an improvement
    values: list[float] = field(default_factory=list)
    max_others: float = 0.0

    def add(self, value: float, others: float) -> None:
        self.values.append(value)
        self.max_others = max(self.max_others, others)


def aa_spread_of(values: Sequence[float]) -> float:
    """A figure's own A/A spread: half the range of its rounds on a log scale, as a fraction (0.035 is ±3.5%).

    The rounds of one figure in one record are repeats of one configuration in one sitting, so how far they
    stray from one another is what this machine does to the figure with nothing changed. The half-range is the
    radius of their band around its middle: a median that moves less than that between two records stays
    where a single sitting's rounds already went. It is not robust on purpose: one outlying round is evidence
    of noise, and it should raise the bar a change has to clear rather than be discounted (a MAD would also be
    0 whenever 3 of 5 rounds tie). Logs, since figures are ratios: x2 and x0.5 are the same distance. One round
    measures no spread: 0."""
    if not values:
        raise ValueError("no rounds: no A/A spread")
    return math.exp((math.log(max(values)) - math.log(min(values))) / 2) - 1


@dataclass(frozen=True)
class Figure:
    name: str
    unit: str
    better: str
    median: float
    lo: float  # the spread: the lowest and highest round
    hi: float
    rounds: int
    busy: bool
    note: str = ""  # e.g. a verdict taken from `xferbench run`
    # Every round's value in the order measured; empty in records written before they were kept and in the
    # `run` rows (their spread is a CI from `xferbench run`), which compare then leaves "not comparable".
    values: tuple[float, ...] = ()
    aa_spread: float | None = None  # aa_spread_of(values); None where no rounds are kept

    @staticmethod
    def of(s: Samples, threshold: float = BUSY_CORES) -> Figure:
        """The median and min-max of the rounds, the rounds themselves and their A/A spread; busy when others
        used more than `threshold` cores in a round."""
        if not s.values:
            raise ValueError(f"{s.name}: no rounds measured")
        return Figure(
            s.name,
            s.unit,
            s.better,
            statistics.median(s.values),
            min(s.values),
            max(s.values),
            len(s.values),
            s.max_others > threshold,
            values=tuple(s.values),
            aa_spread=aa_spread_of(s.values),
        )

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Figure:
        """A figure as `to_json` wrote it; fields added since (values, aa_spread) take their defaults in older records."""
        return Figure(**{**d, "values": tuple(float(v) for v in d.get("values", ()))})


@dataclass(frozen=True)
class Record:
    commit: str
    date: str
    machine: dict[str, Any]
    load_before: float
    load_after: float
    figures: list[Figure]
    mode: str = "full"  # "smoke" records are never compared with full ones

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, allow_nan=False)

    @staticmethod
    def from_json(line: str) -> Record:
        d = json.loads(line)
        d["figures"] = [Figure.from_dict(f) for f in d["figures"]]
        return Record(**d)

    def figure(self, name: str) -> Figure | None:
        return next((f for f in self.figures if f.name == name), None)


def commit() -> str:
    """`git describe --always --dirty` of the repository, or "unknown" outside a checkout."""
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict[str, Any]:
    return {"hostname": socket.gethostname(), "nproc": os.cpu_count() or 0, "kernel": platform.release(), "cpu": cpu_model()}


def machine_class(m: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two records comparable: the same CPU model and count (not the host name: the project's
    machines are interchangeable, re-created under new names)."""
    return (m.get("cpu"), m.get("nproc"))


def check_finite(figures: list[Figure]) -> None:
    """A record holds no NaN, infinity or non-positive figure: a broken run is an error, not a number."""
    for f in figures:
        for v in (f.median, f.lo, f.hi, *f.values):
            if not math.isfinite(v) or v <= 0:
                raise ValueError(f"{f.name}: {v} is not a finite positive figure")


def append(path: Path, rec: Record) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(rec.to_json() + "\n")


def read(path: Path) -> list[Record]:
    """Every record of a history file, oldest first; none when the file is absent."""
    if not path.exists():
        return []
    return [Record.from_json(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def previous(history: list[Record], rec: Record) -> Record | None:
    """The latest record before `rec` taken on the same machine class and in the same mode."""
    for old in reversed(history):
        if old is not rec and old.mode == rec.mode and machine_class(old.machine) == machine_class(rec.machine):
            return old
    return None
