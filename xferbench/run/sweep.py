"""The sweep: every cell x repeat in interleaved order, one row per run, written as it is measured.

Round by round (and with --until-ci, more rounds until the ranked intervals are narrow enough or the budget is
spent), each unit of a round (unit.py) runs and its rows go to runs.jsonl at once. A run that fails gets a
failed row and the sweep goes on; Ctrl-C (or SIGTERM) stops the sweep, and what was measured is still
written, experiment.json included.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import json
import math
import os
import platform
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any

import psutil

from xferbench.analysis import stats
from xferbench.analysis.row import RunRow
from xferbench.analysis.runmeta import FILE, Machine, Network, Pinning, Placement, RunMeta, SoakGoal, UntilCIState
from xferbench.config import Experiment
from xferbench.measure.sources import MetricsSource, ScrapeSource
from xferbench.run import hostcheck
from xferbench.run.matrix import ORDER_SEED, round_runs, round_units, schedule
from xferbench.run.outputs import merge_profiles
from xferbench.run.progress_protocol import NullProgress
from xferbench.run.serverstart import container_engine
from xferbench.run.unit import run_unit

if TYPE_CHECKING:  # the docker SDK is imported only when an experiment runs containers
    import docker


@dataclass
class SweepResult:
    run_dir: Path
    rows: list[RunRow]
    interrupted: bool

    @property
    def failed(self) -> list[RunRow]:
        return [r for r in self.rows if r.status == "failed"]


def utc_stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def machine_info() -> Machine:
    return Machine(
        platform.node(), platform.platform(), platform.python_version(), os.cpu_count(), psutil.virtual_memory().total
    )


def _install_sigterm() -> signal.Handlers | Callable[[int, FrameType | None], Any] | int | None:
    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt  # SIGTERM behaves like Ctrl-C: stop cleanly, write what was measured

    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        return None


# The run so far (its meta and rows) → the rank metric and each cell's comparison with the baseline on it.
Ranked = Callable[[RunMeta, list[RunRow]], tuple[str, list[stats.Comparison]]]


@dataclass(frozen=True)
class UntilCI:
    """`--until-ci 5% --budget 10m`: add rounds until every ranked ratio's 95% interval is within ±target
    (half-width, as a fraction), or the next round would not fit in the budget."""

    target: float
    budget_s: float | None  # None: as long again as the experiment's own rounds took
    ranked: Ranked  # the report's summary, passed in by the CLI: the runner sits below the report, never imports it
    max_repeats: int = 50


@dataclass
class _Sweeping:
    """What every round of a sweep shares: where it goes, and the rows so far."""

    exp: Experiment
    run_dir: Path
    source: MetricsSource
    progress: NullProgress
    on_row: Callable[[RunRow], None] | None
    engine: docker.DockerClient | None
    out: IO[str]
    rows: list[RunRow]
    placement: Placement | None = None


def sweep(
    exp: Experiment,
    run_dir: Path,
    source: MetricsSource | None = None,
    progress: NullProgress | None = None,
    on_row: Callable[[RunRow], None] | None = None,
    until_ci: UntilCI | None = None,
    placement: Placement | None = None,
) -> SweepResult:
    """Runs the whole experiment into run_dir, round by round; returns the rows (also in runs.jsonl). An experiment
    with [hosts] is placed by the host check (hostcheck.check: HostCheckError before anything is written) unless
    `placement` is the check's answer already."""
    source = source or ScrapeSource()
    progress = progress or NullProgress()
    if exp.hosts and placement is None:
        placement = hostcheck.check(exp)
    engine = container_engine(exp)  # before anything is written: no engine, no run (EngineError)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "timeseries").mkdir(exist_ok=True)
    (run_dir / "logs").mkdir(exist_ok=True)
    meta = _meta(exp, source)
    meta.placement = placement
    meta.write(run_dir / FILE)
    rows: list[RunRow] = []
    interrupted = False
    old = _install_sigterm()
    progress.start_sweep(exp, schedule(exp), run_dir)
    try:
        with open(run_dir / "runs.jsonl", "w", encoding="utf-8") as out:
            sweeping = _Sweeping(exp, run_dir, source, progress, on_row, engine, out, rows, placement)
            interrupted = _rounds(sweeping, meta, until_ci)
    except KeyboardInterrupt:
        interrupted = True  # a second Ctrl-C during a duet's cleanup: the run must not read as complete
        raise
    finally:
        progress.end_sweep()
        if exp.profile:
            merge_profiles(run_dir, rows)
        if old is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, old)
        meta.finished_at = dt.datetime.now(dt.UTC).isoformat()
        meta.interrupted = interrupted
        meta.rounds = max((r.repeat for r in rows), default=0)
        if placement is not None and not interrupted:
            hostcheck.end_clocks(exp, placement)  # the hosts' clocks again, beside the check's (meta.placement)
        meta.write(run_dir / FILE)
    return SweepResult(run_dir, rows, interrupted)


