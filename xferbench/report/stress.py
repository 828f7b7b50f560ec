"""The stress-matrix view of a stepped run (experiments/netrpc-stress.toml): per file size and user level, the
median over repeats of each level's window (xferbench/measure/steps.py), as a table (summary.md, the terminal) and a
chart (report.html and stress.html beside it: one panel per figure against users, one line per file size).

Throughput is the server's transferred bytes per second: it counts every chunk as it goes, so a level's window
is not short of the transfers still running at its edges (with 10 MiB files at 1,000 users one transfer can
last longer than the window). Reconnect figures (`reconnects_per_s`, `conns_accepted_per_s`, `time_wait_peak`)
are a level's own when its figures have them, else the whole run's from the run row marked "(run)" (the
chart plots a level's own only), and "n/a" when neither has them.
"""

from __future__ import annotations

import html as h
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from py_client.sizes import parse_size
from xferbench.analysis.row import RunRow
from xferbench.analysis.summary import Summary
from xferbench.report import fmt

RECONNECT_KEYS = ("reconnects_per_s", "conns_accepted_per_s", "time_wait_peak")
NA = "n/a"
CHART_FILE = "stress.html"
# (key in a point, title, unit for fmt.value, scale for the chart)
PANELS = (
    ("mib_per_s", "MiB/s (server)", "", 1.0),
    ("client_avg_s", "average latency (ms)", "s", 1e3),
    ("client_p95_s", "P95 latency (ms)", "s", 1e3),
    ("client_failure_rate", "error rate (%)", "", 100.0),
    ("reconnects_per_s", "reconnects per s", "", 1.0),
)


@dataclass
class Point:
    """One (file size, users) point: the median over the repeats that measured it."""

    size: str
    users: int
    values: dict[str, float | None] = field(default_factory=dict)
    runs: int = 0
    saturated: int = 0  # repeats whose generator saturated at this level
    run_values: dict[str, float | None] = field(default_factory=dict)  # reconnect figures of the whole runs
    notes: list[str] = field(default_factory=list)


def _size_of(row: RunRow) -> str:
    return str((row.config.get("load") or {}).get("sizes") or row.cell)


def _size_key(size: str) -> float:
    try:
        return float(parse_size(size))
    except ValueError:
        return float("inf")


def _median(vals: list[float | None]) -> float | None:
    got = [v for v in vals if v is not None]
    return statistics.median(got) if got else None


def _step_value(step: dict[str, Any], key: str) -> float | None:
    if key == "mib_per_s":
        b = step.get("server_bytes_per_s")
        b = b if b is not None else step.get("client_bytes_per_s")
        return None if b is None else b / (1 << 20)
    v = step.get(key)
    return None if v is None else float(v)


def _run_value(row: RunRow, key: str) -> float | None:
    """A reconnect figure of the whole run (the row's), for a level that has none of its own."""
    v = row.extra.get(key)
    return None if v is None else float(v)


VALUE_KEYS = ("mib_per_s", "client_avg_s", "client_p50_s", "client_p95_s", "client_failure_rate", "gen_cpu_cores",
              "server_cpu_cores", *RECONNECT_KEYS)


def points(s: Summary) -> list[Point]:
    """Every (size, users) point of the ok stepped rows, by size then users."""
    by: dict[tuple[str, int], list[tuple[RunRow, dict[str, Any]]]] = {}
    for row in s.rows:
        if row.ok and row.steps:
            for st in row.steps:
                by.setdefault((_size_of(row), int(st["users"])), []).append((row, st))
    out = []
    for (size, users), items in sorted(by.items(), key=lambda kv: (_size_key(kv[0][0]), kv[0][1])):
        p = Point(size, users)
        measured = [(r, st) for r, st in items if not st.get("note")]
        p.runs = len(measured)
        p.saturated = sum(1 for _, st in measured if st.get("gen_saturated"))
        p.notes = sorted({str(st["note"]) for _, st in items if st.get("note")})
        p.values = {k: _median([_step_value(st, k) for _, st in measured]) for k in VALUE_KEYS}
        p.run_values = {k: _median([_run_value(r, k) for r, _ in measured]) for k in RECONNECT_KEYS}
        out.append(p)
    return out


HEAD = ("file size", "users", "MiB/s", "avg latency", "P50", "P95", "error rate", "reconnects/s",
        "conns accepted/s", "TIME_WAIT peak", "gen CPU", "runs", "generator")


def _num(v: float | None, digits: str = ".1f") -> str:
    return NA if v is None else format(v, digits)


def _reconnect(p: Point, key: str, digits: str) -> str:
    """The level's own figure; else the whole run's, marked "(run)"; else n/a."""
    if p.values[key] is not None:
        return _num(p.values[key], digits)
    run = p.run_values.get(key)
    return NA if run is None else f"{_num(run, digits)} (run)"


