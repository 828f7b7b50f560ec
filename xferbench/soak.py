"""The soak's leak check of one run (an experiment with a [soak] table).

Before the load, the idle server's descriptors, threads and goroutines are counted; during it, RSS,
descriptors and threads are read from /proc every tick (the live heap comes from the server's own metrics);
over the measured window (after the experiment's warm-up) RSS and live-heap growth are fitted
(xferbench/growth.py); after Locust has stopped, the counts are taken again once the server has let go of
its clients. The row gets typed `soak_*` fields and a verdict: "ok", "LEAK?" (with the reasons) or "n/a".
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xferbench import growth, procfs
from xferbench.experiment import Soak
from xferbench.row import RunRow
from xferbench.scrape import Snapshot, scrape

OK, LEAK, NA = "ok", "LEAK?", "n/a"
# The live heap, best first: Go's heap marked live at the last GC (what is really retained; heap_alloc also
# counts garbage not yet collected, a sawtooth), then what the C server's allocator says is allocated.
HEAP_METRICS = ("go_gc_heap_live_bytes", "go_memstats_heap_alloc_bytes", "xfer_allocator_allocated_bytes")
SETTLE_TIMEOUT_S = 10.0  # after the load: how long the server gets to close its clients' connections
SETTLE_EVERY_S = 0.25
SERIES_COLUMNS = ("t", "rss_bytes", "heap_bytes", "open_fds", "threads", "goroutines")


@dataclass(frozen=True)
class Held:
    """What a server holds at one instant: descriptors, OS threads, goroutines (xferd-go only)."""

    fds: int | None
    threads: int | None
    goroutines: int | None

    def within(self, start: Held, slack: int) -> bool:
        """No more than `slack` above `start` in every count both have (see `tasks`)."""
        pairs = ((self.fds, start.fds), *tasks(self, start))
        return all(a is None or b is None or a <= b + slack for a, b in pairs)


def tasks(end: Held, start: Held) -> list[tuple[int | None, int | None]]:
    """(end, start) of what should return to its count: goroutines where the server has them, else OS
    threads. Go's runtime keeps the threads a load made it start (it never ends idle Ms), so its threads
    are not a leak sign; its goroutines are."""
    if start.goroutines is not None:
        return [(end.goroutines, start.goroutines)]
    return [(end.threads, start.threads)]


def held_now(pid: int, metrics_url: str) -> Held:
    snap = scrape(metrics_url, timeout=2.0)
    g = snap.sum("go_goroutines") if snap is not None else None
    return Held(procfs.open_fds(pid), procfs.threads(procfs.status(pid)), int(g) if g is not None else None)


@dataclass
class Watch:
    """The leak check of one run on one running server."""

    pid: int
    metrics_url: str
    goal: Soak
    start: Held | None = None
    ticks: list[tuple[float, int | None, int | None, int | None]] = field(default_factory=list)  # t, rss, fds, threads

    def before(self) -> None:
        self.start = held_now(self.pid, self.metrics_url)

    def tick(self) -> None:
        st = procfs.status(self.pid)
        self.ticks.append((time.time(), procfs.rss_bytes(st), procfs.open_fds(self.pid), procfs.threads(st)))

    def window(self, server: list[Snapshot], t0: float, t_from: float, t_to: float) -> dict[str, Any]:
        """Growth fields over the measured window [t_from, t_to] (wall-clock; t0: the load's start)."""
        rss = [(t, float(v)) for t, v, _, _ in self.ticks if v is not None]
        metric, heap = heap_series(server)
        return {
            "soak_from_s": round(t_from - t0, 3),
            "soak_window_s": round(t_to - t_from, 3),
            "soak_rss_growth": growth.growth([t for t, _ in rss], [v for _, v in rss], t_from, t_to),
            "soak_heap_metric": metric,
            "soak_heap_growth": growth.growth([t for t, _ in heap], [v for _, v in heap], t_from, t_to)
            if heap
            else None,
        }

    def after(self) -> dict[str, Any]:
        """The counts once the load is gone (waiting, bounded, for the server to close its connections),
        against those before it, and the run's verdict."""
        start = self.start or Held(None, None, None)
        end = held_now(self.pid, self.metrics_url)
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while not end.within(start, self.goal.held_slack) and time.monotonic() < deadline:
            time.sleep(SETTLE_EVERY_S)
            end = held_now(self.pid, self.metrics_url)
        return {
            "soak_fds_start": start.fds,
            "soak_fds_end": end.fds,
            "soak_threads_start": start.threads,
            "soak_threads_end": end.threads,
            "soak_goroutines_start": start.goroutines,
            "soak_goroutines_end": end.goroutines,
        }

    def write_series(self, path: Path, server: list[Snapshot], t0: float) -> None:
        """One row per tick: /proc figures, and the live heap and goroutines of the nearest server scrape."""
        srv = sorted(server, key=lambda s: s.t)
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(SERIES_COLUMNS)
            for t, rss, fds, thr in self.ticks:
                s = _nearest(srv, t)
                heap = next((v for m in HEAP_METRICS if s and (v := s.sum(m)) is not None), None)
                gor = s.sum("go_goroutines") if s else None
                w.writerow([round(t - t0, 3), *("" if v is None else v for v in (rss, heap, fds, thr, gor))])


def heap_series(server: list[Snapshot]) -> tuple[str | None, list[tuple[float, float]]]:
    """The first HEAP_METRICS name the server exports, and its (t, value) series; (None, []) without one."""
    for m in HEAP_METRICS:
        pts = [(s.t, v) for s in server if (v := s.sum(m)) is not None]
        if pts:
            return m, pts
    return None, []


def verdict(row: RunRow, goal: Soak) -> tuple[str, list[str]]:
    """"ok", "LEAK?" with what is over the goal, or "n/a" when no growth figure could be computed."""
    flags = []
    for g, what in ((row.soak_rss_growth, "RSS"), (row.soak_heap_growth, "live heap")):
        if g is not None and g > goal.growth_max:
            flags.append(f"{what} grew {g * 100:+.1f}% (goal <= {goal.growth_max * 100:g}%)")
    held = [("fds", row.soak_fds_start, row.soak_fds_end)]
    if row.soak_goroutines_start is not None:
        held.append(("goroutines", row.soak_goroutines_start, row.soak_goroutines_end))
    else:
        held.append(("threads", row.soak_threads_start, row.soak_threads_end))
    for kind, a, b in held:
        if a is not None and b is not None and b > a + goal.held_slack:
            flags.append(f"{kind} {a}->{b} after the load (allowed +{goal.held_slack})")
    if flags:
        return LEAK, flags
    if row.soak_rss_growth is None:
        return NA, ["no RSS growth figure: the measured window is too short"]
    return OK, []


def _nearest(snaps: list[Snapshot], t: float, slack: float = 1.0) -> Snapshot | None:
    best = min(snaps, key=lambda s: abs(s.t - t), default=None)
    return best if best is not None and abs(best.t - t) <= slack else None
