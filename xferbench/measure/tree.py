"""A server's whole process tree, however it forks, and the figures of a window over it.

What the runner measures any server by, with no help from it: its CPU from the most precise clock there is, and
its memory, threads, descriptors, context switches and page faults summed over every process it runs. Two ways
to know which processes those are:

- **CgroupTree**: the server's own cgroup (xferbench/measure/cgroup.py). CPU is the group's clock in
  nanoseconds, exited children included; the members are the group's.
- **ProcTree**: no cgroup to use (none could be made, or XFERBENCH_CGROUP=off). The leader and its live
  descendants from /proc; CPU is their utime + stime in clock ticks (10 ms), plus the children each has
  reaped (cutime + cstime). A child whose parent did not wait for it, or that was re-parented away, is lost:
  the report says which clock a run had.
- **Elsewhere** (a server on another host, xferbench/run/remoteserver.py): the same /proc tree, read on that host
  by the server's watch; such a tree is `SampledElsewhere` and gives its own readings.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import psutil

from xferbench.analysis.row import Figures
from xferbench.measure import procfs
from xferbench.measure.cgroup import Cgroup


class Tree(Protocol):
    @property
    def clock(self) -> str:
        """Where the CPU time comes from, for the report."""
        ...

    def pids(self) -> list[int]: ...

    def cpu_s(self) -> float | None:
        """CPU seconds of the whole tree so far; None once it is gone."""
        ...


@dataclass(frozen=True)
class CgroupTree:
    cgroup: Cgroup

    @property
    def clock(self) -> str:
        return self.cgroup.clock

    def pids(self) -> list[int]:
        return self.cgroup.pids()

    def cpu_s(self) -> float | None:
        ns = self.cgroup.cpu_ns()
        return ns / 1e9 if ns is not None else None


@dataclass(frozen=True)
class ProcTree:
    root: int
    clock: str = "/proc process tree (10 ms ticks; live processes and the children they reaped)"

    def pids(self) -> list[int]:
        try:
            p = psutil.Process(self.root)
            return [self.root, *(c.pid for c in p.children(recursive=True))]
        except psutil.Error:
            return []

    def cpu_s(self) -> float | None:
        total, seen = 0.0, False
        for pid in self.pids():
            fields = procfs.stat(pid)
            if fields is not None:
                seen = True
                total += procfs.cpu_s(fields, children=True)
        return total if seen else None


def cpu_step_s(t: Tree) -> float | None:
    """The step of the tree's CPU clock: None for a cgroup's nanoseconds; /proc's clock tick for a tree read from
    /proc, here or on another host (USER_HZ, which /proc reports in: 100 per second on every Linux); a tree on
    another host, its own `step_s` (a container's cgroup read by its engine there: None)."""
    if isinstance(t, CgroupTree):
        return None
    if isinstance(t, TreeOnHost):
        return t.step_s
    return 1 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Sample:
    """One reading of the whole tree."""

    t: float  # wall clock
    cpu_s: float  # user + system of every process and thread, by the tree's clock
    rss_bytes: int  # the sum of the processes' RSS (a page two of them share counts twice, as ps shows it)
    threads: int
    ctx_switches: int  # voluntary + involuntary, of every live thread
    page_faults: int  # minor + major
    fds: int
    procs: int


@runtime_checkable
class SampledElsewhere(Protocol):
    """A tree whose /proc is not this machine's (a server on another host): it reads itself there."""

    def read(self) -> Sample | None:
        """The tree now, read where it runs; None when no process of it is left (or no answer came)."""
        ...


@dataclass
class TreeOnHost:
    """A server's tree on another host (SampledElsewhere): its pid there, never looked up in this machine's /proc,
    and its readings from `reader`, which asks that host (a server's watch, a container engine's statistics);
    `step_s` its CPU clock's step (cpu_step_s: /proc's tick, or None for a cgroup's nanoseconds)."""

    clock: str
    pid: Callable[[], int]
    reader: Callable[[], Sample | None]
    step_s: float | None

    def pids(self) -> list[int]:
        return [self.pid()]

    def cpu_s(self) -> float | None:
        s = self.read()
        return s.cpu_s if s is not None else None

    def read(self) -> Sample | None:
        return self.reader()


def sample(tree: Tree) -> Sample | None:
    """The tree now; None when no process of it is left."""
    if isinstance(tree, SampledElsewhere):
        return tree.read()
    pids = tree.pids()
    cpu = tree.cpu_s()
    if not pids or cpu is None:
        return None
    rss = threads = switches = faults = fds = procs = 0
    for pid in pids:
        fields = procfs.stat(pid)
        if fields is None:
            continue  # exited between the listing and the reading
        st = procfs.status(pid)
        procs += 1
        rss += procfs.rss_bytes(st) or 0
        threads += int(fields[17])
        faults += int(fields[7]) + int(fields[9])
        switches += procfs.switches(pid)
        fds += procfs.open_fds(pid) or 0
    if not procs:
        return None
    return Sample(time.time(), cpu, rss, threads, switches, faults, fds, procs)


@dataclass(frozen=True)
class Window:
    """What the whole tree did over a window: `figures`, the RunRow fields it measured (a figure its samples
    cannot give is left out, so that the server's own figure of that name stands); `cpu_s`, its CPU seconds in
    the window by the tree's clock, over `span_s`, the samples' own span (None without two samples in it);
    `cpu_error_s`, the most its clock's step can make cpu_s wrong by (None: a nanosecond clock)."""

    figures: Figures
    cpu_s: float | None = None
    span_s: float | None = None
    cpu_error_s: float | None = None


def window_figures(samples: list[Sample], t_a: float, t_b: float, step_s: float | None = None) -> Window:
    """The window [t_a, t_b]: the tree's CPU seconds in it, mean RSS, context switches and page faults per second;
    peaks of RSS, threads, descriptors and processes over every sample (the whole run). `step_s`: the step of the
    samples' CPU clock (cpu_step_s)."""
    out: Figures = {}
    if samples:
        out["rss_peak_bytes"] = max(s.rss_bytes for s in samples)
        out["proc_threads_peak"] = max(s.threads for s in samples)
        out["proc_fds_peak"] = max(s.fds for s in samples)
        out["procs_peak"] = max(s.procs for s in samples)
    win = [s for s in samples if t_a - 0.5 <= s.t <= t_b + 0.5]
    if len(win) < 2 or win[-1].t <= win[0].t:
        return Window(out)
    a, b = win[0], win[-1]
    dt = b.t - a.t
    out["rss_mean_bytes"] = sum(s.rss_bytes for s in win) / len(win)
    out["proc_ctx_switches_per_s"] = (b.ctx_switches - a.ctx_switches) / dt
    out["proc_page_faults_per_s"] = (b.page_faults - a.page_faults) / dt
    # Each process's ticks are truncated at both readings, so its difference is off by less than a step; so is the
    # sum of the children its processes reaped.
    error = step_s * (max(a.procs, b.procs) + 1) if step_s is not None else None
    return Window(out, b.cpu_s - a.cpu_s, dt, error)


def of_server(root: int, cgroup: Cgroup | None) -> Tree:
    return CgroupTree(cgroup) if cgroup is not None else ProcTree(root)

