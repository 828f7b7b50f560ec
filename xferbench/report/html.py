"""report.html: one self-contained page (plotly.js inlined once, no network). From the top: what this run
can tell apart (noise floor, pinning, ranking metric, A/A check, Holm family), the verdict table, the
ranking, failures and warnings, then the charts (xferbench/report/charts.py): bars of the geometric means with
their 95% t-intervals, and the time series as small multiples."""

from __future__ import annotations

import html as h
from pathlib import Path

from xferbench.analysis import failure, stats
from xferbench.analysis.metrics import BY_NAME
from xferbench.analysis.runmeta import Machine
from xferbench.analysis.summary import Summary
from xferbench.report import charts, conns, containers, cpu, fmt, hosts, soak, stress, tables
from xferbench.report.charts import metric_title

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


def _code(name: str) -> str:
    return f"<code>{h.escape(name)}</code>"


def _cls(c: stats.Comparison | None) -> str:
    if c is None:
        return ""
    return {stats.BETTER: "better", stats.WORSE: "worse", stats.BELOW_FLOOR: "floor"}.get(c.verdict, "ns")


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
    if not s.table:
        return f"<p class='note'>{h.escape(tables.NO_VERDICTS.capitalize())}.</p>"
    rows = []
    for v in s.table:
        t = [h.escape(x) for x in tables.verdict_row(s, v)]
        t[0] = f"<code>{h.escape(v.cell)}</code>" + tables.aa_mark(s, v.cell)
        t[4] = f"<span class='{_cls(v.comparison)}'>{t[4]}</span>"
        rows.append(t)
    return _table(list(tables.VERDICT_HEAD), rows, left=(0, 1, 4))


def _ranking(s: Summary) -> str:
    cols = tables.short_columns(s)
    cap = tables.has_capacity(s)
    head = ["#", "configuration", "runs", metric_title(cols[0]), "vs baseline"] + [metric_title(m) for m in cols[1:]]
    head += ["capacity search"] if cap else []
    rows = []
    for i, c in enumerate(s.ranked(), 1):
        cmp_ = c.vs_base.get(s.rank_metric)
        vs = (
            "baseline"
            if s.is_baseline(c.name)
            else f"<span class='{_cls(cmp_)}'>{h.escape(fmt.comparison(cmp_))}</span>"
        )
        vals = [h.escape(fmt.estimate(c.est[m], BY_NAME[m].unit)) for m in cols]
        row = [
            str(i),
            f"<code>{h.escape(c.name)}</code>" + (" (baseline)" if s.is_baseline(c.name) else ""),
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


def _intro(s: Summary) -> list[str]:
    """The page's head, title, what the run can tell apart, and how it was run."""
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
        f"server figures from {h.escape(meta.source)}. Judged against "
        f"{fmt.against(s, _code)}.</p>"
    )
    if meta.interrupted:
        parts.append("<p class='failed'><b>Interrupted</b>: the sweep was stopped; this is what was measured.</p>")
    return parts


def _verdict_section(s: Summary) -> list[str]:
    """A soak's runs, or the verdicts of each configuration against the baseline."""
    if soak.is_soak(s):
        return [_soak(s)]
    return [
        f"<h2>Verdicts: each configuration vs {fmt.against(s, _code)}</h2>",
        "<p class='note'>Ratio = configuration / baseline (geometric mean of the per-round ratios) with its 95% "
        "CI; <span class='better'>better</span> or <span class='worse'>worse</span> only when the Holm-adjusted "
        f"p is below {s.alpha:g} and the change exceeds the metric's noise floor; "
        "<span class='floor'>below the noise floor</span> when it is significant but smaller.</p>",
        _verdicts(s),
    ]


def _ranking_section(s: Summary) -> list[str]:
    return [
        f"<h2>{h.escape(tables.ranking_title(s))}</h2>",
        "<p class='note'>Geometric means across repeats with [95% t-interval] "
        f"(none with fewer than {stats.MIN_REPEATS} repeats); <i>vs baseline</i> repeats the verdict above.</p>",
        _ranking(s),
    ]


