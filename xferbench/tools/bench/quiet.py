"""Is anyone else using the CPUs? The CPU time of every process outside this one's tree, between two readings.

A load average cannot answer it during a bench: the bench's own server and client keep both cores busy, so
the one-minute load climbs to about 2 with nobody else on the machine. What the machine spent in user and
system time (/proc/stat) minus what this process and its descendants spent is what others took.
"""

from __future__ import annotations

import os
import time

import psutil

CLK_TCK = os.sysconf("SC_CLK_TCK")
# Cores that others may use, on average over a measurement, before its figure is marked busy: a fifth of a
# core is a neighbour's build or test suite, far above the kernel's and the system's own few hundredths.
BUSY_CORES = 0.2


def machine_cpu_s() -> float:
    """User, nice and system seconds of every CPU since boot. Interrupt time is left out: loopback traffic's
    softirq work is the bench's own, yet no process is charged for it."""
    with open("/proc/stat", encoding="ascii") as f:
        user, nice, system = (int(x) for x in f.readline().split()[1:4])
    return (user + nice + system) / CLK_TCK


def own_cpu_s() -> float:
    """CPU seconds of this process and its descendants: the live ones' own, plus what every process of the
    tree has reaped from children that ended (a child's time moves to its parent's account when it is waited
    for, so each second is counted once)."""
    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:  # ended meanwhile: its time is in its parent's children_* once reaped
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


# Both sides are counted in clock ticks (10 ms), the machine's per CPU and the tree's per process, so their
# difference is uncertain by a few ticks whatever the interval: SLACK_S of it is not counted as others', and a
# reading less than MIN_INTERVAL_S after the previous one (two figures of the same runs) repeats its value.
SLACK_S = 0.05
MIN_INTERVAL_S = 0.5


class Others:
    """Readings of the CPU that processes outside this tree used since the previous reading, in cores."""

    def __init__(self) -> None:
        self._last = (time.monotonic(), machine_cpu_s(), own_cpu_s())
        self._value = 0.0

    def cores(self) -> float:
        now = (time.monotonic(), machine_cpu_s(), own_cpu_s())
        (t0, m0, o0), (t1, m1, o1) = self._last, now
        if t1 - t0 < MIN_INTERVAL_S:
            return self._value
        self._last = now
        self._value = max(0.0, (m1 - m0) - (o1 - o0) - SLACK_S) / (t1 - t0)
        return self._value
