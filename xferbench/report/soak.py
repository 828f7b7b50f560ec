"""The soak's lines in every report: one per run, "RSS +x.x% (warm-up → end), live heap +y.y%, fds a→b,
goroutines c→d: ok | LEAK? (why)", and the header that says a soak ranks nothing."""

from __future__ import annotations

from dataclasses import dataclass

from xferbench.analysis.row import RunRow
from xferbench.analysis.runmeta import SoakGoal
from xferbench.analysis.summary import Summary
from xferbench.measure.soak import LEAK

NO_RANKING = (
    "no ranking and no verdicts between configurations; each run is judged alone against the goal"
)
FIGURES_TITLE = "Figures (soak: no ranking; the experiment's order)"


@dataclass(frozen=True)
class Line:
    run: str  # the cell, with its repeat when there are several
    text: str
    verdict: str  # ok | LEAK? | n/a
    why: str


def is_soak(s: Summary) -> bool:
    return s.meta.soak is not None


def goal_text(s: Summary) -> str:
    g = s.meta.soak or SoakGoal()
    return (
        f"{NO_RANKING}: RSS and live heap grow at most {g.growth_max * 100:g}% over the last third of "
        f"the measured window, at least 30 s of it (Theil-Sen line, docs/DESIGN.md), and "
        f"descriptors and goroutines (xferd-go) or threads (xferd-c) return to their idle count "
        f"± {g.held_slack} after it; \"LEAK?\" marks a run over the goal"
    )


def lines(s: Summary) -> list[Line]:
    """One line per run that has soak figures, in the experiment's cell order."""
    repeats = {r.cell for r in s.rows if r.repeat > 1}
    order = {c.name: i for i, c in enumerate(s.cells)}
    rows = sorted((r for r in s.rows if r.soak_verdict), key=lambda r: (order.get(r.cell, 0), r.repeat))
    return [
        Line(
            r.cell + (f" r{r.repeat}" if r.cell in repeats else ""),
            text(r),
            r.soak_verdict or "",
            "; ".join(r.soak_flags or []),
        )
        for r in rows
    ]


def text(r: RunRow) -> str:
    """"RSS +1.2% (120 s → 600 s), live heap -0.4%, fds 10→10, goroutines 11→11"."""
    start = r.soak_from_s
    end = start + r.soak_window_s if start is not None and r.soak_window_s is not None else None
    span = f" ({start:.0f} s → {end:.0f} s)" if end is not None else ""
    if r.soak_goroutines_start is not None:
        held = f"goroutines {arrow(r.soak_goroutines_start, r.soak_goroutines_end)}"
    else:
        held = f"threads {arrow(r.soak_threads_start, r.soak_threads_end)}"
    return (
        f"RSS {pct(r.soak_rss_growth)}{span}, live heap {pct(r.soak_heap_growth)}, "
        f"fds {arrow(r.soak_fds_start, r.soak_fds_end)}, {held}"
    )


def pct(g: float | None) -> str:
    return "n/a" if g is None else f"{g * 100:+.1f}%"


def arrow(a: int | None, b: int | None) -> str:
    return f"{'?' if a is None else a}→{'?' if b is None else b}"


def flagged(line: Line) -> bool:
    return line.verdict == LEAK
