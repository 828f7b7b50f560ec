"""The report's CPU attribution (runs profiled with `profile = true`): per cell, the mean share of the
server's CPU samples in each bucket (xferbench/measure/profile/classify.py), the Amdahl bound on what a faster
allocator could gain end to end, beside the measured ratio to the baseline, and links to the flame graphs."""

from __future__ import annotations

import html as h
import statistics
from dataclasses import dataclass, field

import plotly.graph_objects as go

from xferbench.analysis.summary import CellSummary, Summary
from xferbench.config import slug
from xferbench.measure.profile import cell_graph
from xferbench.measure.profile.classify import BUCKETS
from xferbench.report import fmt

BUCKET_COLORS = {
    "allocator": "#d62728", "gc": "#ff7f0e", "copy": "#1f77b4", "checksum": "#9467bd", "protobuf": "#8c564b",
    "syscall+net": "#2ca02c", "locks": "#e377c2", "other": "#b0b0b0",
}


@dataclass
class CellCpu:
    cell: CellSummary
    runs: int
    samples: int
    shares: dict[str, float]  # mean over the cell's profiled runs
    graphs: list[str] = field(default_factory=list)  # the cell's flame graph, then each run's (or folded stacks)

    @property
    def allocator(self) -> float:
        return self.shares.get("allocator", 0.0)


def amdahl_bound(share: float) -> float:
    """The end-to-end speed-up if the part taking `share` of the CPU cost nothing: 1 / (1 - share)."""
    return float("inf") if share >= 1 else 1 / (1 - share)


def cells(s: Summary) -> list[CellCpu]:
    out = []
    for c in s.cells:
        rows = [r for r in s.rows if r.cell == c.name and r.ok and r.cpu_profile and r.cpu_profile.get("samples")]
        if not rows:
            continue
        shares = {b: statistics.fmean(float((r.cpu_profile or {})["shares"].get(b, 0.0)) for r in rows)
                  for b in BUCKETS}
        samples = sum(int((r.cpu_profile or {}).get("samples", 0)) for r in rows)
        graphs = [r.flamegraph for r in rows if r.flamegraph]
        if any(g.endswith(".svg") for g in graphs):  # drawn, so the runner drew the cell's graph too
            graphs.insert(0, cell_graph(slug(c.name)))
        out.append(CellCpu(c, len(rows), samples, shares, graphs))
    return out


def _label(i: int, cc: CellCpu) -> str:
    """"all runs" for the cell's own graph, then "r1", "r2", ... for its runs' (when the cell's was drawn)."""
    has_cell = bool(cc.graphs) and cc.graphs[0] == cell_graph(slug(cc.cell.name))
    if has_cell:
        return "all runs" if i == 0 else f"run {i}"
    return f"run {i + 1}"


def line(s: Summary, cc: CellCpu) -> str:
    """"allocator 12.3% of server CPU → at most 1.14x end to end from a faster allocator; measured ..."."""
    text = (f"allocator {cc.allocator * 100:.1f}% of server CPU → at most {amdahl_bound(cc.allocator):.2f}x end to "
            "end from a faster allocator")
    if not s.is_baseline(cc.cell.name):
        text += f"; measured {s.rank_metric} vs baseline: {fmt.comparison(cc.cell.vs_base.get(s.rank_metric))}"
    return text


def markdown(s: Summary) -> list[str]:
    cs = cells(s)
    if not cs:
        return []
    out = ["## Where the server's CPU goes", "",
           "Share of the server's CPU samples in each measured window (mean over runs), by the innermost frame "
           "that matches xferbench/measure/profile/classify.py; the Amdahl bound is 1 / (1 - allocator share).", "",
           "| configuration | samples | " + " | ".join(BUCKETS) + " | Amdahl bound, and the measured ratio |",
           "|---|---:|" + "---:|" * len(BUCKETS) + "---|"]
    for cc in cs:
        shares = " | ".join(f"{cc.shares[b] * 100:.1f}%" for b in BUCKETS)
        graphs = " ".join(f"[{_label(i, cc)}]({g})" for i, g in enumerate(cc.graphs))
        out.append(f"| `{cc.cell.name}` {graphs} | {cc.samples} | {shares} | {line(s, cc)} |")
    return [*out, ""]


def html(s: Summary, include_plotlyjs: bool) -> str:
    """The section: a stacked bar per cell, then a line per cell with links to its flame graphs."""
    cs = cells(s)
    if not cs:
        return ""
    names = [cc.cell.name for cc in cs]
    fig = go.Figure([go.Bar(name=b, x=names, y=[cc.shares[b] * 100 for cc in cs], marker_color=BUCKET_COLORS[b],
                            hovertemplate="%{x}<br>" + b + " %{y:.1f}%<extra></extra>") for b in BUCKETS])
    fig.update_layout(barmode="stack", height=380, margin={"t": 30, "b": 20}, yaxis={"title": "% of server CPU"})
    fig.update_xaxes(tickangle=-30, tickfont={"size": 9})
    items = []
    for cc in cs:
        links = "flame graphs: " + " ".join(f"<a href='{h.escape(g)}'>{_label(i, cc)}</a>" for i, g in enumerate(cc.graphs))
        items.append(f"<li><code>{h.escape(cc.cell.name)}</code> ({cc.samples} samples): "
                     f"{h.escape(line(s, cc))}. {links}</li>")
    plot: str = fig.to_html(full_html=False, include_plotlyjs=include_plotlyjs, config={"displaylogo": False})
    return ("<h2>Where the server's CPU goes</h2><p class='note'>Share of the server's CPU samples in each "
            "measured window (mean over runs), each sample put in one bucket by the innermost frame of its stack "
            "that matches xferbench/measure/profile/classify.py. Amdahl: an allocator that cost nothing could speed the "
            "server up at most 1 / (1 - allocator share).</p>"
            + plot + "<ul>" + "".join(items) + "</ul>")
