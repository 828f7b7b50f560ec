"""Runs and the master/worker merge: what one run measured, in one process or across a cluster.

A run is one test (test_start .. test_stop); the web UI can start several in one process, and each is
summarised on its own. Workers send the master their measurements with every stats report (cumulative, for
/metrics/cluster, and the current run's, tagged with the master's run number) and once more when their run
stops; the master's figures for a run are the sum of its workers' last reports of that run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from loadgen._recorder import Snapshot


@dataclass
class RunClock:
    """Wall and CPU time of the current (or last) run of this process."""

    number: int = 0
    started: float = field(default_factory=time.perf_counter)
    stopped: float = 0.0  # 0 while running
    cpu_started: float = field(default_factory=time.process_time)
    cpu_stopped: float = 0.0

    def start(self, number: int) -> None:
        self.number = number
        self.started, self.stopped = time.perf_counter(), 0.0
        self.cpu_started, self.cpu_stopped = time.process_time(), 0.0

    def stop(self) -> None:
        if not self.stopped:
            self.stopped, self.cpu_stopped = time.perf_counter(), time.process_time()

    @property
    def running(self) -> bool:
        return not self.stopped

    def wall_s(self) -> float:
        return max(1e-9, (self.stopped or time.perf_counter()) - self.started)

    def cpu_s(self) -> float:
        return (self.cpu_stopped or time.process_time()) - self.cpu_started


def report(total: Snapshot, run: Snapshot, clock: RunClock, final: bool) -> dict[str, Any]:
    """What a worker adds to its stats report (msgpack-able)."""
    run_snap = run.copy()
    run_snap.cpu_seconds = clock.cpu_s()
    return {"total": total.to_wire(), "run": run_snap.to_wire(), "run_number": clock.number,
            "run_wall_s": clock.wall_s(), "final": final}


@dataclass
class Workers:
    """The master's view of its workers' measurements."""

    urls: dict[str, str] = field(default_factory=dict)  # worker id -> its /metrics URL
    total: dict[str, Snapshot] = field(default_factory=dict)  # cumulative, as of the last report
    run: dict[str, Snapshot] = field(default_factory=dict)  # the current run's, as of the last report
    run_wall: dict[str, float] = field(default_factory=dict)
    final: set[str] = field(default_factory=set)  # workers whose run has stopped and reported
    foreign: set[str] = field(default_factory=set)  # workers whose reports carry no xfer figures: not loadgen
    run_number: int = 0

    def new_run(self, number: int) -> None:
        self.run_number = number
        self.run.clear()
        self.run_wall.clear()
        self.final.clear()

    def on_report(self, worker: str, data: dict[str, Any]) -> None:
        if url := data.get("metrics_url"):
            self.urls[worker] = url
        if "total" in data:
            self.total[worker] = Snapshot.from_wire(data["total"])
        if data.get("run_number") == self.run_number and "run" in data:
            self.run[worker] = Snapshot.from_wire(data["run"])
            self.run_wall[worker] = data.get("run_wall_s", 0.0)
            if data.get("final"):
                self.final.add(worker)

    def silent(self, workers: list[str]) -> list[str]:
        """Those of `workers` that have neither said hello nor shown they run another locustfile."""
        return [w for w in workers if w not in self.urls and w not in self.foreign]

    def cluster_total(self) -> Snapshot:
        merged = Snapshot()
        for snap in self.total.values():
            merged.add(snap)
        return merged

    def run_snapshot(self) -> Snapshot:
        merged = Snapshot()
        for snap in self.run.values():
            merged.add(snap)
        return merged

    def all_final(self) -> bool:
        """Every worker has sent its run's last report: those that reported during the run, and those that said
        hello (a run shorter than Locust's report interval has no reports before the last ones)."""
        return bool(self.run) and self.final >= set(self.run) | set(self.urls)

    def busiest_cpu_cores(self) -> float:
        """The highest CPU of one worker over its run, in cores."""
        return max((s.cpu_seconds / max(1e-9, self.run_wall.get(w, 0.0))
                    for w, s in self.run.items()), default=0.0)
