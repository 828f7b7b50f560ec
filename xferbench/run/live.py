"""One run's state from start to stop (`Live`), its row before anything started, and the failure that ends
a run (`CellFailed`): what every step of a run (lifecycle.py, phase.py, serverstart.py) shares."""

from __future__ import annotations

import datetime as dt
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from xferbench.analysis.row import RunRow
from xferbench.analysis.runmeta import Placement
from xferbench.config import Experiment, slug
from xferbench.measure import soak
from xferbench.measure.sources import MetricsSource
from xferbench.run.handle import ServerHandle
from xferbench.run.matrix import Run
from xferbench.run.progress_protocol import NullProgress
from xferbench.run.toxiproxy import Toxiproxy

if TYPE_CHECKING:  # the docker SDK is imported only when an experiment runs containers
    import docker


class CellFailed(RuntimeError):
    """A run that cannot go on; `tail` holds the last output lines of the process that explains why."""

    def __init__(self, message: str, tail: list[str]) -> None:
        super().__init__(message)
        self.tail = tail


def new_row(exp: Experiment, run: Run, source: MetricsSource) -> RunRow:
    """A run's row before anything started: which run it is, and "ok" until something fails."""
    cell = run.cell
    return RunRow(
        cell=cell.name,
        server=cell.server,
        transport=cell.transport,
        experiment=exp.name,
        repeat=run.repeat,
        order=run.order,
        pair=run.pair,
        axes=dict(cell.axes),
        config=cell.config(),
        source=source.name,
        started_at=dt.datetime.now(dt.UTC).isoformat(),
        warmup_s=exp.warmup_s,
    )


@dataclass
class Live:
    """One run from start to stop: its row, and what starting it set up for measuring, collecting and
    stopping."""

    exp: Experiment
    run: Run
    run_dir: Path
    row: RunRow
    source: MetricsSource
    progress: NullProgress
    barrier: threading.Barrier | None = None
    engine: docker.DockerClient | None = None  # backend = "docker"
    server: ServerHandle | None = None
    proxy: Toxiproxy | None = None
    shadow: MetricsSource | None = None  # with PromQL, the built-in scraper alongside, to check every row
    client_addr: str | None = None  # where the generator connects: the [network] proxy, else the server itself
    watch: soak.Watch | None = None  # the leak check, in a soak
    begun: bool = False  # the metrics source has begun, so it must end
    placement: Placement | None = None  # an experiment with [hosts]: where the host check found its parts (hostcheck.py)

    @property
    def stem(self) -> str:
        """`<cell>.r<repeat>`, and `.with-<partner>` in a duet: the name of the run's logs and series."""
        run = self.run
        duet = f".with-{slug(run.pair.split('/', 1)[1])}" if "/" in run.pair else ""
        return f"{run.cell.slug}.r{run.repeat}{duet}"

    def log(self, what: str, stem: str | None = None) -> Path:
        return self.run_dir / "logs" / f"{stem or self.stem}.{what}.log"

    @property
    def running_server(self) -> ServerHandle:
        assert self.server is not None, "the server is started first"
        return self.server


def affinity(pid: int) -> list[int] | None:
    """The CPUs a process may really run on, read back from the kernel (not what was asked for)."""
    try:
        return sorted(os.sched_getaffinity(pid))
    except OSError:
        return None
