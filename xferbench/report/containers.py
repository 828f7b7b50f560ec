"""The report's container section (backend = "docker"): per cell, its limits, how many runs the kernel
OOM-killed, and the container's CPU throttling and memory peak beside QPS, P99, GC pauses and RSS."""

from __future__ import annotations

from typing import Any

from xferbench.analysis.metrics import BY_NAME
from xferbench.analysis.summary import CellSummary, Summary
from xferbench.report import fmt

TITLE = "Containers"
NOTE = ("Per cell: the container's cgroup limits; runs OOM-killed by the kernel (failed runs, counted here); "
        "the share of CFS periods in which the quota throttled the server and the time it lost; the cgroup's "
        "memory peak. Figures are geometric means over the successful runs.")
HEAD = ("configuration", "CPU limit", "memory limit", "runs", "OOM-killed", "throttled periods", "throttled time",
        "container memory peak", "client QPS", "client P99", "GC cycles", "GC pause total", "peak RSS")
_FIGURES = ("ctr_cpu_throttled_s", "ctr_mem_peak_bytes", "client_qps", "client_p99_s", "gc_pauses", "gc_pause_total_s",
            "rss_peak_bytes")


def has_containers(s: Summary) -> bool:
    return any(r.container for r in s.rows)


def _limits(s: Summary, c: CellSummary) -> dict[str, Any]:
    for r in s.rows:
        if r.cell == c.name and r.container:
            return r.container
    return {}


def _throttled_share(s: Summary, c: CellSummary) -> str:
    """Throttled periods over all periods, summed over the cell's successful runs."""
    rows = [r for r in s.rows if r.cell == c.name and r.ok and r.ctr_cpu_periods]
    periods = sum(r.ctr_cpu_periods or 0 for r in rows)
    if not periods:
        return "-"
    throttled = sum(r.ctr_cpu_throttled_periods or 0 for r in rows)
    return f"{throttled / periods:.0%} of {periods:.0f}"


def rows(s: Summary) -> list[list[str]]:
    out = []
    for c in s.cells:
        lim = _limits(s, c)
        cell_rows = [r for r in s.rows if r.cell == c.name]
        oom = sum(1 for r in cell_rows if r.ctr_oom_killed)
        cpus = f"{lim['cpus']:g}" if lim.get("cpus") else "none"
        mem = fmt.value(lim["memory_bytes"], "B") if lim.get("memory_bytes") else "none"
        runs = f"{c.n_ok}" + (f" ({c.n_failed} failed)" if c.n_failed else "")
        vals = [fmt.estimate(c.est[m], BY_NAME[m].unit, with_ci=False) for m in _FIGURES]
        out.append([c.name, cpus, mem, runs, f"{oom} of {len(cell_rows)}", _throttled_share(s, c), *vals])
    return out


def markdown(s: Summary) -> list[str]:
    if not has_containers(s):
        return []
    out = [f"## {TITLE}", "", NOTE, "", "| " + " | ".join(HEAD) + " |", "|---|" + "---:|" * (len(HEAD) - 1)]
    for r in rows(s):
        out.append("| " + " | ".join([f"`{r[0]}`", *r[1:]]) + " |")
    return [*out, ""]
