"""report.html's charts: bars of each figure's estimates across repeats, and the time series as small multiples
(one panel per series, one line per configuration: the median over repeats at each second, shaded from the
minimum to the maximum). The page around them is xferbench/report/html.py."""

from __future__ import annotations

import csv
import html as h
import math
import statistics
from pathlib import Path

import plotly.graph_objects as go
from plotly.colors import convert_colors_to_same_type, qualitative
from plotly.subplots import make_subplots

from xferbench.analysis.metrics import BY_NAME, METRICS
from xferbench.analysis.summary import Summary
from xferbench.measure import figures

SERIES = (
    ("client_qps", "client QPS (req/s)"),
    ("client_p95_s", "client P95 (s)"),
    ("server_cpu_cores", "server CPU (cores)"),
    ("rss_bytes", "server RSS (bytes)"),
    ("gc_pause_s_per_s", "GC pause (s per s)"),
    ("gen_cpu_cores", "generator CPU (cores)"),
    ("client_bytes_per_s", "client bytes/s"),
    ("server_qps", "server QPS (req/s)"),
    ("server_p95_s", "server P95 (s)"),
    ("gc_pauses_per_s", "GC pauses per s"),
    ("heap_inuse_bytes", "Go heap in use (bytes)"),
    ("alloc_resident_bytes", "allocator resident (bytes)"),
)
SERIES_COLS = 2
# A soak's own series (timeseries/*.soak.csv), a panel each.
SOAK_SERIES = (
    ("rss_bytes", "RSS, /proc (bytes)"),
    ("heap_bytes", "live heap (bytes)"),
    ("open_fds", "open descriptors"),
    ("goroutines", "goroutines"),
    ("threads", "threads"),
)


def metric_title(metric: str) -> str:
    """"peak RSS (B)"; unitless figures (GC CPU share, counts) read best bare."""
    m = BY_NAME[metric]
    return f"{m.title} ({m.unit})" if m.unit else m.title


def colors(s: Summary) -> dict[str, str]:
    pal = qualitative.Plotly + qualitative.D3 + qualitative.Set2
    return {c.name: pal[i % len(pal)] for i, c in enumerate(s.cells)}


def _rgba(color: str, alpha: float) -> str:
    (r, g, b), *_ = convert_colors_to_same_type(color, "tuple")[0]
    return f"rgba({round(r * 255)},{round(g * 255)},{round(b * 255)},{alpha})"


def bars(s: Summary, colors: dict[str, str]) -> go.Figure | None:
    present = set(s.present_metrics())
    bars = [m.name for m in METRICS if m.bar]
    metrics = [m for m in (s.rank_metric, *bars) if m in present]
    metrics = list(dict.fromkeys(metrics))
    if not metrics:
        return None
    ncols = 2
    nrows = (len(metrics) + ncols - 1) // ncols
    fig = make_subplots(
        rows=nrows,
        cols=ncols,
        subplot_titles=[metric_title(m) for m in metrics],
        vertical_spacing=0.3 / max(nrows, 1),
    )
    names = [c.name for c in s.cells]
    for i, m in enumerate(metrics):
        r, col = i // ncols + 1, i % ncols + 1
        est = [c.est[m] for c in s.cells]
        center = [e.center for e in est]
        plus = [e.hi - e.center if e.center is not None and e.hi is not None else None for e in est]
        minus = [e.center - e.lo if e.center is not None and e.lo is not None else None for e in est]
        # stats.estimate falls back to the arithmetic mean when a value is <= 0 (a count of zero pauses).
        kind = ["geometric mean" if all(v > 0 for v in c.values.get(m, [])) else "mean" for c in s.cells]
        fig.add_trace(
            go.Bar(
                x=names,
                y=center,
                customdata=kind,
                marker_color=[colors[n] for n in names],
                showlegend=False,
                error_y={"type": "data", "array": plus, "arrayminus": minus, "visible": True},
                hovertemplate="%{x}<br>%{customdata} %{y:.4g}<extra></extra>",
            ),
            row=r,
            col=col,
        )
        xs, ys = [], []
        for c in s.cells:
            for v in c.values.get(m, []):
                xs.append(c.name)
                ys.append(v)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="markers",
                marker={"color": "black", "size": 5},
                showlegend=False,
                hovertemplate="%{x}<br>repeat %{y:.4g}<extra></extra>",
            ),
            row=r,
            col=col,
        )
    fig.update_layout(height=300 * nrows, margin={"t": 40, "b": 20}, bargap=0.3)
    fig.update_xaxes(tickangle=-30, tickfont={"size": 9})
    return fig


