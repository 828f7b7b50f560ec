"""`xferbench export RUN_DIR`: a run's recorded time series as OpenMetrics, for Prometheus to backfill.

Most runs are recorded by the built-in scraper (xferbench/measure/scrape.py), not by a Prometheus: every phase of a
run leaves `timeseries/<stem>.snapshots.jsonl`, every scrape of the server and of Locust with its wall-clock
time. This writes those samples under their own metric names and original timestamps, with the labels a
Prometheus scrape of the stack would have given them (`job` xferd|locust, `instance`, `server`) plus
`run`, `cell` and `repeat`, so that

    promtool tsdb create-blocks-from openmetrics FILE DATA_DIR

backfills them and the provisioned Grafana dashboards show the run over its own time range. The dashboards
read recording rules too, which Prometheus only evaluates as time passes: `--tsdb DIR` backfills the run
and then the rules over its range (promtool's rule backfill, against a throw-away Prometheus on DIR).

`instance` is the phase's stem (`<cell>.r<repeat>[.with-<partner>][.step<k>]`), unique per phase: the
dashboards join on (job, instance), and a backfilled series has no staleness marker, so it stays visible
for 5 minutes after its last sample and must never share an instance with the next run's series.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

from xferbench.run import process
from xferbench.tools import stack

JOBS = {"server": "xferd", "client": "locust"}  # deploy/prometheus/prometheus.yml's job names
RULE_FILES = sorted((stack.DEPLOY / "prometheus" / "rules").glob("*.yml"))
RULES_AFTER_S = 60.0  # rules use 1m windows: evaluate them this long past the last sample
RULE_EVAL_INTERVAL = "1s"
PROMTOOL_TIMEOUT_S = 300.0
RETENTION = "36500d"  # the throw-away Prometheus must not delete a past run's blocks on start


class ExportError(RuntimeError):
    """The run directory cannot be exported; the message says why."""


@dataclass(frozen=True)
class Phase:
    """One recorded phase: its snapshots file and the labels every one of its series gets."""

    path: Path
    stem: str
    cell: str
    server: str
    repeat: int


@dataclass
class Written:
    samples: int
    series: int
    start: float  # the earliest sample's time (Unix seconds)
    end: float


# ------------------------------------------------------------------------------------------------ reading


def phases(run_dir: Path) -> list[Phase]:
    """Every phase with recorded series, from runs.jsonl (a capacity search's steps included)."""
    runs = run_dir / "runs.jsonl"
    if not run_dir.is_dir():
        raise ExportError(f"{run_dir} is not a directory")
    if not runs.is_file():
        raise ExportError(f"{run_dir} is not a run directory: it has no runs.jsonl (made by `xferbench run`)")
    out: list[Phase] = []
    for n, line in enumerate(runs.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            ts, cell, server, repeat = row.get("timeseries"), row["cell"], row["server"], int(row["repeat"])
        except (ValueError, KeyError, TypeError) as e:
            raise ExportError(f"{runs}:{n}: not a run row ({type(e).__name__}: {e})") from None
        if not ts:
            continue
        stem = Path(ts).name.removesuffix(".csv")
        d = run_dir / "timeseries"
        files = [d / f"{stem}.snapshots.jsonl", *sorted(d.glob(f"{stem}.step*.snapshots.jsonl"))]
        out += [Phase(f, f.name.removesuffix(".snapshots.jsonl"), cell, server, repeat)
                for f in files if f.is_file()]
    if not out:
        raise ExportError(f"{run_dir} is an empty run: no run in runs.jsonl recorded any time series "
                          "(timeseries/*.snapshots.jsonl)")
    return out


def _snapshots(phase: Phase) -> Iterator[tuple[str, float, list[list[Any]]]]:
    for n, line in enumerate(phase.path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            yield d["side"], float(d["t"]), d["samples"]
        except (ValueError, KeyError, TypeError) as e:
            raise ExportError(f"{phase.path}:{n}: not a snapshot line ({type(e).__name__}: {e})") from None


# ------------------------------------------------------------------------------------------------ writing

Series = tuple[str, tuple[tuple[str, str], ...]]


def collect(run: str, ps: Iterable[Phase]) -> dict[Series, list[tuple[float, float]]]:
    """Every sample by series (name and labels), in time order."""
    series: dict[Series, list[tuple[float, float]]] = {}
    for p in ps:
        for side, t, samples in _snapshots(p):
            if side not in JOBS:
                raise ExportError(f"{p.path}: unknown side {side!r} (want client or server)")
            ours = {"job": JOBS[side], "instance": p.stem, "run": run, "cell": p.cell, "repeat": str(p.repeat)}
            if side == "server":
                ours["server"] = p.server
            for name, labels, value in samples:
                # A scraped label that collides with ours is kept as exported_<name>, as Prometheus does
                # (xfer_build_info's own `server` label has our value: it stays as it is).
                ls = {(k if k not in ours or (k == "server" and v == p.server) else f"exported_{k}"): v
                      for k, v in labels.items()}
                ls.update(ours)
                series.setdefault((name, tuple(sorted(ls.items()))), []).append((t, float(value)))
    for points in series.values():
        points.sort()
    return series


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


def write_openmetrics(series: dict[Series, list[tuple[float, float]]], out: IO[str]) -> Written:
    """OpenMetrics text: one family per sample name (type unknown: the scraper kept no types, and PromQL
    needs none), each series' samples in time order with their timestamps, then `# EOF`."""
    total, start, end = 0, math.inf, -math.inf
    names = sorted({name for name, _ in series})
    by_name: dict[str, list[Series]] = {n: [] for n in names}
    for key in sorted(series):
        by_name[key[0]].append(key)
    for name in names:
        out.write(f"# TYPE {name} unknown\n")
        for key in by_name[name]:
            labels = ",".join(f'{k}="{_escape(v)}"' for k, v in key[1])
            last = -math.inf
            for t, v in series[key]:
                if t <= last:  # two samples at one instant: Prometheus keeps only the first
                    continue
                last = t
                out.write(f"{name}{{{labels}}} {_number(v)} {t:.3f}\n")
                total += 1
                start, end = min(start, t), max(end, t)
    out.write("# EOF\n")
    return Written(total, len(series), start, end)


def export(run_dir: Path, out: IO[str], ps: list[Phase] | None = None) -> Written:
    written = write_openmetrics(collect(run_dir.resolve().name, ps or phases(run_dir)), out)
    if written.samples == 0:
        raise ExportError(f"{run_dir} is an empty run: its snapshot files hold no samples")
    return written


# ------------------------------------------------------------------------------------------------ backfill


def _promtool(*args: str) -> None:
    try:
        p = subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=PROMTOOL_TIMEOUT_S)
    except FileNotFoundError:
        raise ExportError("no promtool: install Debian's `prometheus` package") from None
    if p.returncode != 0:
        raise ExportError(f"promtool {' '.join(args[:3])} failed: {(p.stderr or p.stdout).strip()[-2000:]}")


def _rule_passes(work: Path) -> list[Path]:
    """The rules in two files: those other rules read (they must be backfilled first, since promtool
    evaluates every rule of a pass against the data as it was before the pass), then the rest."""
    rules = [(g["name"], r) for f in RULE_FILES for g in yaml.safe_load(f.read_text())["groups"]
             for r in g["rules"] if "record" in r]
    exprs = " ".join(r["expr"] for _, r in rules)
    first = [(g, r) for g, r in rules if exprs.count(r["record"]) > 0]
    rest = [(g, r) for g, r in rules if (g, r) not in first]
    out = []
    for k, part in enumerate((first, rest)):
        groups: dict[str, list[dict[str, Any]]] = {}
        for g, r in part:
            groups.setdefault(g, []).append(r)
        f = work / f"rules-{k}.yml"
        f.write_text(yaml.safe_dump({"groups": [{"name": g, "rules": rs} for g, rs in groups.items()]}))
        out.append(f)
    return out


def backfill(openmetrics: Path, data_dir: Path, written: Written) -> None:
    """The exported samples, then the repository's recording rules over their range, into `data_dir`."""
    data_dir.mkdir(parents=True, exist_ok=True)
    _promtool("tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(data_dir))
    start, end = str(math.floor(written.start)), str(math.ceil(written.end + RULES_AFTER_S))
    with tempfile.TemporaryDirectory(prefix="xferbench-export-") as tmp:
        work = Path(tmp)
        config = work / "prometheus.yml"
        config.write_text("global: {}\n")
        for rules in _rule_passes(work):
            listen = f"127.0.0.1:{process.free_port()}"
            prom = stack.start_prometheus(config, data_dir, listen, work / "prometheus.log", retention=RETENTION)
            try:
                _promtool("tsdb", "create-blocks-from", "rules", f"--url={prom.url}", f"--start={start}",
                          f"--end={end}", f"--output-dir={data_dir}", f"--eval-interval={RULE_EVAL_INTERVAL}",
                          "--quiet", str(rules))
            finally:
                prom.stop()


# ------------------------------------------------------------------------------------------------ command


def cmd_export(a: argparse.Namespace) -> int:
    run_dir = Path(a.run_dir)
    target = Path(a.output) if a.output else run_dir / "openmetrics.txt"
    try:
        if a.tsdb and a.output == "-":
            raise ExportError("--tsdb needs a file: give -o FILE, not -o -")
        ps = phases(run_dir)  # before any output file: bad input leaves nothing behind
        if a.output == "-":
            written = export(run_dir, sys.stdout, ps)
        else:
            tmp = target.with_name(target.name + ".tmp")
            try:
                with open(tmp, "w", encoding="utf-8") as f:
                    written = export(run_dir, f, ps)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            tmp.replace(target)
            print(f"{target}: {written.samples} samples of {written.series} series", file=sys.stderr)
        if a.tsdb:
            backfill(target, Path(a.tsdb), written)
            print(f"{a.tsdb}: the run and its recording rules; point a Prometheus with retention past "
                  f"{written.start:.0f} (Unix time) at it", file=sys.stderr)
    except (ExportError, stack.StackError, OSError) as e:
        print(f"xferbench export: error: {e}", file=sys.stderr)
        return 2
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("export", help="a run's time series as OpenMetrics (promtool backfills them)",
                       description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("-o", "--output", metavar="FILE", help="where (default RUN_DIR/openmetrics.txt; - for stdout)")
    p.add_argument("--tsdb", metavar="DIR",
                   help="also backfill the run and the recording rules over its range into this TSDB folder")
    p.set_defaults(fn=cmd_export)
