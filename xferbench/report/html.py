"""report.html: one self-contained page (plotly.js inlined once, no network). From the top: what this run
can tell apart (noise floor, pinning, ranking metric, A/A check, Holm family), the verdict table, the
ranking, failures and warnings, bars of the geometric means with their 95% t-intervals, and the time series
as small multiples (one panel per series, one line per configuration: the median over repeats at each
second, shaded from the minimum to the maximum)."""

from __future__ import annotations

import csv
import html as h
import math
import statistics
from pathlib import Path

import plotly.graph_objects as go
from plotly.colors import convert_colors_to_same_type, qualitative
from plotly.subplots import make_subplots

from xferbench import figures, stats
from xferbench.metrics import BY_NAME, METRICS
from xferbench.report import conns, containers, cpu, fmt, soak, stress, tables
from xferbench.report.summary import Summary
from xferbench.runmeta import Machine

# Time-series panels, in this order, for the columns of figures.SERIES_COLUMNS that hold data.
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

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1200px;
color:#222}table{border-collapse:collapse;font-size:13px;margin:1em 0}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.better{color:#0a7d19;font-weight:600}
.worse{color:#b3261e;font-weight:600}.ns{color:#777}.floor{color:#777;font-style:italic}.failed{color:#b3261e}
td.l,th.l{text-align:left}
code{background:#f5f5f5;padding:0 3px}
.note{color:#555;font-size:13px}
.head{background:#f7f7fa;border:1px solid #dde;padding:.6em 1em .6em 2em;font-size:14px}
.head li{margin:.2em 0}
"""


def _title(metric: str) -> str:
    """"peak RSS (B)"; unitless figures (GC CPU share, counts) read best bare."""
    m = BY_NAME[metric]
    return f"{m.title} ({m.unit})" if m.unit else m.title


def _cls(c: stats.Comparison | None) -> str:
    if c is None:
        return ""
    return {stats.BETTER: "better", stats.WORSE: "worse", stats.BELOW_FLOOR: "floor"}.get(c.verdict, "ns")


def _colors(s: Summary) -> dict[str, str]:
    pal = qualitative.Plotly + qualitative.D3 + qualitative.Set2
    return {c.name: pal[i % len(pal)] for i, c in enumerate(s.cells)}


def _rgba(color: str, alpha: float) -> str:
    (r, g, b), *_ = convert_colors_to_same_type(color, "tuple")[0]
    return f"rgba({round(r * 255)},{round(g * 255)},{round(b * 255)},{alpha})"


def _table(head: list[str], rows: list[list[str]], left: tuple[int, ...] = ()) -> str:
    """An HTML table; head is plain text, rows are HTML; `left` columns align left."""

    def cls(i: int) -> str:
        return " class='l'" if i in left else ""

    out = ["<table><tr>" + "".join(f"<th{cls(i)}>{h.escape(x)}</th>" for i, x in enumerate(head)) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f"<td{cls(i)}>{x}</td>" for i, x in enumerate(r)) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _header(s: Summary) -> str:
    items = [f"<li><b>{h.escape(label)}</b>: {h.escape(text)}</li>" for label, text in tables.header(s)]
    return "<ul class='head'>" + "".join(items) + "</ul>"


def _verdicts(s: Summary) -> str:
    if not s.verdicts:
        return f"<p class='note'>{h.escape(tables.NO_VERDICTS.capitalize())}.</p>"
    rows = []
    for v in s.verdicts:
        t = [h.escape(x) for x in tables.verdict_row(s, v)]
        t[0] = f"<code>{h.escape(v.cell)}</code>" + tables.aa_mark(s, v.cell)
        t[4] = f"<span class='{_cls(v.comparison)}'>{t[4]}</span>"
        rows.append(t)
    return _table(list(tables.VERDICT_HEAD), rows, left=(0, 1, 4))


def _ranking(s: Summary) -> str:
    cols = tables.short_columns(s)
    cap = tables.has_capacity(s)
    head = ["#", "configuration", "runs", _title(cols[0]), "vs baseline"] + [_title(m) for m in cols[1:]]
    head += ["capacity search"] if cap else []
    rows = []
    for i, c in enumerate(s.ranked(), 1):
        cmp_ = c.vs_base.get(s.rank_metric)
        vs = (
            "baseline"
            if c.name == s.baseline
            else f"<span class='{_cls(cmp_)}'>{h.escape(fmt.comparison(cmp_))}</span>"
        )
        vals = [h.escape(fmt.estimate(c.est[m], BY_NAME[m].unit)) for m in cols]
        row = [
            str(i),
            f"<code>{h.escape(c.name)}</code>" + (" (baseline)" if c.name == s.baseline else ""),
            f"{c.n_ok}" + (f' <span class="failed">+{c.n_failed} failed</span>' if c.n_failed else ""),
            vals[0],
            vs,
            *vals[1:],
        ]
        if cap:
            row.append(h.escape(tables.capacity_text(s, c)))
        rows.append(row)
    return _table(head, rows, left=(1,))


def _soak(s: Summary) -> str:
    """The soak section: one row per run, "LEAK?" in red with its reasons."""
    rows = [
        [
            f"<code>{h.escape(ln.run)}</code>",
            h.escape(ln.text),
            f"<span class='{'worse' if soak.flagged(ln) else 'ns'}'>{h.escape(ln.verdict)}</span>",
            h.escape(ln.why),
        ]
        for ln in soak.lines(s)
    ]
    if not rows:
        return "<h2>Soak</h2><p class='note'>No run finished with soak figures.</p>"
    return "<h2>Soak</h2>" + _table(["run", "growth and what the server held", "verdict", "why"], rows, left=(0, 1, 2, 3))


def _bars(s: Summary, colors: dict[str, str]) -> go.Figure | None:
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
        subplot_titles=[_title(m) for m in metrics],
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


def _series(s: Summary, run_dir: Path, colors: dict[str, str], soak_series: bool = False) -> go.Figure | None:
    """The time series; `soak_series`: a soak's own (RSS, live heap, descriptors, goroutines, threads)."""
    data = series_by_second(s, run_dir, soak_series)
    panels = _series_panels(data, SOAK_SERIES, ()) if soak_series else _series_panels(data)
    if not panels:
        return None
    nrows = (len(panels) + SERIES_COLS - 1) // SERIES_COLS
    fig = make_subplots(
        rows=nrows,
        cols=SERIES_COLS,
        subplot_titles=[t for _, t in panels],
        vertical_spacing=0.3 / nrows,
        horizontal_spacing=0.08,
    )
    shown: set[str] = set()
    warm = s.meta.warmup_s
    for i, (col, _) in enumerate(panels):
        row, pcol = i // SERIES_COLS + 1, i % SERIES_COLS + 1
        for cell in (c.name for c in s.cells):
            secs = data[col].get(cell)
            if not secs:
                continue
            xs = sorted(secs)
            med = [statistics.median(secs[x]) for x in xs]
            lo = [min(secs[x]) for x in xs]
            hi = [max(secs[x]) for x in xs]
            color = colors.get(cell, "#888888")
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
                    showlegend=cell not in shown,
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
            shown.add(cell)
        if warm:
            fig.add_vline(x=warm, line_dash="dot", line_color="#999", row=row, col=pcol)
    fig.update_layout(
        height=240 * nrows + 60, margin={"t": 40, "b": 20}, legend={"font": {"size": 10}}, hovermode="closest"
    )
    fig.update_xaxes(matches="x")  # one time axis: zooming one panel zooms them all
    for i in range(max(0, len(panels) - SERIES_COLS), len(panels)):  # the lowest panel of each column
        row, pcol = i // SERIES_COLS + 1, i % SERIES_COLS + 1
        fig.update_xaxes(title_text="s since load started", title_font={"size": 10}, row=row, col=pcol)
    return fig


def render(s: Summary, run_dir: Path) -> str:
    colors = _colors(s)
    meta = s.meta
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>xferbench: "
        f"{h.escape(meta.experiment)}</title><style>{CSS}</style></head><body>",
        f"<h1>xferbench — {h.escape(meta.experiment or '?')}</h1>",
        _header(s),
    ]
    if meta.description:
        parts.append(f"<p>{h.escape(meta.description)}</p>")
    mach = meta.machine or Machine()
    parts.append(
        f"<p class='note'>Started {h.escape(tables.unknown(meta.started_at))} on "
        f"{h.escape(tables.unknown(mach.hostname))} ({tables.unknown(mach.cpus)} CPUs); "
        f"{tables.unknown(meta.repeats)} repeats interleaved; {tables.unknown(meta.warmup_s)} s warm-up discarded; "
        f"server figures from {h.escape(meta.source)}. Baseline: "
        f"<code>{h.escape(s.baseline)}</code>.</p>"
    )
    if meta.interrupted:
        parts.append("<p class='failed'><b>Interrupted</b>: the sweep was stopped; this is what was measured.</p>")
    if soak.is_soak(s):
        parts.append(_soak(s))
    else:
        parts.append(f"<h2>Verdicts: each configuration vs the baseline <code>{h.escape(s.baseline)}</code></h2>")
        parts.append(
            "<p class='note'>Ratio = configuration / baseline (geometric mean of the per-round ratios) with its 95% "
            "CI; <span class='better'>better</span> or <span class='worse'>worse</span> only when the Holm-adjusted "
            f"p is below {s.alpha:g} and the change exceeds the metric's noise floor; "
            "<span class='floor'>below the noise floor</span> when it is significant but smaller.</p>"
        )
        parts.append(_verdicts(s))
    parts.append(f"<h2>{h.escape(tables.ranking_title(s))}</h2>")
    parts.append(
        "<p class='note'>Geometric means across repeats with [95% t-interval] "
        f"(none with fewer than {stats.MIN_REPEATS} repeats); <i>vs baseline</i> repeats the verdict above.</p>"
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
    if containers.has_containers(s):
        parts.append(f"<h2>{containers.TITLE}</h2><p class='note'>{h.escape(containers.NOTE)}</p>")
        parts.append(_table(list(containers.HEAD), [[h.escape(x) for x in r] for r in containers.rows(s)], left=(0,)))
    if conns.shown(s):
        parts.append(f"<h2>Connections</h2><p class='note'>{h.escape(conns.NOTE)}</p>")
        parts.append(_table(list(conns.HEAD), [[f"<code>{h.escape(r[0])}</code>", *map(h.escape, r[1:])]
                                               for r in conns.rows(s)], left=(0, 1)))
    profiled = cpu.html(s, include_plotlyjs=True)
    parts.append(profiled)
    matrix = stress.html(s, include_plotlyjs=not profiled)
    parts.append(matrix)
    first = not profiled and not matrix
    for title, note, fig in (
        (
            "Across repeats",
            "Bars: geometric mean, whiskers 95% t-interval, dots: repeats (the arithmetic mean where a value "
            "is zero or negative).",
            _bars(s, colors),
        ),
        (
            "Time series",
            "One panel per series, one line per configuration: the median over its successful repeats at each "
            "second since the load started, shaded from the minimum to the maximum; dotted: end of warm-up.",
            _series(s, run_dir, colors),
        ),
        (
            "Soak series",
            "What the soak's lines are computed from: RSS, descriptors and threads read from /proc every second, "
            "the live heap and goroutines from the server's metrics; dotted: end of warm-up, where growth starts.",
            _series(s, run_dir, colors, soak_series=True) if soak.is_soak(s) else None,
        ),
    ):
        if fig is None:
            continue
        parts.append(f"<h2>{h.escape(title)}</h2><p class='note'>{h.escape(note)}</p>")
        parts.append(fig.to_html(full_html=False, include_plotlyjs=first, config={"displaylogo": False}))
        first = False
    parts.append("</body></html>")
    return "\n".join(parts)


def write(s: Summary, run_dir: Path, path: Path) -> None:
    path.write_text(render(s, run_dir), encoding="utf-8")
