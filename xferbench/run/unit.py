"""One unit of a round: one run, or a duet's two runs at once, each with its own metrics source, started
together at a barrier so their measured windows coincide; the rows of runs Ctrl-C stopped."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from xferbench.analysis.row import RunRow
from xferbench.analysis.runmeta import Placement
from xferbench.config import Experiment
from xferbench.measure.sources import MetricsSource
from xferbench.run.lifecycle import run_one
from xferbench.run.live import new_row
from xferbench.run.matrix import Run
from xferbench.run.progress_protocol import NullProgress
from xferbench.run.serverstart import kill_everything

if TYPE_CHECKING:  # the docker SDK is imported only when an experiment runs containers
    import docker


def run_unit(
    exp: Experiment,
    unit: list[Run],
    run_dir: Path,
    source: MetricsSource,
    progress: NullProgress,
    engine: docker.DockerClient | None = None,
    placement: Placement | None = None,
) -> tuple[list[RunRow], bool]:
    """One run, or a duet's two runs at once. Returns the rows and whether Ctrl-C stopped it."""
    if len(unit) == 1:
        try:
            return [run_one(exp, unit[0], run_dir, source, progress, engine=engine, placement=placement)], False
        except KeyboardInterrupt:
            return [interrupted_row(exp, unit[0], source)], True
    barrier = threading.Barrier(len(unit))
    rows: list[RunRow | None] = [None] * len(unit)
    sources = [source, *(source.twin() for _ in unit[1:])]

    def go(i: int) -> None:
        rows[i] = run_one(exp, unit[i], run_dir, sources[i], progress, barrier, engine, placement)

    threads = [threading.Thread(target=go, args=(i,), name=f"duet-{i}") for i in range(len(unit))]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except KeyboardInterrupt:
        barrier.abort()
        kill_everything()  # the duet's servers and Locusts: each thread then ends its run as failed
        for t in threads:
            t.join()
        return [interrupted_row(exp, run, source) for run in unit], True
    return [r if r is not None else interrupted_row(exp, run, source) for r, run in zip(rows, unit, strict=True)], False


def interrupted_row(exp: Experiment, run: Run, source: MetricsSource) -> RunRow:
    row = new_row(exp, run, source)
    row.status, row.error = "interrupted", "stopped by Ctrl-C / SIGTERM"
    return row
