"""The metric and label names a PromQL expression uses, read the way Prometheus's grammar allows: string
literals, label matchers, grouping clauses, label_join/label_replace arguments. Enough for the expressions
of deploy/ (no Prometheus parser library is packaged for Python; promtool has no such command)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)")
_MATCHERS = re.compile(r"\{([^{}]*)\}")
_MATCHER_LABEL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
_RANGE = re.compile(r"\[[^\]]*\]")
_IDENT = re.compile(r"(?<![A-Za-z0-9_:.$])([A-Za-z_:][A-Za-z0-9_:]*)(?![A-Za-z0-9_:])(?!\s*\()")
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
                       "group_left", "group_right", "inf", "nan"})
_LABEL_FUNCS = {"label_join": 1, "label_replace": 1}  # arguments after the vector


@dataclass
class Names:
    metrics: set[str] = field(default_factory=set)
    labels: set[str] = field(default_factory=set)


def _call_args(expr: str, start: int) -> list[str]:
    """The top-level arguments of the call whose "(" is at expr[start]."""
    depth, args, cur, i = 0, [], "", start
    while i < len(expr):
        ch = expr[i]
        m = _STRING.match(expr, i)
        if m:
            cur += m[0]
            i = m.end()
            continue
        if ch == "(":
            depth += 1
            if depth == 1:
                i += 1
                continue
        elif ch == ")":
            depth -= 1
            if depth == 0:
                args.append(cur.strip())
                return args
        elif ch == "," and depth == 1:
            args.append(cur.strip())
            cur = ""
            i += 1
            continue
        cur += ch
        i += 1
    raise ValueError(f"unbalanced parentheses in {expr!r}")


def _label_function_labels(expr: str) -> set[str]:
    """label_join(v, dst, sep, src...) and label_replace(v, dst, replacement, src, regex) name labels in
    strings: the destination and the sources."""
    out = set()
    for fn in _LABEL_FUNCS:
        for m in re.finditer(rf"\b{fn}\s*\(", expr):
            args = [a.strip("\"'") for a in _call_args(expr, m.end() - 1)]
            if fn == "label_join":
                out |= {args[1], *args[3:]}
            else:
                out |= {args[1], args[3]}
    return out


def names(expr: str) -> Names:
    out = Names(labels=_label_function_labels(expr))
    bare = _STRING.sub('""', expr)
    for m in _GROUPING.finditer(bare):
        out.labels |= {x.strip() for x in m[1].split(",") if x.strip()}
    bare = _GROUPING.sub(" ", bare)
    for m in _MATCHERS.finditer(bare):
        out.labels |= set(_MATCHER_LABEL.findall(m[1]))
    bare = _RANGE.sub(" ", _MATCHERS.sub(" ", bare))
    out.metrics = {w for w in _IDENT.findall(bare) if w.lower() not in _KEYWORDS}
    return out
