"""summary.csv (every metric: median, CI, ratio to baseline, verdict) and summary.md (the readable table)."""

from __future__ import annotations

import csv
from pathlib import Path

from xferbench import stats
from xferbench.report import fmt
from xferbench.report.summary import Summary

# The columns of the short table (terminal and Markdown).
SHORT = (
    "client_qps",
    "client_bytes_per_s",
    "client_p95_s",
    "client_p99_s",
    "server_p95_s",
    "rss_peak_bytes",
    "gc_pause_total_s",
    "alloc_resident_bytes",
    "gen_cpu_cores",
)


def write_csv(s: Summary, path: Path) -> None:
    metrics = [m for m, *_ in stats.METRICS]
    head = ["cell", "server", "transport", "runs_ok", "runs_failed"]
    for m in metrics:
        head += [
            f"{m}_median",
            f"{m}_ci_lo",
            f"{m}_ci_hi",
            f"{m}_ratio",
            f"{m}_ratio_ci_lo",
            f"{m}_ratio_ci_hi",
            f"{m}_verdict",
        ]
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(head)
        for c in s.cells:
            line: list[object] = [c.name, c.server, c.transport, c.n_ok, c.n_failed]
            for m in metrics:
                e, cmp_ = c.est[m], c.vs_base.get(m)
                line += [_n(e.median), _n(e.lo), _n(e.hi)]
                if cmp_ is None:
                    line += ["", "", "", ""]
                else:
                    line += [_n(cmp_.ratio), _n(cmp_.lo), _n(cmp_.hi), cmp_.verdict]
            w.writerow(line)


def _n(v: float | None) -> object:
    return "" if v is None else f"{v:.6g}"


def short_columns(s: Summary) -> list[str]:
    present = set(s.present_metrics())
    return [m for m in SHORT if m in present]


def markdown(s: Summary) -> str:
    meta = s.meta
    cols = short_columns(s)
    out = [f"# {meta.get('experiment', '?')}", ""]
    if meta.get("description"):
        out += [meta["description"], ""]
    mach = meta.get("machine") or {}
    out += [
        f"- started {meta.get('started_at', '?')}, {meta.get('repeats', '?')} repeats, "
        f"{meta.get('warmup_s', '?')} s warm-up discarded, server figures by {meta.get('source', 'scrape')}",
        f"- machine: {mach.get('cpus', '?')} CPUs, {mach.get('platform', '?')}",
        f"- baseline: `{s.baseline}`; ratios are cell / baseline with a 95% bootstrap CI",
        "",
    ]
    if meta.get("interrupted"):
        out += ["**Interrupted**: the sweep was stopped; the table holds what was measured.", ""]
    out += ["Medians across repeats, [95% bootstrap CI] where there are at least 3 repeats.", ""]
    titles = [stats.METRIC_INFO[m][1] for m in cols]
    out.append("| cell | runs | " + " | ".join(titles) + " | QPS vs baseline | P95 vs baseline |")
    out.append("|" + "---|" * (len(cols) + 4))
    for c in s.ranked():
        runs = f"{c.n_ok}" + (f" ({c.n_failed} failed)" if c.n_failed else "")
        vals = [fmt.estimate(c.est[m], stats.METRIC_INFO[m][2]) for m in cols]
        q = fmt.comparison(c.vs_base.get("client_qps")) if c.name != s.baseline else "baseline"
        p = fmt.comparison(c.vs_base.get("client_p95_s")) if c.name != s.baseline else "baseline"
        out.append(f"| `{c.name}` | {runs} | " + " | ".join(vals) + f" | {q} | {p} |")
    out.append("")
    notes = []
    for c in s.cells:
        for e in c.errors:
            notes.append(f"- `{c.name}` failed {e}")
        for w in c.warnings:
            notes.append(f"- `{c.name}`: {w}")
    if notes:
        out += ["## Failures and warnings", "", *notes, ""]
    out += [
        "Verdicts: *better*/*worse* when the ratio's 95% CI excludes 1, *~ (n.s.)* otherwise; *(no CI)* with "
        "fewer than 3 repeats. With 3-5 repeats the bootstrap interval of a median is close to the sample's "
        "range, whose true coverage is only 75-94%.",
        "",
    ]
    return "\n".join(out)
