"""summary.csv (every metric: geometric mean, CI, ratio to baseline, verdict, which a diagnostic never gets;
p and noise floor for the ranked metrics) and summary.md (the readable report); the header, verdict and ranking rows
that the terminal and HTML reports share."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

from xferbench.analysis import failure, stats
from xferbench.analysis.metrics import BY_NAME, METRICS, RANKED
from xferbench.analysis.runmeta import Machine, RunMeta
from xferbench.analysis.summary import CellSummary, Summary, Verdict, request_units
from xferbench.report import conns, containers, cpu, fmt, hosts, soak, stress

# The statistical method (xferbench/analysis/stats.py) in one sentence, for the top of every report.
METHOD = (
    "Each figure is the geometric mean across repeats with a Student-t 95% interval on the log values; each "
    "configuration is compared with the baseline run it was paired with (the same duet, or the same round), so "
    "the ratio is the geometric mean of the paired ratios, tested with a paired t-test on their logs; p-values "
    "are Holm-adjusted over the whole verdict table, and a change smaller than its metric's noise floor is never "
    "called better or worse."
)

NO_VERDICTS = "no comparisons: the run has one configuration, or no cell measured a metric that gets verdicts"

VERDICT_HEAD = ("configuration", "metric", "ratio (cell / baseline)", "95% CI", "verdict", "noise floor", "p (Holm)")


def title(metric: str) -> str:
    return BY_NAME[metric].title


def column_title(metric: str, short: bool = False) -> str:
    """A column of a metric's values: its title (or short label), with the unit where the values print
    none ("generator CPU (cores)")."""
    m = BY_NAME[metric]
    name = m.label if short else m.title
    return f"{name} ({m.unit})" if m.unit in fmt.BARE_UNITS else name


def pinning_text(meta: RunMeta) -> str:
    return (meta.pinning and meta.pinning.text) or "not pinned"


def n_tested(s: Summary) -> int:
    """The size of the Holm family: the verdicts with a p-value."""
    return sum(1 for v in s.verdicts if v.comparison.p is not None)


def aa_text(s: Summary) -> str | None:
    """What the A/A check (a second copy of the baseline configuration) says, or None without one."""
    name = s.meta.aa_cell
    if not name:
        return None
    if s.aa_cell is None:
        return f"{name} vs baseline {s.baseline}: no results for {name}"
    mine = [v for v in s.verdicts if v.cell == name]
    head = f"{name} vs baseline {s.baseline} (the same configuration)"
    with_ci = [v for v in mine if v.comparison.p is not None]
    if not with_ci:
        return f"{head}: no verdict (every metric needs at least {stats.MIN_REPEATS} repeats on both sides)"
    called = [v for v in with_ci if v.comparison.verdict in (stats.BETTER, stats.WORSE)]
    if called:
        listed = "; ".join(f"{title(v.metric)} {fmt.ratio(v.comparison)} {v.comparison.verdict}" for v in called)
        return (
            f"{head}: {listed}. Identical configurations were called different: this machine's noise is "
            "larger than the repeats show, so distrust this run's verdicts"
        )
    below = sum(1 for v in with_ci if v.comparison.verdict == stats.BELOW_FLOOR)
    big = max(with_ci, key=lambda v: abs((v.comparison.ratio or 1.0) - 1.0))
    out = f"{head}: no significant difference in any of {len(with_ci)} metrics"
    if below:
        out += f" ({below} significant but below the noise floor)"
    pct = ((big.comparison.ratio or 1.0) - 1) * 100
    out += f"; largest apparent difference {pct:+.1f}% in {title(big.metric)}"
    if len(mine) > len(with_ci):
        out += f"; {len(mine) - len(with_ci)} metrics without a CI"
    return out


def header(s: Summary) -> list[tuple[str, str]]:
    """(label, plain text) lines for the top of every report, right after the title."""
    if soak.is_soak(s):
        placed = [("Placement", s.meta.placement.text or s.meta.placement.describe())] if s.meta.placement else []
        return [("Soak", soak.goal_text(s)), ("Pinning", pinning_text(s.meta)), *placed]
    rank = title(s.rank_metric)
    if s.rank_metric not in s.present_metrics():
        rank += " (not measured by any cell: the table keeps the experiment's order)"
    lines = [
        ("Noise floor", s.floor_text()),
        ("Pinning", pinning_text(s.meta)),
        ("Ranked by", f"{rank}: {s.rank_reason}" if s.rank_reason else rank),
    ]
    network = s.meta.network
    if network:
        lines.append(("Network", str(network.text)))
    placement = s.meta.placement
    if placement:
        lines.append(("Placement", placement.text or placement.describe()))
    aa = aa_text(s)
    if aa is not None:
        lines.append(("A/A", aa))
    until = s.meta.until_ci
    if until:
        widest = until.widest
        lines.append((
            "Until CI",
            f"target ±{until.target * 100:g}% on {title(until.metric)}: "
            + ("met" if until.met else "not met")
            + f" after {until.rounds} rounds ({until.why})"
            + (f"; widest interval ±{widest * 100:.1f}%" if widest is not None else "")
            + (f"; about {until.more} more round{'s' * (until.more != 1)} would likely reach the target"
               if until.more else ""),
        ))
    n = n_tested(s)
    n_cells = len({v.cell for v in s.verdicts})
    n_metrics = len({v.metric for v in s.verdicts})
    verdicts = (
        f"alpha = {s.alpha:g}: better/worse only where the Holm-adjusted p < alpha, Holm's adjustment running over "
        f"{n} comparisons ({n_cells} configurations x {n_metrics} metrics against {fmt.against(s)})"
    )
    if not s.verdicts:
        verdicts = f"alpha = {s.alpha:g}; {NO_VERDICTS}"
    elif len(s.verdicts) > n:
        k = len(s.verdicts) - n
        verdicts += f"; {k} without an interval (no data, too few repeats) {'is' if k == 1 else 'are'} listed, untested"
    if s.others:
        kinds = {v.comparison.verdict for v in s.others}
        which = ["figures compared on their own interval (unadjusted, listed where it excludes 1)"]
        if stats.HELD in kinds:
            which.append("figures the fixed offered load holds fixed (never judged)")
        if stats.UNLIKE in kinds:
            which.append(f"figures per request as each server counts them, which these cells count differently "
                         f"({'; '.join(sorted(request_units(s.meta)))}: never judged)")
        verdicts += f"; after them, {len(s.others)} outside the family: " + ", ".join(which)
    lines.append(("Verdicts", verdicts))
    cost = cost_text(s)
    if cost:
        lines.insert(3, ("Server CPU", cost))
    lines.append(("Method", METHOD))
    return lines


def cost_text(s: Summary) -> str | None:
    """How the runs measured the server's CPU: by which clock, over whose count of requests."""
    ok = [r for r in s.rows if r.ok]
    clocks = sorted({r.cpu_clock for r in ok if r.cpu_clock})
    if not clocks:
        return None
    by: dict[str, list[str]] = {}
    for r in ok:
        if r.cpu_requests_from:
            cells = by.setdefault(r.cpu_requests_from, [])
            if r.cell not in cells:
                cells.append(r.cell)
    counts = {"server": "the server's own count", "client": "the client's count of operations"}
    per = "; ".join(f"{counts[k]} ({', '.join(v)})" if len(by) > 1 else counts[k] for k, v in sorted(by.items()))
    return (f"the server's whole process tree by {' and '.join(clocks)}"
            + (f"; CPU per request divides by {per}" if per else ""))


