"""The report's per-host section, for a run of an experiment with [hosts]: per configuration and host (this machine
among them), its roles in the run and its own figures over the measured window (RunRow.hosts): CPU in cores split
as the kernel counts it, network received and sent, TCP retransmits. The median over the configuration's successful
runs; a figure no run could read is "missing" with the reason, never 0."""

from __future__ import annotations

import statistics
from typing import Any

from xferbench.analysis.summary import Summary
from xferbench.report import fmt

TITLE = "Hosts"
NOTE = (
    "Each host's own figures over the measured window, read from its /proc at the window's edges: CPU in cores of "
    "the CPUs it may use (a lab host: its cpuset's, shared with whatever else runs on them), network bytes and "
    "packets per second on every interface but lo and a bridge's ports, TCP segments retransmitted and their share "
    "of the segments sent. Medians over each configuration's successful runs; (n of m) when only n of its m runs "
    "could read a figure."
)
CPU = ("user", "system", "softirq", "irq", "steal", "iowait", "idle")
HEAD = (
    "configuration",
    "host",
    "roles",
    "CPUs",
    *CPU,
    "received",
    "sent",
    "packets in/s",
    "packets out/s",
    "TCP retransmits",
    "retransmits/s",
    "of segments sent",
)


def shown(s: Summary) -> bool:
    return any(r.hosts for r in s.rows if r.ok)


def rows(s: Summary) -> list[list[str]]:
    """One row per configuration and host, in the rows' order of hosts."""
    out = []
    for c in s.cells:
        runs = [r for r in s.rows if r.cell == c.name and r.ok and r.hosts]
        names: list[str] = []
        for r in runs:
            names += [n for n in r.hosts or {} if n not in names]
        for name in names:
            got = [(r.hosts or {})[name] for r in runs if name in (r.hosts or {})]
            roles = ", ".join(got[0].get("roles") or []) or "-"
            out.append([c.name, name, roles, *_figures(got)])
    return out


# Each part's columns: its key in RunRow.hosts and how its value prints.
COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "cpu": (("cpus", "count"), *((k, "cores") for k in CPU)),
    "net": (("rx_bytes_per_s", "B/s"), ("tx_bytes_per_s", "B/s"), ("rx_packets_per_s", "/s"), ("tx_packets_per_s", "/s")),
    "tcp": (("retrans_segs", "count"), ("retrans_per_s", "/s"), ("retrans_share", "share")),
}


def _show(v: float, unit: str) -> str:
    if unit == "B/s":
        return fmt.value(v, unit)
    if unit == "cores":
        return f"{v:.2f}"
    if unit == "share":
        return f"{v:.3%}"
    return f"{v:,.1f}" if unit == "/s" and v < 100 else f"{v:,.0f}"


def _figures(got: list[dict[str, Any]]) -> list[str]:
    """The host's columns after its roles: its CPUs and their time, network, TCP."""
    return [col for part, columns in COLUMNS.items() for col in _part(got, part, columns)]


def _part(got: list[dict[str, Any]], part: str, columns: tuple[tuple[str, str], ...]) -> list[str]:
    """The columns of one part (cpu, net, tcp): medians over the runs that read it, or "missing: why" first."""
    read = [h[part] for h in got if isinstance(h.get(part), dict) and "error" not in h[part]]
    if not read:
        why = next((str(h[part]["error"]) for h in got if isinstance(h.get(part), dict)), "not recorded")
        return [f"missing: {why}"] + [""] * (len(columns) - 1)
    tail = f" ({len(read)} of {len(got)})" if len(read) < len(got) else ""
    out = []
    for key, unit in columns:
        v = _median([p.get(key) for p in read])
        out.append((_show(v, unit) if v is not None else "-") + tail)
    return out


def _median(values: list[Any]) -> float | None:
    nums = [float(v) for v in values if isinstance(v, int | float)]
    return statistics.median(nums) if nums else None


def markdown(s: Summary) -> list[str]:
    if not shown(s):
        return []
    out = [f"## {TITLE}", "", NOTE, "", "| " + " | ".join(HEAD) + " |", "|---|---|---|" + "---:|" * (len(HEAD) - 3)]
    for r in rows(s):
        out.append("| " + " | ".join([f"`{r[0]}`", *(x.replace("|", "\\|") for x in r[1:])]) + " |")
    return [*out, ""]
