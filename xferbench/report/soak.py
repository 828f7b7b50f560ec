"""The soak's lines in every report: one per run, "RSS +x.x% (warm-up → end), live heap +y.y%, fds a→b,
goroutines c→d: ok | LEAK? (why)", and the header that says a soak ranks nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xferbench.report.summary import Summary
from xferbench.soak import LEAK

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
    return bool(s.meta.get("soak"))


def goal_text(s: Summary) -> str:
    g = s.meta.get("soak") or {}
    return (
        f"{NO_RANKING}: RSS and live heap grow at most {g.get('growth_max', 0.05) * 100:g}% from the end of the "
        f"warm-up ({s.meta.get('warmup_s', '?')} s) to the end of the load (Theil-Sen line, docs/DESIGN.md), and "
        f"descriptors and goroutines (xferd-go) or threads (xferd-c) return to their idle count "
        f"± {g.get('held_slack', 2)} after it; \"LEAK?\" marks a run over the goal"
    )


def lines(s: Summary) -> list[Line]:
    """One line per run that has soak figures, in the experiment's cell order."""
    repeats = {r["cell"] for r in s.rows if r.get("repeat", 1) > 1}
    order = {c.name: i for i, c in enumerate(s.cells)}
    rows = sorted((r for r in s.rows if r.get("soak_verdict")), key=lambda r: (order.get(r["cell"], 0), r.get("repeat", 0)))
    return [
        Line(
            r["cell"] + (f" r{r['repeat']}" if r["cell"] in repeats else ""),
            text(r),
            r["soak_verdict"],
            "; ".join(r.get("soak_flags") or []),
        )
        for r in rows
    ]


def text(r: dict[str, Any]) -> str:
    """"RSS +1.2% (120 s → 600 s), live heap -0.4%, fds 10→10, goroutines 11→11"."""
    start = r.get("soak_from_s")
    end = start + r["soak_window_s"] if start is not None and r.get("soak_window_s") is not None else None
    span = f" ({start:.0f} s → {end:.0f} s)" if end is not None else ""
    go = r.get("soak_goroutines_start") is not None
    kind = "goroutines" if go else "threads"
    return (
        f"RSS {pct(r.get('soak_rss_growth'))}{span}, live heap {pct(r.get('soak_heap_growth'))}, "
        f"fds {arrow(r, 'fds')}, {kind} {arrow(r, kind)}"
    )


def pct(g: float | None) -> str:
    return "n/a" if g is None else f"{g * 100:+.1f}%"


def arrow(r: dict[str, Any], kind: str) -> str:
    a, b = r.get(f"soak_{kind}_start"), r.get(f"soak_{kind}_end")
    return f"{'?' if a is None else a}→{'?' if b is None else b}"


def flagged(line: Line) -> bool:
    return line.verdict == LEAK