def ranking_title(s: Summary) -> str:
    return soak.FIGURES_TITLE if soak.is_soak(s) else f"Ranking by {title(s.rank_metric)}"


def soak_markdown(s: Summary) -> list[str]:
    """The soak section: one line per run, "LEAK?" in bold with its reasons."""
    out = ["## Soak", ""]
    for ln in soak.lines(s):
        verdict = f"**{ln.verdict}** ({ln.why})" if soak.flagged(ln) else ln.verdict
        out.append(f"- `{ln.run}`: {ln.text}: {verdict}")
    return out if len(out) > 2 else [*out, "No run finished with soak figures."]


def verdict_row(s: Summary, v: Verdict) -> list[str]:
    """One row of the verdict table, as plain text (VERDICT_HEAD)."""
    c = v.comparison
    f = c.floor if c.floor is not None else s.floors.get(v.metric) if c.ratio is not None else None
    cell = v.cell + aa_mark(s, v.cell)
    if not v.holm:  # a compared figure's own interval, unadjusted, or a figure the load held fixed
        return [cell, title(v.metric), fmt.ratio(c), fmt.ratio_ci(c), c.verdict, "-",
                "-" if c.p is None else f"{fmt.pvalue(c.p)} (unadjusted)"]
    return [cell, title(v.metric), fmt.ratio(c), fmt.ratio_ci(c), c.verdict, fmt.floor(f), fmt.pvalue(c.p)]


