"""Per-step windows of a stepped run: one measured window per user level, cut from the per-second scrapes.

A stepped load (`[load] steps`, loadgen's `--xfer-steps`) climbs through its levels on one server process, as
a stress test does. Each level's window is found in the client's own scrapes, not from the clock: it starts
`settle_s` after the first scrape whose `xfer_client_users` shows the level fully started, and ends at the
last consecutive scrape still at that level (the next level's spawn has not begun there). A window cut from
the clock would mix two levels whenever Locust's start and the runner's first tick differ, or a spawn is slow.

Each window gets the figures of a point of the stress matrix: MB/s, average latency, P50/P95/P99, error rate,
the generator's CPU (and its CPUs' idle time) with `saturated` marked, and the server's CPU over the window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from xferbench.measure import figures
from xferbench.measure.scrape import Snapshot, counter_growth

Tick = tuple[float, float, float]  # wall time, idle and stolen CPU-seconds of the generator's CPUs so far

DURATION = "xfer_client_request_duration_seconds"


@dataclass(frozen=True)
class Window:
    """The scrapes of one level's measured window; `note` says why there are fewer than two."""

    users: int
    snaps: tuple[Snapshot, ...]
    note: str | None = None


def users_of(s: Snapshot) -> int | None:
    v = s.sum("xfer_client_users")
    return None if v is None else round(v)


def windows(client: Sequence[Snapshot], levels: Sequence[int], settle_s: float) -> list[Window]:
    """One window per level (in order), from the client scrapes of one run."""
    out = []
    for level in levels:
        at = _first_run_at(client, level)
        if not at:
            out.append(Window(level, (), f"no scrape of the generator showed all {level} users running (the "
                                         "spawn did not finish, or a starved generator's /metrics did not answer)"))
            continue
        start = at[0].t + settle_s
        snaps = tuple(s for s in at if s.t >= start - 0.05)  # a scrape lands within ~50 ms of its tick
        note = None
        if len(snaps) < 2:
            note = (f"{level} users held {at[-1].t - at[0].t:.1f} s: fewer than two scrapes after the {settle_s:g} s "
                    "settle time")
        out.append(Window(level, snaps, note))
    return out


def _first_run_at(client: Sequence[Snapshot], level: int) -> list[Snapshot]:
    """The first unbroken sequence of scrapes showing exactly `level` users."""
    run: list[Snapshot] = []
    for s in sorted(client, key=lambda s: s.t):
        if users_of(s) == level:
            run.append(s)
        elif run:
            break
    return run


@dataclass
class Level:
    """One level's figures (None where its window is too short or a side exports nothing): a point of the stress
    matrix. The figures' names are the row's (xferbench/analysis/row.py Figures) where the row has the figure;
    `to_json()` is one element of the row's `steps`."""

    users: int
    note: str | None = None
    duration_s: float | None = None
    client_bytes_per_s: float | None = None
    client_qps: float | None = None
    client_avg_s: float | None = None
    client_p50_s: float | None = None
    client_p95_s: float | None = None
    client_p99_s: float | None = None
    client_requests: float | None = None
    client_failures: float | None = None
    client_failure_rate: float | None = None
    gen_cpu_cores: float | None = None
    gen_cpus_idle_cores: float | None = None
    gen_saturated: bool | None = None
    server_cpu_cores: float | None = None
    server_bytes_per_s: float | None = None
    rss_peak_bytes: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def step_figures(win: Window, server: Sequence[Snapshot], gen_ticks: Sequence[Tick]) -> Level:
    """A level's figures (None where its window is too short or a side exports nothing)."""
    out = Level(win.users, win.note)
    if len(win.snaps) < 2:
        return out
    a, b = win.snaps[0], win.snaps[-1]
    c = figures.client_figures(list(win.snaps))
    out.duration_s = round(b.t - a.t, 3)
    out.client_bytes_per_s = c.get("client_bytes_per_s")
    out.client_qps = c.get("client_qps")
    out.client_p50_s = c.get("client_p50_s")
    out.client_p95_s = c.get("client_p95_s")
    out.client_p99_s = c.get("client_p99_s")
    out.client_requests = c.get("client_requests")
    out.client_failures = c.get("client_failures")
    out.client_failure_rate = c.get("client_failure_rate")
    out.gen_cpu_cores = c.get("gen_cpu_cores")
    out.client_avg_s = average_s(a, b)
    out.gen_cpus_idle_cores = idle_cores(gen_ticks, a.t, b.t)
    out.gen_saturated = figures.generator_saturated(out.gen_cpu_cores, out.gen_cpus_idle_cores)
    srv = figures.server_figures(figures.window(list(server), a.t, b.t))
    out.server_cpu_cores = srv.get("server_cpu_cores")
    out.server_bytes_per_s = srv.get("server_bytes_per_s")
    out.rss_peak_bytes = srv.get("rss_peak_bytes")
    return out


def average_s(a: Snapshot, b: Snapshot) -> float | None:
    """Mean operation latency between two scrapes: the histogram's sum over its count (chunk records apart)."""
    def op(d: dict[str, str]) -> bool:  # a whole operation, as figures counts them
        return d.get("method", "") not in figures.CHUNK_METHODS

    total = counter_growth(a, b, DURATION + "_sum", op)
    n = counter_growth(a, b, DURATION + "_count", op)
    return total / n if total is not None and n else None


def idle_cores(ticks: Sequence[Tick], t_a: float, t_b: float) -> float | None:
    """Idle cores of the generator's CPUs between the ticks nearest t_a and t_b (None without two ticks)."""
    if len(ticks) < 2:
        return None
    ta = min(ticks, key=lambda k: abs(k[0] - t_a))
    tb = min(ticks, key=lambda k: abs(k[0] - t_b))
    dt = tb[0] - ta[0]
    return (tb[1] - ta[1]) / dt if dt > 0 else None


def per_step(client: Sequence[Snapshot], server: Sequence[Snapshot], gen_ticks: Sequence[Tick],
             levels: Sequence[int], settle_s: float) -> list[Level]:
    """Every level's figures, in order: what a run row keeps as `steps` (each one's to_json())."""
    return [step_figures(w, server, gen_ticks) for w in windows(client, levels, settle_s)]


def warnings(steps: Sequence[Level]) -> list[str]:
    """A level whose generator saturated, or that has no window, is said so, never silently reported."""
    out = []
    for st in steps:
        if st.note:
            out.append(f"step {st.users} users: no figures: {st.note}")
        elif st.gen_saturated:
            out.append(f"step {st.users} users: load generator saturated ({st.gen_cpu_cores or 0:.2f} "
                       f"cores its own, its CPUs {st.gen_cpus_idle_cores or 0:.2f} cores idle); the step's "
                       "figures may describe Locust rather than the server")
    return out
