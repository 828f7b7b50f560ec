"""report.html: one self-contained page (plotly.js inlined once, no network) with the ranking table, bars
with 95% CIs across repeats, and per-cell time series of QPS, P95, RSS and GC pauses."""

from __future__ import annotations

import csv
import html as h
from pathlib import Path

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from xferbench import stats
from xferbench.report import fmt
from xferbench.report.summary import Summary

BARS = (
    "client_qps",
    "client_bytes_per_s",
    "client_p95_s",
    "client_p99_s",
    "server_qps",
    "server_p95_s",
    "rss_peak_bytes",
    "gc_pause_total_s",
    "gc_pause_p99_s",
    "gc_cpu_share",
    "alloc_allocated_bytes",
    "alloc_resident_bytes",
    "gen_cpu_cores",
)
SERIES = (
    ("client_qps", "client QPS (req/s)"),
    ("client_p95_s", "client P95 (s)"),
    ("rss_bytes", "server RSS (bytes)"),
    ("gc_pause_s_per_s", "GC pause (s per s)"),
)
RANK_CMP = ("client_qps", "client_p95_s", "client_p99_s", "rss_peak_bytes", "gc_pause_total_s")

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1200px;
color:#222}table{border-collapse:collapse;font-size:13px;margin:1em 0}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.better{color:#0a7d19;font-weight:600}
.worse{color:#b3261e;font-weight:600}.ns{color:#777}.failed{color:#b3261e}
code{background:#f5f5f5;padding:0 3px}
.note{color:#555;font-size:13px}
"""


def _title(metric: str) -> str:
    """"peak RSS (B)"; unitless figures (GC CPU share, counts) read best bare."""
    _, name, unit, _ = stats.METRIC_INFO[metric]
    return f"{name} ({unit})" if unit else name


def _cls(c: stats.Comparison | None) -> str:
    if c is None:
        return ""
    return {stats.BETTER: "better", stats.WORSE: "worse"}.get(c.verdict, "ns")


def _colors(s: Summary) -> dict[str, str]:
    pal = qualitative.Plotly + qualitative.D3 + qualitative.Set2
    return {c.name: pal[i % len(pal)] for i, c in enumerate(s.cells)}


def _ranking(s: Summary) -> str:
    present = set(s.present_metrics())
    cmps = [m for m in RANK_CMP if m in present]
    head = ["#", "cell", "runs", "client QPS", "client P95", "peak RSS"] + [
        f"{stats.METRIC_INFO[m][1]} vs baseline" for m in cmps
    ]
    rows = []
    for i, c in enumerate(s.ranked(), 1):
        cells = [
            str(i),
            f"<code>{h.escape(c.name)}</code>" + (" (baseline)" if c.name == s.baseline else ""),
            f"{c.n_ok}" + (f' <span class="failed">+{c.n_failed} failed</span>' if c.n_failed else ""),
            h.escape(fmt.estimate(c.est["client_qps"], "req/s")),
            h.escape(fmt.estimate(c.est["client_p95_s"], "s")),
            h.escape(fmt.estimate(c.est["rss_peak_bytes"], "B")),
        ]
        for m in cmps:
            cmp_ = c.vs_base.get(m)
            txt = "—" if c.name == s.baseline else fmt.comparison(cmp_)
            cells.append(f'<span class="{_cls(cmp_) if c.name != s.baseline else ""}">{h.escape(txt)}</span>')
        rows.append("<tr>" + "".join(f"<td>{x}</td>" for x in cells) + "</tr>")
    return "<table><tr>" + "".join(f"<th>{h.escape(x)}</th>" for x in head) + "</tr>" + "".join(rows) + "</table>"


def _bars(s: Summary, colors: dict[str, str]) -> go.Figure | None:
    present = set(s.present_metrics())
    metrics = [m for m in BARS if m in present]
    if not metrics:
        return None
    ncols = 2
    nrows = (len(metrics) + ncols - 1) // ncols
    fig = make_subplots(
        rows=nrows,
        cols=ncols,
        subplot_titles=[_title(m) for m in metrics],
        vertical_spacing=0.3 / max(nrows, 1),
    )
    names = [c.name for c in s.cells]
    for i, m in enumerate(metrics):
        r, col = i // ncols + 1, i % ncols + 1
        med = [c.est[m].median for c in s.cells]
        plus = [(c.est[m].hi - c.est[m].median) if c.est[m].has_ci else None for c in s.cells]
        minus = [(c.est[m].median - c.est[m].lo) if c.est[m].has_ci else None for c in s.cells]
        fig.add_trace(
            go.Bar(
                x=names,
                y=med,
                marker_color=[colors[n] for n in names],
                showlegend=False,
                error_y={"type": "data", "array": plus, "arrayminus": minus, "visible": True},
                hovertemplate="%{x}<br>median %{y:.4g}<extra></extra>",
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


def _series(s: Summary, run_dir: Path, colors: dict[str, str]) -> go.Figure | None:
    fig = make_subplots(
        rows=len(SERIES),
        cols=1,
        shared_xaxes=True,
        subplot_titles=[t for _, t in SERIES],
        vertical_spacing=0.06,
    )
    any_data = False
    shown: set[str] = set()
    for r in s.rows:
        data = _read_series(run_dir, r.get("timeseries"))
        if not data:
            continue
        any_data = True
        cell = r["cell"]
        for i, (col, _) in enumerate(SERIES, 1):
            ys = [float(d[col]) if d.get(col) not in (None, "") else None for d in data]
            fig.add_trace(
                go.Scatter(
                    x=[float(d["t"]) for d in data],
                    y=ys,
                    mode="lines",
                    name=cell,
                    legendgroup=cell,
                    showlegend=(cell not in shown and i == 1),
                    line={"color": colors.get(cell), "width": 1.5},
                    hovertemplate=f"{h.escape(cell)} r{r['repeat']}<br>t=%{{x:.0f}}s %{{y:.4g}}<extra></extra>",
                ),
                row=i,
                col=1,
            )
        shown.add(cell)
    if not any_data:
        return None
    warm = s.meta.get("warmup_s")
    if warm:
        for i in range(1, len(SERIES) + 1):
            fig.add_vline(x=warm, line_dash="dot", line_color="#999", row=i, col=1)
    fig.update_layout(height=260 * len(SERIES), margin={"t": 40, "b": 20}, legend={"font": {"size": 10}})
    fig.update_xaxes(title_text="seconds since load started (dotted: end of warm-up)", row=len(SERIES), col=1)
    return fig


def render(s: Summary, run_dir: Path) -> str:
    colors = _colors(s)
    meta = s.meta
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>xferbench: "
        f"{h.escape(str(meta.get('experiment', '')))}</title><style>{CSS}</style></head><body>",
        f"<h1>xferbench — {h.escape(str(meta.get('experiment', '?')))}</h1>",
    ]
    if meta.get("description"):
        parts.append(f"<p>{h.escape(meta['description'])}</p>")
    mach = meta.get("machine") or {}
    parts.append(
        f"<p class='note'>Started {h.escape(str(meta.get('started_at', '?')))} on "
        f"{h.escape(str(mach.get('hostname', '?')))} ({mach.get('cpus', '?')} CPUs); "
        f"{meta.get('repeats', '?')} repeats interleaved; {meta.get('warmup_s', '?')} s warm-up discarded; "
        f"server figures from {h.escape(str(meta.get('source', 'scrape')))}. Baseline: "
        f"<code>{h.escape(s.baseline)}</code>.</p>"
    )
    if meta.get("interrupted"):
        parts.append("<p class='failed'><b>Interrupted</b>: the sweep was stopped; this is what was measured.</p>")
    parts.append("<h2>Ranking (by client QPS)</h2>")
    parts.append(
        "<p class='note'>Medians across repeats with [95% bootstrap CI] (none with fewer than 3 repeats). "
        "Ratios are cell / baseline with the CI of the ratio; <span class='better'>better</span> or "
        "<span class='worse'>worse</span> only when that CI excludes 1.</p>"
    )
    parts.append(_ranking(s))
    notes = [(c.name, e, "failed") for c in s.cells for e in c.errors] + [
        (c.name, w, "warning") for c in s.cells for w in c.warnings
    ]
    if notes:
        parts.append("<h2>Failures and warnings</h2><ul>")
        parts += [
            f"<li class='{'failed' if k == 'failed' else ''}'><code>{h.escape(n)}</code> {k}: {h.escape(t)}</li>"
            for n, t, k in notes
        ]
        parts.append("</ul>")
    first = True
    for title, fig in (
        ("Across repeats (bars: median, whiskers: 95% CI, dots: repeats)", _bars(s, colors)),
        ("Time series per cell", _series(s, run_dir, colors)),
    ):
        if fig is None:
            continue
        parts.append(f"<h2>{h.escape(title)}</h2>")
        parts.append(fig.to_html(full_html=False, include_plotlyjs=True if first else False, config={"displaylogo": False}))
        first = False
    parts.append("</body></html>")
    return "\n".join(parts)


def write(s: Summary, run_dir: Path, path: Path) -> None:
    path.write_text(render(s, run_dir), encoding="utf-8")