def aa_mark(s: Summary, cell: str) -> str:
    """" (A/A)" after the A/A cell's name, unless its name says so already."""
    return " (A/A)" if cell == s.aa_cell and "A/A" not in cell else ""


def short_columns(s: Summary) -> list[str]:
    """The ranking metric first, then the other metrics with a column (xferbench/analysis/metrics.py) that some cell
    measured."""
    shown = set(s.shown_metrics())
    return [s.rank_metric] + [m.name for m in METRICS if m.column and m.name in shown and m.name != s.rank_metric]


def capacity_text(s: Summary, c: CellSummary) -> str:
    """How the capacity searches of one cell ended ("found x3", "generator-bound x1, found x2")."""
    n = Counter(r.capacity_status for r in s.rows if r.cell == c.name and r.capacity_status)
    return ", ".join(f"{k} x{v}" for k, v in n.items()) or "-"


def has_capacity(s: Summary) -> bool:
    return any(r.capacity_status for r in s.rows)


def write_csv(s: Summary, path: Path) -> None:
    metrics = [m.name for m in METRICS]
    head = ["cell", "server", "transport", "runs_ok", "runs_failed"]
    for m in metrics:
        head += [
            f"{m}_center",
            f"{m}_ci_lo",
            f"{m}_ci_hi",
            f"{m}_ratio",
            f"{m}_ratio_ci_lo",
            f"{m}_ratio_ci_hi",
            f"{m}_verdict",
        ]
        if m in RANKED:
            head += [f"{m}_p", f"{m}_floor"]
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(head)
        for c in s.cells:
            line: list[object] = [c.name, c.server, c.transport, c.n_ok, c.n_failed]
            for m in metrics:
                e, cmp_ = c.est[m], c.vs_base.get(m)
                line += [_n(e.center), _n(e.lo), _n(e.hi)]
                if cmp_ is None:
                    line += ["", "", "", ""]
                else:
                    line += [_n(cmp_.ratio), _n(cmp_.lo), _n(cmp_.hi), cmp_.verdict]
                if m in RANKED:
                    p = cmp_.p if cmp_ is not None and not s.is_baseline(c.name) else None
                    line += [_n(p), _n(s.floors.get(m))]
            w.writerow(line)


def _n(v: float | None) -> object:
    return "" if v is None else f"{v:.6g}"


def unknown(v: object) -> str:
    """A recorded value, or "?" where an older run did not record it."""
    return "?" if v is None else str(v)


