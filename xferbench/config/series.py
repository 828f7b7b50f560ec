"""A server's own request series, named in PromQL's simple selector grammar: which counter counts its requests,
which of those are errors, which histogram times them. Ours (xferd-go, xferd-c) are the default; a command
server maps its own in [servers.requests] (xferbench/config/command.py), e.g. etcd's

    counter = 'grpc_server_handled_total{grpc_type="unary"}'
    errors = 'grpc_code!="OK"'
    latency = 'grpc_server_handling_seconds{grpc_type="unary"}'

A selector is `name` or `name{label="value", ...}` with PromQL's four matchers (=, !=, =~, !~; a regular
expression matches the whole value, and a label a series lacks is the empty string, as in PromQL).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*')
KEYS = ("counter", "errors", "latency")


class SelectorError(ValueError):
    """Text that is not a selector of the simple grammar; the message says what was expected."""


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str  # =, !=, =~ or !~
    value: str

    def __call__(self, labels: Mapping[str, str]) -> bool:
        have = labels.get(self.label, "")
        if self.op in ("=", "!="):
            return (have == self.value) == (self.op == "=")
        return (re.fullmatch(self.value, have) is not None) == (self.op == "=~")

    def __str__(self) -> str:
        return f'{self.label}{self.op}"{self.value}"'


@dataclass(frozen=True)
class Selector:
    """A metric name and the label tests its series must pass (all of them); usable as a scrape.LabelTest."""

    name: str
    matchers: tuple[Matcher, ...] = ()

    def __call__(self, labels: Mapping[str, str]) -> bool:
        return all(m(labels) for m in self.matchers)

    def __str__(self) -> str:
        return self.name + ("{" + ",".join(map(str, self.matchers)) + "}" if self.matchers else "")


def matchers(text: str) -> tuple[Matcher, ...]:
    """`a="b",c!="d"` (the inside of a selector's braces) as its matchers; SelectorError when it is not that."""
    out, pos = [], 0
    while pos < len(text):
        m = _MATCHER.match(text, pos)
        if m is None:
            raise SelectorError(f'expected label="value" (or !=, =~, !~) at {text[pos:]!r}')
        label, op, raw = m.groups()
        value = re.sub(r"\\(.)", r"\1", raw)
        if "~" in op:
            try:
                re.compile(value)
            except re.error as e:
                raise SelectorError(f"{label}{op}: not a regular expression: {e}") from None
        out.append(Matcher(label, op, value))
        pos = m.end()
        if pos < len(text):
            if text[pos] != ",":
                raise SelectorError(f"expected a comma between label tests at {text[pos:]!r}")
            pos += 1
    return tuple(out)


def selector(text: str) -> Selector:
    """`name` or `name{a="b",c!="d"}`; SelectorError otherwise."""
    m = re.fullmatch(rf"\s*({NAME})\s*(?:\{{(.*)\}})?\s*", text, re.S)
    if m is None:
        raise SelectorError("expected a metric name, optionally with label tests in braces")
    return Selector(m.group(1), matchers(m.group(2) or ""))


@dataclass(frozen=True)
class Requests:
    """The request counter (the series it sums), the label tests its errors pass (None: errors not counted),
    and the latency histogram (the name without _bucket; None: no latency figures)."""

    counter: Selector
    errors: tuple[Matcher, ...] | None = None
    latency: Selector | None = None

    def is_error(self, labels: Mapping[str, str]) -> bool:
        return self.counter(labels) and all(m(labels) for m in self.errors or ())

    @property
    def names(self) -> tuple[str, ...]:
        """The metric names to keep from a scrape (a histogram's _bucket, _sum and _count all start with its name)."""
        return (self.counter.name, *((self.latency.name,) if self.latency else ()))

    def to_json(self) -> dict[str, str]:
        out = {"counter": str(self.counter)}
        if self.errors is not None:
            out["errors"] = ",".join(map(str, self.errors))
        if self.latency is not None:
            out["latency"] = str(self.latency)
        return out


# xferd-go's and xferd-c's series (docs/PROTOCOL.md's codes: "ok" or an error's name).
OURS = Requests(selector("xfer_requests_total"), matchers('code!="ok"'), selector("xfer_request_duration_seconds"))


def requests(v: Any, where: str) -> Requests:
    """A [servers.requests] table; SelectorError naming the key otherwise."""
    if not isinstance(v, Mapping):
        raise SelectorError(f"{where}: expected a table with counter (and errors, latency)")
    unknown = [k for k in v if k not in KEYS]
    if unknown:
        raise SelectorError(f"{where}.{unknown[0]}: unknown key; allowed: " + ", ".join(KEYS))
    for k in v:
        if not isinstance(v[k], str):
            raise SelectorError(f"{where}.{k} = {v[k]!r}: expected a string")
    if "counter" not in v:
        raise SelectorError(f"{where}.counter: required, the counter of the server's requests, e.g. "
                            "'grpc_server_handled_total{grpc_type=\"unary\"}'")

    def parse(key: str, fn: Any, example: str) -> Any:
        try:
            return fn(v[key]) if key in v else None
        except SelectorError as e:
            raise SelectorError(f"{where}.{key} = {v[key]!r}: {e}; e.g. {example}") from None

    if v.get("errors", "x").strip() == "":
        raise SelectorError(f"{where}.errors = '': expected label tests, e.g. 'grpc_code!=\"OK\"'")
    if v.get("latency", "").strip().endswith("_bucket"):
        raise SelectorError(f"{where}.latency = {v['latency']!r}: the histogram's name without _bucket")
    return Requests(
        parse("counter", selector, "'grpc_server_handled_total{grpc_type=\"unary\"}'"),
        parse("errors", matchers, "'grpc_code!=\"OK\"'"),
        parse("latency", selector, '"grpc_server_handling_seconds"'),
    )
