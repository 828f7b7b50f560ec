"""The soak's leak check of one run (an experiment with a [soak] table).

Before the load, the idle server's descriptors, threads and goroutines are counted; during it, RSS,
descriptors and threads are read from /proc every tick (the live heap comes from the server's own metrics);
after Locust has stopped, the counts are taken again once the server has let go of its clients. The row gets
typed `soak_*` fields and a verdict: "ok", "LEAK?" (with the reasons) or "n/a".

Growth is judged on the end of the run, not on the rise since the warm-up: RSS and live-heap lines
(xferbench/measure/growth.py) are fitted through the last third of the measured window only (`judged_span`; at least
MIN_TAIL_S, the whole window when it is shorter), and the verdict holds their growth over that part against
[soak] growth_max. A leak grows as much per second at the end as at the start, so it still shows there; a pool,
a cache, a store or the Go heap's scavenger still settling after the warm-up has stopped by the end, so its
rise before does not count. The rise since the warm-up mixed the two: a server still filling towards its
plateau after the warm-up was flagged although it had stopped growing. The row's soak_from_s and soak_window_s
are that last part and soak_rss_growth / soak_heap_growth the fitted growth over it, so the report's
"RSS +x.x% (a s → b s)" reads literally.

How much a flat server's figure wanders sets what growth_max can mean. xferd-go (pool on) at the soak's load
on a shared 2-core machine, two 30-minute runs with no trend in their minutes' medians: the fitted growth over
any 160-600 s part had a standard deviation of 2.5-4.4% (RSS) and 1.7-5.4% (live heap), single parts reaching
+12% and +17% (the live heap moves in whole pooled 1.25 MiB buffers, about 5% of it each; RSS with what the Go
scavenger has returned). A run over the goal is a reason to read its timeseries/*.soak.csv and take heap
profiles, not yet a proven leak; experiments/soak-30m.toml judges 560 s instead of the 10-minute soak's 160 s.
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass, field
from pathlib import Path

from xferbench.analysis.row import Figures, RunRow
from xferbench.config import Soak
from xferbench.measure import growth, procfs
from xferbench.measure.scrape import Snapshot, scrape

OK, LEAK, NA = "ok", "LEAK?", "n/a"
# The live heap, best first: Go's heap marked live at the last GC (what is really retained; heap_alloc also
# counts garbage not yet collected, a sawtooth), then what the C server's allocator says is allocated.
HEAP_METRICS = ("go_gc_heap_live_bytes", "go_memstats_heap_alloc_bytes", "xfer_allocator_allocated_bytes")
SETTLE_TIMEOUT_S = 10.0  # after the load: how long the server gets to close its clients' connections
SETTLE_EVERY_S = 0.25
SERIES_COLUMNS = ("t", "rss_bytes", "heap_bytes", "open_fds", "threads", "goroutines")
TAIL_FRACTION = 1 / 3  # the verdict's lines go through the last third of the measured window...
MIN_TAIL_S = 30.0  # ...but through at least this many seconds (a tick a second), or the whole window if shorter


def judged_span(t_from: float, t_to: float) -> float:
    """Where the verdict's part of the measured window [t_from, t_to] starts: its last third, at least
    MIN_TAIL_S long, never before t_from."""
    length = t_to - t_from
    return t_to - min(length, max(length * TAIL_FRACTION, MIN_TAIL_S))


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

    def window(self, server: list[Snapshot], t0: float, t_from: float, t_to: float) -> Figures:
        """Growth fields of the measured window [t_from, t_to] (wall-clock; t0: the load's start): the fitted
        growth over its last part (judged_span), which the verdict judges."""
        rss = [(t, float(v)) for t, v, _, _ in self.ticks if v is not None]
        metric, heap = heap_series(server)
        t_judged = judged_span(t_from, t_to)
        return {
            "soak_from_s": round(t_judged - t0, 3),
            "soak_window_s": round(t_to - t_judged, 3),
            "soak_rss_growth": growth.growth([t for t, _ in rss], [v for _, v in rss], t_judged, t_to),
            "soak_heap_metric": metric,
            "soak_heap_growth": growth.growth([t for t, _ in heap], [v for _, v in heap], t_judged, t_to)
            if heap
            else None,
        }

    def after(self) -> Figures:
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
    """"ok", "LEAK?" with what is over the goal, or "n/a" when no growth figure could be computed. The growth
    figures are those of the judged part, the end of the run (soak_from_s, soak_window_s): see the module's
    docstring."""
    flags = []
    part = f" in the last {row.soak_window_s:.0f} s" if row.soak_window_s is not None else ""
    for g, what in ((row.soak_rss_growth, "RSS"), (row.soak_heap_growth, "live heap")):
        if g is not None and g > goal.growth_max:
            flags.append(f"{what} grew {g * 100:+.1f}%{part} (goal <= {goal.growth_max * 100:g}%)")
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
