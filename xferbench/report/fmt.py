"""Human formatting of figures (units, CIs), shared by the terminal, Markdown and HTML."""

from __future__ import annotations

from collections.abc import Callable

from xferbench.analysis import stats
from xferbench.analysis.summary import Summary

# Units whose values print as bare numbers ("0.84", "1,250"): a column of them names its unit in its header.
BARE_UNITS = ("cores", "req/s")


def against(s: Summary, quote: Callable[[str], str] = str) -> str:
    """What each configuration was judged against: "the baseline X", or "its [[servers]] table's baseline (X, Y)"."""
    if len(s.baselines) == 1:
        return f"the baseline {quote(s.baseline)}"
    return "its [[servers]] table's baseline (" + ", ".join(quote(b) for b in s.baselines) + ")"


def value(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "s":
        if abs(v) < 1e-3:
            return f"{v * 1e6:.0f} µs"
        if abs(v) < 1:
            return f"{v * 1e3:.2f} ms"
        return f"{v:.2f} s"
    if unit in ("B", "B/s"):
        suffix = "/s" if unit == "B/s" else ""
        for div, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if abs(v) >= div:
                return f"{v / div:.1f} {name}{suffix}"
        return f"{v:.0f} B{suffix}"
    if unit == "req/s":
        return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"
    if unit == "cores":
        return f"{v:.2f}"
    if unit == "":
        return f"{v:.3g}" if isinstance(v, float) and not v.is_integer() else f"{v:,.0f}"
    return f"{v:.3g}"


def estimate(e: stats.Estimate | None, unit: str, with_ci: bool = True) -> str:
    """The geometric mean across repeats, with its 95% t-interval when there is one; "≤ bound" for a quantile
    its histogram could not resolve."""
    if e is not None and e.center is None and e.bound is not None:
        return f"≤ {value(e.bound, unit)}"
    if e is None or e.center is None:
        return "-"
    s = value(e.center, unit)
    if with_ci and e.has_ci:
        s += f" [{value(e.lo, unit)} - {value(e.hi, unit)}]"
    return s


SHORT_VERDICT = {
    stats.BETTER: "better",
    stats.WORSE: "worse",
    stats.SAME: "~ (n.s.)",
    stats.BELOW_FLOOR: "~ (< floor)",
    stats.NO_CI: "(no CI)",
    stats.NOT_POSITIVE: "(no CI, values <= 0)",
}


def comparison(c: stats.Comparison | None) -> str:
    """"1.15x [1.08, 1.22] better": the ratio to the baseline, its 95% CI and the (short) verdict."""
    if c is None or c.ratio is None:
        return "-" if c is None else c.verdict
    s = f"{c.ratio:.2f}x"
    if c.lo is not None:
        s += f" [{c.lo:.2f}, {c.hi:.2f}]"
    return f"{s} {SHORT_VERDICT.get(c.verdict, c.verdict)}"


def ratio(c: stats.Comparison | None) -> str:
    """"1.153x (+15.3%)"."""
    if c is None or c.ratio is None:
        return "-"
    return f"{c.ratio:.3f}x ({(c.ratio - 1) * 100:+.1f}%)"


def ratio_ci(c: stats.Comparison | None) -> str:
    if c is None or c.lo is None or c.hi is None:
        return "-"
    return f"[{c.lo:.3f}, {c.hi:.3f}]"


def floor(f: float | None) -> str:
    """A noise floor as a fraction (0.032) → "±3.2%"."""
    return "-" if f is None else f"±{f * 100:.1f}%"


def pvalue(p: float | None) -> str:
    if p is None:
        return "-"
    if p < 1e-4:
        return "<0.0001"
    return f"{p:.4f}" if p < 0.01 else f"{p:.3f}"
