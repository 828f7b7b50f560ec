"""The vocabulary of docs/DESIGN.md as data: its metric, label and recording-rule tables, and PROTOCOL.md's
error codes. Tests compare what the servers, the client and the dashboards use with these."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "DESIGN.md"
PROTOCOL = ROOT / "proto" / "PROTOCOL.md"
SERVER_NAMES = ("xferd-go", "xferd-c")
# Prometheus's own labels: bucket bounds and summary quantiles, never listed in the tables.
IMPLICIT_LABELS = frozenset({"le", "quantile"})
# The series a histogram or summary family exposes besides its name.
FAMILY_SUFFIXES = ("_bucket", "_count", "_sum")

_TICKED = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class MetricDoc:
    name: str
    type: str
    labels: frozenset[str]
    exporters: frozenset[str]  # SERVER_NAMES it names; empty for client metrics
    exported_by: str  # the table's words: which process, under which condition


def ticked(cell: str) -> list[str]:
    return _TICKED.findall(cell)


def split_row(line: str) -> list[str]:
    """The cells of a Markdown table row; a `|` inside backticks belongs to its cell."""
    cells, cur, in_tick = [], "", False
    for ch in line.strip().strip("|"):
        if ch == "`":
            in_tick = not in_tick
        if ch == "|" and not in_tick:
            cells.append(cur.strip())
            cur = ""
        else:
            cur += ch
    cells.append(cur.strip())
    return cells


def section(text: str, heading: str) -> str:
    """The body under a heading (any level) up to the next heading of the same or a higher level."""
    level = heading.split(" ", 1)[0]
    lines = text.splitlines()
    start = lines.index(heading)
    out = []
    for line in lines[start + 1:]:
        m = re.match(r"^(#+) ", line)
        if m and len(m[1]) <= len(level):
            break
        out.append(line)
    return "\n".join(out)


def table_rows(body: str) -> list[list[str]]:
    """Rows of the first table in body, without its header and separator."""
    rows = [split_row(line) for line in body.splitlines() if line.startswith("|")]
    return rows[2:]


@cache
def design_text() -> str:
    return DESIGN.read_text()


def _metric_table(heading: str) -> dict[str, MetricDoc]:
    out = {}
    for cells in table_rows(section(design_text(), heading)):
        name_cell, type_cell, label_cell, by_cell = cells[:4]
        exporters = frozenset(s for s in SERVER_NAMES if s in by_cell)
        for name in ticked(name_cell):
            out[name] = MetricDoc(name, type_cell, frozenset(ticked(label_cell)), exporters, by_cell)
    return out


def server_metrics() -> dict[str, MetricDoc]:
    return _metric_table("### Server metrics")


def client_metrics() -> dict[str, MetricDoc]:
    return _metric_table("### Client metrics")


def recorded_series() -> set[str]:
    return {n for cells in table_rows(section(design_text(), "### Recording rules")) for n in ticked(cells[0])}


def labels() -> dict[str, set[str]]:
    """label name -> the values its row names in backticks."""
    out: dict[str, set[str]] = {}
    for cells in table_rows(section(design_text(), "### Labels")):
        for name in ticked(cells[0]):
            out[name] = set(ticked(cells[1]))
    return out


def protocol_codes() -> set[str]:
    """The status codes of PROTOCOL.md's "Errors" table."""
    body = section(PROTOCOL.read_text(), "### Errors")
    return {ticked(cells[0])[0] for cells in table_rows(body)}


def family_of(series: str, histograms: set[str]) -> str:
    """The documented family a series name belongs to: `x_bucket` of histogram `x` is `x`."""
    for suffix in FAMILY_SUFFIXES:
        if series.endswith(suffix) and series.removesuffix(suffix) in histograms:
            return series.removesuffix(suffix)
    return series