def _notes_section(s: Summary) -> list[str]:
    failed = [(c.name, f"r{r.repeat}: {failure.text(r)}", "failed") for c in s.cells for r in s.rows
              if r.cell == c.name and r.status == "failed"]
    notes = failed + [
        (c.name, w, "warning") for c in s.cells for w in c.warnings
    ]
    if not notes:
        return []
    return [
        "<h2>Failures and warnings</h2><ul>",
        *(
            f"<li class='{'failed' if k == 'failed' else ''}'><code>{h.escape(n)}</code> {k}: {h.escape(t)}</li>"
            for n, t, k in notes
        ),
        "</ul>",
    ]


def _setup_sections(s: Summary) -> list[str]:
    """What the servers ran in: containers and their limits, and the connection strategies."""
    parts = []
    if containers.has_containers(s):
        parts.append(f"<h2>{containers.TITLE}</h2><p class='note'>{h.escape(containers.NOTE)}</p>")
        parts.append(_table(list(containers.HEAD), [[h.escape(x) for x in r] for r in containers.rows(s)], left=(0,)))
    if conns.shown(s):
        parts.append(f"<h2>Connections</h2><p class='note'>{h.escape(conns.NOTE)}</p>")
        parts.append(_table(list(conns.HEAD), [[f"<code>{h.escape(r[0])}</code>", *map(h.escape, r[1:])]
                                               for r in conns.rows(s)], left=(0, 1)))
    return parts


def _hosts_section(s: Summary) -> list[str]:
    """Every host's own figures, below the header whose Placement line says where each ran."""
    if not hosts.shown(s):
        return []
    rows = [[f"<code>{h.escape(r[0])}</code>", *map(h.escape, r[1:])] for r in hosts.rows(s)]
    return [f"<h2>{hosts.TITLE}</h2><p class='note'>{h.escape(hosts.NOTE)}</p>", _table(list(hosts.HEAD), rows,
                                                                                      left=(0, 1, 2))]


def _chart_sections(s: Summary, run_dir: Path, first: bool) -> list[str]:
    """The bars and the series; `first`: no section above inlined plotly.js, so the first chart does."""
    colors = charts.colors(s)
    parts = []
    for title, note, fig in (
        (
            "Across repeats",
            "Bars: geometric mean, whiskers 95% t-interval, dots: repeats (the arithmetic mean where a value "
            "is zero or negative).",
            charts.bars(s, colors),
        ),
        (
            "Time series",
            "One panel per series, one line per configuration: the median over its successful repeats at each "
            "second since the load started, shaded from the minimum to the maximum; dotted: end of warm-up.",
            charts.series(s, run_dir, colors),
        ),
        (
            "Soak series",
            "What the soak's lines are computed from: RSS, descriptors and threads read from /proc every second, "
            "the live heap and goroutines from the server's metrics; dotted: end of warm-up, where growth starts.",
            charts.series(s, run_dir, colors, soak_series=True) if soak.is_soak(s) else None,
        ),
    ):
        if fig is None:
            continue
        parts.append(f"<h2>{h.escape(title)}</h2><p class='note'>{h.escape(note)}</p>")
        parts.append(fig.to_html(full_html=False, include_plotlyjs=first, config={"displaylogo": False}))
        first = False
    return parts


def render(s: Summary, run_dir: Path) -> str:
    parts = _intro(s) + _hosts_section(s) + _verdict_section(s) + _ranking_section(s) + _notes_section(s)
    parts += _setup_sections(s)
    profiled = cpu.html(s, include_plotlyjs=True)
    parts.append(profiled)
    matrix = stress.html(s, include_plotlyjs=not profiled)
    parts.append(matrix)
    parts += _chart_sections(s, run_dir, first=not profiled and not matrix)
    parts.append("</body></html>")
    return "\n".join(parts)


def write(s: Summary, run_dir: Path, path: Path) -> None:
    path.write_text(render(s, run_dir), encoding="utf-8")
