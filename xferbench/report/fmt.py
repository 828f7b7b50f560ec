"""Human formatting of figures (units, CIs), shared by the terminal, Markdown and HTML."""

from __future__ import annotations

from xferbench import stats


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
    if e is None or e.median is None:
        return "-"
    s = value(e.median, unit)
    if with_ci and e.has_ci:
        s += f" [{value(e.lo, unit)} - {value(e.hi, unit)}]"
    return s


def comparison(c: stats.Comparison | None) -> str:
    if c is None or c.ratio is None:
        return "-" if c is None else c.verdict
    s = f"{c.ratio:.2f}x"
    if c.lo is not None:
        s += f" [{c.lo:.2f}, {c.hi:.2f}]"
    short = {stats.BETTER: "better", stats.WORSE: "worse", stats.SAME: "~ (n.s.)", stats.NO_CI: "(no CI)"}
    return f"{s} {short.get(c.verdict, c.verdict)}"