def _rounds(s: _Sweeping, meta: RunMeta, until_ci: UntilCI | None) -> bool:
    """The experiment's rounds, then --until-ci's; whether Ctrl-C stopped them."""
    started = time.monotonic()
    planned_s = 0.0
    for repeat in itertools.count(1):
        if repeat > s.exp.repeats:
            planned_s = planned_s or time.monotonic() - started
            if not _more_rounds(meta, s.rows, until_ci, repeat, time.monotonic() - started, planned_s):
                return False
            s.progress.add_runs(round_runs(s.exp, repeat, len(s.rows)))
        for unit in round_units(s.exp, repeat, len(s.rows)):
            for run in unit:
                s.progress.start_run(run)
            unit_rows, interrupted = run_unit(s.exp, unit, s.run_dir, s.source, s.progress, s.engine, s.placement)
            for run, row in zip(unit, unit_rows, strict=True):
                s.rows.append(row)
                s.out.write(json.dumps(row.to_json()) + "\n")
                s.out.flush()
                s.progress.end_run(run, row)
                if s.on_row:
                    s.on_row(row)
            if interrupted:
                return True
    raise AssertionError("unreachable: itertools.count never ends")


def _meta(exp: Experiment, source: MetricsSource) -> RunMeta:
    pin = exp.pinning
    return RunMeta(
        experiment=exp.name,
        description=exp.description,
        path=str(exp.path) if exp.path else None,
        repeats=exp.repeats,
        warmup_s=exp.warmup_s,
        baseline=exp.baseline,
        baselines=exp.baselines or None,
        aa_cell=exp.aa_cell,
        duet=exp.duet,
        alpha=exp.alpha,
        soak=SoakGoal(exp.soak.growth_max, exp.soak.held_slack) if exp.soak else None,
        order_seed=ORDER_SEED,
        pinning=Pinning(pin.mode, list(pin.server), list(pin.generator), pin.describe()),
        cells=[c.name for c in exp.cells],
        cell_configs={c.name: c.config() for c in exp.cells},
        source=source.name,
        started_at=dt.datetime.now(dt.UTC).isoformat(),
        machine=machine_info(),
        network=Network(**exp.network.to_json()) if exp.network else None,
        profile=exp.profile,
        backend=exp.backend,
    )


def _more_rounds(meta: RunMeta, rows: list[RunRow], until: UntilCI | None, repeat: int, elapsed_s: float,
                 planned_s: float = 0.0) -> bool:
    """Whether --until-ci wants another round; records the answer and why in meta.until_ci (with the rounds
    that would likely have met the target when it stops short)."""
    if until is None:
        return False
    metric, comparisons = until.ranked(meta, rows)
    widths = [ci_half_width(c) for c in comparisons]
    widest = max((w for w in widths if w is not None), default=None)
    per_round = elapsed_s / (repeat - 1)
    budget_s = until.budget_s if until.budget_s is not None else 2 * planned_s

    def stop(met: bool, why: str) -> bool:
        need = stats.rounds_for(widest, repeat - 1, until.target) if widest is not None and not met else None
        meta.until_ci = UntilCIState(until.target, budget_s, widest, repeat - 1, metric, met, why,
                                     more=need - (repeat - 1) if need is not None else None)
        return False

    if not widths:
        return stop(False, f"no cell has an interval on {metric} to narrow")
    if all(w is not None and w <= until.target for w in widths):
        return stop(True, "every ranked interval is within the target")
    if elapsed_s + per_round > budget_s or repeat > until.max_repeats:
        return stop(
            False,
            "the budget would be exceeded by another round"
            if repeat <= until.max_repeats
            else f"{until.max_repeats} rounds reached",
        )
    return True


def ci_half_width(c: stats.Comparison) -> float | None:
    """A ratio interval's half-width as a fraction (on the log scale: [0.95, 1.05] → about 0.05)."""
    if c.lo is None or c.hi is None or c.lo <= 0:
        return None
    return math.exp((math.log(c.hi) - math.log(c.lo)) / 2) - 1