def cells(p: Point) -> list[str]:
    """A point's row of the table, as text."""
    v = p.values
    gen = "saturated" + (f" {p.saturated}/{p.runs}" if p.runs else "") if p.saturated else "ok"
    if not p.runs:
        gen = "not measured: " + "; ".join(p.notes)
    rate = v["client_failure_rate"]
    return [p.size, str(p.users), _num(v["mib_per_s"]), fmt.value(v["client_avg_s"], "s"),
            fmt.value(v["client_p50_s"], "s"), fmt.value(v["client_p95_s"], "s"),
            "-" if rate is None else f"{rate * 100:.2f}%", _reconnect(p, "reconnects_per_s", ".2f"),
            _reconnect(p, "conns_accepted_per_s", ".2f"), _reconnect(p, "time_wait_peak", ".0f"),
            fmt.value(v["gen_cpu_cores"], "cores"), str(p.runs), gen]


INTRO = ("Each level of every run measured in its own window ({settle}s after its users were all running, until the "
         "next level's spawn); each figure the median over the repeats. MiB/s: the server's transferred bytes. "
         "generator: \"saturated k/n\" when k of the n repeats had Locust above "
         "0.9 cores or its CPUs under 0.1 cores idle at that level: those figures may describe Locust, not the "
         "server. Reconnect figures: the level's own; \"(run)\" the whole run's when only the run recorded them; "
         "n/a when neither did.")


def _intro(s: Summary) -> str:
    settle = {str((r.config.get("load") or {}).get("settle_s", "?")) for r in s.rows if r.steps}
    return INTRO.format(settle="/".join(sorted(settle)) or "?")


def markdown(s: Summary) -> list[str]:
    pts = points(s)
    if not pts:
        return []
    out = ["## Stress matrix: per file size and user level", "", _intro(s), "",
           "| " + " | ".join(HEAD) + " |", "|---|" + "---:|" * (len(HEAD) - 2) + "---|"]
    out += ["| " + " | ".join(cells(p)) + " |" for p in pts]
    return [*out, ""]


def figure(s: Summary) -> go.Figure | None:
    """One panel per figure against users (log axis), one line per file size; saturated points as crosses."""
    pts = points(s)
    if not pts:
        return None
    sizes = list(dict.fromkeys(p.size for p in pts))
    fig = make_subplots(rows=len(PANELS), cols=1, subplot_titles=[t for _, t, _, _ in PANELS], vertical_spacing=0.06)
    palette = qualitative.Plotly
    for i, size in enumerate(sizes):
        line = [p for p in pts if p.size == size]
        for row, (key, title, _unit, scale) in enumerate(PANELS, 1):
            ys = [None if p.values[key] is None else p.values[key] * scale for p in line]  # type: ignore[operator]
            fig.add_trace(go.Scatter(
                x=[p.users for p in line], y=ys, name=size, legendgroup=size, showlegend=row == 1,
                mode="lines+markers", line={"color": palette[i % len(palette)]},
                marker={"symbol": ["x" if p.saturated else "circle" for p in line], "size": 9},
                hovertemplate=f"{size}, %{{x}} users<br>{title}: %{{y:.3g}}<extra></extra>"), row=row, col=1)
    fig.update_xaxes(type="log", title_text="concurrent users (connections)", tickvals=sorted({p.users for p in pts}))
    fig.update_layout(height=260 * len(PANELS) + 60, margin={"t": 40, "b": 30}, hovermode="closest")
    return fig


def html(s: Summary, include_plotlyjs: bool) -> str:
    """The section of report.html: the table, then the chart."""
    pts = points(s)
    fig = figure(s)
    if not pts or fig is None:
        return ""
    head = "".join(f"<th>{h.escape(c)}</th>" for c in HEAD)
    body = "".join("<tr>" + "".join(f"<td>{h.escape(c)}</td>" for c in cells(p)) + "</tr>" for p in pts)
    plot: str = fig.to_html(full_html=False, include_plotlyjs=include_plotlyjs, config={"displaylogo": False})
    return (f"<h2>Stress matrix: per file size and user level</h2><p class='note'>{h.escape(_intro(s))} "
            "Crosses on the chart: a saturated generator.</p>"
            f"<table><tr>{head}</tr>{body}</table>{plot}")


def write_chart(s: Summary, path: Path) -> bool:
    """The chart alone as a self-contained page (plotly.js inlined); False when the run has no steps."""
    fig = figure(s)
    if fig is None:
        return False
    fig.update_layout(title_text=f"{s.meta.experiment}: stress matrix (median of repeats)")
    fig.write_html(path, include_plotlyjs=True, full_html=True)
    return True
