"""Terminal progress with rich: runs done of total, time left, the current cell's live QPS and P95, and a
final table. Without a terminal (CI, pipes) it prints one plain line per finished run instead."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from xferbench.analysis import failure, stats
from xferbench.analysis.metrics import BY_NAME
from xferbench.analysis.row import RunRow
from xferbench.analysis.summary import Summary
from xferbench.config import Experiment
from xferbench.report import fmt, soak, stress, tables
from xferbench.run.matrix import Run
from xferbench.run.progress_protocol import NullProgress


class RichProgress(NullProgress):
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.interactive = self.console.is_terminal
        self._live: Live | None = None
        self.bar = Progress(
            TextColumn("[bold]runs"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("left ≈ {task.fields[left]}"),
            console=self.console,
        )
        self.status = Text("")
        self.task: TaskID | None = None
        self.remaining_s = 0.0
        self.started = 0.0
        self.done = 0
        self.est_per_run: dict[int, float] = {}
        self.warmup_s = 0.0
        self.runs: list[Run] = []

    def start_sweep(self, exp: Experiment, runs: list[Run], run_dir: Path) -> None:
        self.runs = runs
        self.warmup_s = exp.warmup_s
        self.est_per_run = {r.order: self._estimate(r) for r in runs}
        self.started = time.monotonic()
        self.console.print(
            f"[bold]xferbench[/] {exp.name}: {len(exp.cells)} cells x {exp.repeats} repeats = {len(runs)} runs → {run_dir}"
        )
        self.console.print(f"pinning: {exp.pinning.describe()}", highlight=False)
        self.task = self.bar.add_task("runs", total=len(runs), left=self._left())
        if self.interactive:
            self._live = Live(Group(self.bar, self.status), console=self.console, refresh_per_second=4, transient=False)
            self._live.start()

    def add_runs(self, runs: list[Run]) -> None:
        """Another round (--until-ci): the bar's total grows."""
        self.runs += runs
        self.est_per_run.update({r.order: self._estimate(r) for r in runs})
        if self.task is not None:
            self.bar.update(self.task, total=len(self.runs), left=self._left())

    def _estimate(self, run: Run) -> float:
        return self.warmup_s + run.cell.load.duration_s + 2.5

    def _left(self, in_run_s: float = 0.0) -> str:
        if self.done:
            per = (time.monotonic() - self.started - in_run_s) / self.done
            left = per * (len(self.runs) - self.done) - in_run_s
        else:
            left = sum(self.est_per_run.values()) - in_run_s
        left = max(left, 0.0)
        m, s = divmod(int(left), 60)
        return f"{m}m{s:02d}s"

    def start_run(self, run: Run) -> None:
        self.status = Text(f"▶ {run.cell.name} (repeat {run.repeat}) starting")
        self._refresh()

    def phase(self, run: Run, text: str) -> None:
        self.status = Text(f"▶ {run.cell.name} (repeat {run.repeat}) {text}")
        self._refresh()

    def live(self, run: Run, elapsed: float, total: float, qps: float | None, p95: float | None) -> None:
        if self.task is not None:
            self.bar.update(self.task, left=self._left(elapsed))
        self.status = Text(
            f"▶ {run.cell.name} (repeat {run.repeat}) {elapsed:4.0f}/{total:.0f}s   "
            f"{_figure('client_qps', qps)}   {_figure('client_p95_s', p95)}"
        )
        self._refresh()

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(Group(self.bar, self.status))

    def end_run(self, run: Run, row: RunRow) -> None:
        self.done += 1
        if self.task is not None:
            self.bar.update(self.task, advance=1, left=self._left())
        if row.ok:
            msg = (
                f"{run.cell.name} r{run.repeat}: {_figure('client_qps', row.client_qps)}, "
                f"{_figure('client_p95_s', row.client_p95_s)}, "
                f"{_figure('rss_peak_bytes', row.rss_peak_bytes)}"
            )
            if row.soak_verdict:
                msg += f"\n    soak: {soak.text(row)}: {row.soak_verdict} {'; '.join(row.soak_flags or [])}"
            style = "green"
        else:
            msg = f"{run.cell.name} r{run.repeat}: {row.status.upper()}: {failure.text(row)}"
            style = "red"
        for w in row.warnings:
            msg += f"\n    ⚠ {w}"
        self.console.print(
            f"[{style}]{'✓' if row.ok else '✗'}[/] {msg}"
            if self.interactive
            else f"[{self.done}/{len(self.runs)}] {msg}",
            highlight=False,
        )
        self._refresh()

    def end_sweep(self) -> None:
        if self._live is not None:
            self.status = Text("")
            self._live.update(Group(self.bar))
            self._live.stop()
            self._live = None