def _read_series(run_dir: Path, rel: str | None) -> list[dict[str, str]]:
    if not rel:
        return []
    p = run_dir / rel
    if not p.exists():
        return []
    with open(p, encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _num(x: str | None) -> float | None:
    if x in (None, ""):
        return None
    try:
        v = float(x)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def series_by_second(
    s: Summary, run_dir: Path, soak_series: bool = False
) -> dict[str, dict[str, dict[int, list[float]]]]:
    """column → cell → second → one value per successful repeat (a repeat's samples within one second,
    t rounded to the nearest second, are averaged first)."""
    out: dict[str, dict[str, dict[int, list[float]]]] = {}
    for r in s.rows:
        if not r.ok:
            continue
        data = _read_series(run_dir, r.soak_series if soak_series else r.timeseries)
        per: dict[str, dict[int, list[float]]] = {}
        for d in data:
            t = _num(d.get("t"))
            if t is None:
                continue
            sec = round(t)
            for col, x in d.items():
                v = _num(x)
                if col != "t" and col is not None and v is not None:
                    per.setdefault(col, {}).setdefault(sec, []).append(v)
        for col, secs in per.items():
            cell = out.setdefault(col, {}).setdefault(r.cell, {})
            for sec, vs in secs.items():
                cell.setdefault(sec, []).append(sum(vs) / len(vs))
    return out


def _series_panels(
    data: dict[str, dict[str, dict[int, list[float]]]], spec: tuple[tuple[str, str], ...] = SERIES,
    columns: tuple[str, ...] = figures.SERIES_COLUMNS,
) -> list[tuple[str, str]]:
    titles = dict(spec)
    known = [c for c, _ in spec] + [c for c in columns if c != "t" and c not in titles]
    return [(c, titles.get(c, c)) for c in known if data.get(c)]


def _series_grid(panels: list[tuple[str, str]]) -> go.Figure:
    nrows = (len(panels) + SERIES_COLS - 1) // SERIES_COLS
    fig = make_subplots(
        rows=nrows,
        cols=SERIES_COLS,
        subplot_titles=[t for _, t in panels],
        vertical_spacing=0.3 / nrows,
        horizontal_spacing=0.08,
    )
    return fig


def _lay_out_series(fig: go.Figure, panels: list[tuple[str, str]]) -> None:
    nrows = (len(panels) + SERIES_COLS - 1) // SERIES_COLS
    fig.update_layout(
        height=240 * nrows + 60, margin={"t": 40, "b": 20}, legend={"font": {"size": 10}}, hovermode="closest"
    )
    fig.update_xaxes(matches="x")  # one time axis: zooming one panel zooms them all
    for i in range(max(0, len(panels) - SERIES_COLS), len(panels)):  # the lowest panel of each column
        row, pcol = i // SERIES_COLS + 1, i % SERIES_COLS + 1
        fig.update_xaxes(title_text="s since load started", title_font={"size": 10}, row=row, col=pcol)


def _add_cell_line(fig: go.Figure, cell: str, secs: dict[int, list[float]], color: str, legend: bool,
                   at: tuple[int, int]) -> None:
    """One configuration's line in one panel: the median at each second, over a band from the minimum to the
    maximum where more than one repeat has a value."""
    row, pcol = at
    xs = sorted(secs)
    med = [statistics.median(secs[x]) for x in xs]
    lo = [min(secs[x]) for x in xs]
    hi = [max(secs[x]) for x in xs]
    if any(len(secs[x]) > 1 for x in xs):
        fig.add_trace(
            go.Scatter(
                x=xs + xs[::-1],
                y=hi + lo[::-1],
                fill="toself",
                fillcolor=_rgba(color, 0.18),
                line={"width": 0},
                mode="lines",
                legendgroup=cell,
                showlegend=False,
                hoverinfo="skip",
            ),
            row=row,
            col=pcol,
        )
    n = [len(secs[x]) for x in xs]
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=med,
            customdata=list(zip(lo, hi, n, strict=True)),
            mode="lines",
            name=cell,
            legendgroup=cell,
            showlegend=legend,
            line={"color": color, "width": 1.5},
            hovertemplate=(
                f"{h.escape(cell)}<br>t=%{{x}} s: median %{{y:.4g}}"
                "<br>range %{customdata[0]:.4g} - %{customdata[1]:.4g} over %{customdata[2]} repeats"
                "<extra></extra>"
            ),
        ),
        row=row,
        col=pcol,
    )


def series(s: Summary, run_dir: Path, colors: dict[str, str], soak_series: bool = False) -> go.Figure | None:
    """The time series; `soak_series`: a soak's own (RSS, live heap, descriptors, goroutines, threads)."""
    data = series_by_second(s, run_dir, soak_series)
    panels = _series_panels(data, SOAK_SERIES, ()) if soak_series else _series_panels(data)
    if not panels:
        return None
    fig = _series_grid(panels)
    shown: set[str] = set()
    warm = s.meta.warmup_s
    for i, (col, _) in enumerate(panels):
        row, pcol = i // SERIES_COLS + 1, i % SERIES_COLS + 1
        for cell in (c.name for c in s.cells):
            secs = data[col].get(cell)
            if not secs:
                continue
            _add_cell_line(fig, cell, secs, colors.get(cell, "#888888"), cell not in shown, (row, pcol))
            shown.add(cell)
        if warm:
            fig.add_vline(x=warm, line_dash="dot", line_color="#999", row=row, col=pcol)
    _lay_out_series(fig, panels)
    return fig