def _code(name: str) -> str:
    return f"`{name}`"


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def _md_intro(s: Summary) -> list[str]:
    """The title, what the run can tell apart, and how it was run."""
    meta = s.meta
    out = [f"# {meta.experiment or '?'}", ""]
    if meta.description:
        out += [meta.description, ""]
    out += [f"- **{label}**: {text}" for label, text in header(s)]
    out.append("")
    mach = meta.machine or Machine()
    out += [
        f"Started {unknown(meta.started_at)}, {unknown(meta.repeats)} repeats interleaved, "
        f"{unknown(meta.warmup_s)} s warm-up discarded, server figures by {meta.source}; "
        f"machine: {unknown(mach.cpus)} CPUs, {unknown(mach.platform)}; judged against {fmt.against(s, _code)}.",
        "",
    ]
    if meta.interrupted:
        out += ["**Interrupted**: the sweep was stopped; the tables hold what was measured.", ""]
    return out


def _md_verdicts(s: Summary) -> list[str]:
    """A soak's runs, or the verdict table of each configuration against the baseline."""
    if soak.is_soak(s):
        out = soak_markdown(s)
    else:
        out = [f"## Verdicts: each configuration vs {fmt.against(s, _code)}", ""]
    if s.table:  # never in a soak
        out.append("| " + " | ".join(VERDICT_HEAD) + " |")
        out.append("|---|---|" + "---:|" * 2 + "---|" + "---:|" * 2)
        for v in s.table:
            row = verdict_row(s, v)
            row[0] = f"`{v.cell}`" + aa_mark(s, v.cell)
            if v.comparison.verdict in (stats.BETTER, stats.WORSE):
                row[4] = f"**{row[4]}**"
            out.append("| " + " | ".join(_md(x) for x in row) + " |")
    elif not soak.is_soak(s):
        out.append(NO_VERDICTS.capitalize() + ".")
    out.append("")
    return out


def _md_ranking(s: Summary) -> list[str]:
    cols = short_columns(s)
    out = [
        f"## {ranking_title(s)}",
        "",
        "Geometric means across repeats, [95% t-interval] where there are at least "
        f"{stats.MIN_REPEATS} repeats; *vs baseline* repeats the ratio, CI and verdict of the table above.",
        "",
    ]
    cap = has_capacity(s)
    titles = [column_title(m) for m in cols]
    head = ["#", "configuration", "runs", titles[0], "vs baseline", *titles[1:]] + (["capacity search"] if cap else [])
    out.append("| " + " | ".join(head) + " |")
    out.append("|---|---|---|" + "---:|" * (len(cols) + 1) + ("---|" if cap else ""))
    for i, c in enumerate(s.ranked(), 1):
        runs = f"{c.n_ok}" + (f" ({c.n_failed} failed)" if c.n_failed else "")
        vals = [fmt.estimate(c.est[m], BY_NAME[m].unit) for m in cols]
        vs = "baseline" if s.is_baseline(c.name) else fmt.comparison(c.vs_base.get(s.rank_metric))
        row = [str(i), f"`{c.name}`", runs, vals[0], vs, *vals[1:]] + ([capacity_text(s, c)] if cap else [])
        out.append("| " + " | ".join(row) + " |")
    out.append("")
    return out


def _md_notes(s: Summary) -> list[str]:
    notes = []
    for c in s.cells:
        for r in s.rows:
            if r.cell == c.name and r.status == "failed":
                notes.append(f"- `{c.name}` failed r{r.repeat}: {failure.text(r)}")
        for w in c.warnings:
            notes.append(f"- `{c.name}`: {w}")
    return ["## Failures and warnings", "", *notes, ""] if notes else []


def markdown(s: Summary) -> str:
    out = _md_intro(s) + hosts.markdown(s) + _md_verdicts(s) + _md_ranking(s) + _md_notes(s)
    out += containers.markdown(s)
    out += conns.markdown(s)
    out += cpu.markdown(s)
    out += stress.markdown(s)
    return "\n".join(out)