def _figure(metric: str, value: float | None) -> str:
    """"QPS 1,250": a figure by its short label, in its unit."""
    m = BY_NAME[metric]
    return f"{m.label} {fmt.value(value, m.unit)}"


def final_table(s: Summary) -> Group:
    """The terminal report: the header lines, the verdict table, then the ranking (summary.md has the CIs)."""
    parts: list[Text | Table] = [Text(s.meta.experiment, style="bold")]
    for label, text in tables.header(s):
        if label != "Method":  # summary.md and report.html carry the method
            parts.append(Text.assemble((f"{label}: ", "bold"), text))
    if s.table:
        # escaped: "[[servers]]" would read as rich's markup
        v = Table(title=escape(f"verdicts: each configuration vs {fmt.against(s)}"), show_lines=False)
        for i, col in enumerate(tables.VERDICT_HEAD):
            v.add_column(col, justify="left" if i in (0, 1, 4) else "right", no_wrap=i == 0)
        for verdict in s.table:
            row = tables.verdict_row(s, verdict)
            style = VERDICT_STYLE.get(verdict.comparison.verdict, "dim")
            v.add_row(*row[:4], f"[{style}]{row[4]}[/]", *row[5:])
        parts.append(v)
    cols = tables.short_columns(s)
    t = Table(
        title=soak.FIGURES_TITLE if soak.is_soak(s)
        else f"ranked by {BY_NAME[s.rank_metric].title}: geometric means across repeats (CIs in summary.md)",
        show_lines=False,
    )
    t.add_column("cell", style="bold", no_wrap=True)
    t.add_column("runs", justify="right")
    t.add_column(tables.column_title(cols[0], short=True), justify="right")
    t.add_column("vs base", justify="right")
    for m in cols[1:]:
        t.add_column(tables.column_title(m, short=True), justify="right")
    for c in s.ranked():
        runs = str(c.n_ok) + (f" [red]+{c.n_failed}✗[/]" if c.n_failed else "")
        vals = [fmt.estimate(c.est[m], BY_NAME[m].unit, with_ci=False) for m in cols]
        cmp_ = "baseline" if s.is_baseline(c.name) else fmt.comparison(c.vs_base.get(s.rank_metric))
        t.add_row(c.name, runs, vals[0], cmp_, *vals[1:])
    parts.append(t)
    parts += failure_lines(s)
    parts += soak_lines(s)
    parts += stress_table(s)
    return Group(*parts)


def stress_table(s: Summary) -> list[Table]:
    """A stepped run's matrix: one line per file size and user level (report/stress.py)."""
    pts = stress.points(s)
    if not pts:
        return []
    t = Table(title="stress matrix: median over repeats of each level's window", show_lines=False)
    for i, col in enumerate(stress.HEAD):
        t.add_column(col, justify="left" if i in (0, len(stress.HEAD) - 1) else "right")
    for p in pts:
        row = stress.cells(p)
        if p.saturated or not p.runs:
            row[-1] = f"[red]{row[-1]}[/]"
        t.add_row(*row)
    return [t]


def failure_lines(s: Summary) -> list[Text]:
    """Under the table, why runs failed: one line per cell and reason (the first run's text: errors differ in
    ports and pids), with the rounds it ended."""
    seen: dict[tuple[str, str], tuple[str, list[str]]] = {}
    for r in s.rows:
        if r.status == "failed":
            key = (r.cell, failure.reason(r.error or "", r.stderr_tail or []) or r.error or "")
            seen.setdefault(key, (failure.text(r), []))[1].append(f"r{r.repeat}")
    return [
        Text.assemble(("failed ", "bold red"), (cell, "bold"), f" {', '.join(rounds)}: {text}")
        for (cell, _), (text, rounds) in seen.items()
    ]


def soak_lines(s: Summary) -> list[Text]:
    """A soak's line per run under the table: "LEAK?" in red with its reasons."""
    out = []
    for ln in soak.lines(s):
        verdict = (f"{ln.verdict} ({ln.why})", "bold red") if soak.flagged(ln) else (ln.verdict, "green")
        out.append(Text.assemble(("soak ", "bold"), (ln.run, "bold"), f": {ln.text}: ", verdict))
    return out


VERDICT_STYLE = {stats.BETTER: "green", stats.WORSE: "red"}
