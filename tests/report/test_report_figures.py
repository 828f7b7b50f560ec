"""The numbers a report prints, read back from where they are printed: `xferbench report` on a runs.jsonl
with known values, then the terminal's tables, summary.md and report.html cell by cell.

Every expected figure is computed here from the input values with the formulas the report states
(geometric means; a paired Student-t interval on the log ratios; the noise floor pooled over the metric's
comparisons), independently of xferbench/analysis/stats.py, and formatted as the report says it formats them.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from scipy import stats as sps

from xferbench.analysis.row import RunRow

ROOT = Path(__file__).resolve().parents[2]

# Server CPU per request of the baseline in four rounds, and each cell's ratio to it, round by round.
BASE_CPU = [1.00e-3, 1.10e-3, 0.90e-3, 1.05e-3]
RATIOS = {"a": [1.0, 1.0, 1.0, 1.0], "b": [1.19, 1.21, 1.20, 1.20], "c": [1.01, 0.99, 1.00, 1.00]}
GEN_CPU = {"a": [0.80, 0.84, 0.86, 0.82], "b": [0.81, 0.83, 0.85, 0.84], "c": [0.95, 0.97, 0.93, 0.96]}
QPS = {"a": [100.0, 101.0, 99.0, 100.5], "b": [100.2, 100.6, 99.3, 100.1], "c": [99.8, 101.2, 98.9, 100.7]}
ROUNDS = len(BASE_CPU)


def geomean(xs: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in xs))


def paired(cell: str) -> tuple[float, float, float, float]:
    """(ratio, lo, hi, sd of the log ratios) of cell / baseline on server CPU per request."""
    logs = [math.log((BASE_CPU[i] * RATIOS[cell][i]) / BASE_CPU[i]) for i in range(ROUNDS)]
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    half = sps.t.ppf(0.975, ROUNDS - 1) * sd / math.sqrt(ROUNDS)
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half), sd


def floor() -> float:
    """The noise floor of server CPU per request: b's and c's log-ratio variance pooled (equal df), over n."""
    var = statistics.fmean(paired(c)[3] ** 2 for c in ("b", "c"))
    df = 2 * (ROUNDS - 1)
    return math.exp(sps.t.ppf(0.975, df) * math.sqrt(var / ROUNDS)) - 1


def write_run(d: Path) -> Path:
    """A run directory as `xferbench run` leaves it: experiment.json and runs.jsonl (every cell x round)."""
    d.mkdir(parents=True)
    cells = list(RATIOS)
    config = {"server": "xferd-c", "transport": "frame", "load": {"mode": "open", "rate": "100"}}
    meta = {"experiment": "known", "cells": cells, "baseline": "a", "repeats": ROUNDS, "warmup_s": 1,
            "source": "scrape", "alpha": 0.05, "cell_configs": dict.fromkeys(cells, config)}
    (d / "experiment.json").write_text(json.dumps(meta))
    rows = []
    for i in range(ROUNDS):
        for cell in cells:
            row = RunRow(cell, "xferd-c", "frame", experiment="known", repeat=i + 1, pair=f"r{i + 1}")
            row.server_cpu_per_request_s = BASE_CPU[i] * RATIOS[cell][i]
            row.gen_cpu_cores = GEN_CPU[cell][i]
            row.client_qps = QPS[cell][i]
            rows.append(row.to_json())
    (d / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def terminal_rows(out: str, first: str) -> list[list[str]]:
    """The rows of rich tables (cells between │) whose first cell is `first`."""
    rows = []
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("│┃").split("│")]
        if len(cells) > 1 and cells[0] == first:
            rows.append(cells)
    return rows


def terminal_header(out: str, first: str) -> list[str]:
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("┃").split("┃")]
        if len(cells) > 1 and cells[0] == first:
            return cells
    raise AssertionError(f"no table header starting with {first!r} in:\n{out}")


class Tables(HTMLParser):
    """Every <table> of a page as rows of cell texts (tags inside a cell dropped)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def html_tables(path: Path) -> list[list[list[str]]]:
    p = Tables()
    p.feed(path.read_text())
    return p.tables


def report(d: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "xferbench", "report", str(d)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_verdict_cells_hold_the_computed_ratio_interval_floor_and_verdict(tmp_path: Path) -> None:
    d = write_run(tmp_path / "run")
    out = report(d)
    b_ratio, b_lo, b_hi, _ = paired("b")
    c_ratio, c_lo, c_hi, _ = paired("c")
    want = {
        "b": [f"{b_ratio:.3f}x ({(b_ratio - 1) * 100:+.1f}%)", f"[{b_lo:.3f}, {b_hi:.3f}]", "worse"],
        "c": [f"{c_ratio:.3f}x ({(c_ratio - 1) * 100:+.1f}%)", f"[{c_lo:.3f}, {c_hi:.3f}]",
              "no significant difference"],
    }
    fl = f"±{floor() * 100:.1f}%"
    assert want["b"][0] == "1.200x (+20.0%)"  # the input says so; a slip in the helpers above shows here

    # The terminal: configuration, metric, ratio, 95% CI, verdict, noise floor, p (Holm).
    for cell, (ratio, ci, verdict) in want.items():
        (row,) = [r for r in terminal_rows(out, cell) if r[1] == "server CPU per request"]
        assert row[2:6] == [ratio, ci, verdict, fl], row
    # summary.md, the same cells between pipes.
    md = (d / "summary.md").read_text()
    for cell, (ratio, ci, verdict) in want.items():
        line = next(x for x in md.splitlines() if x.startswith(f"| `{cell}` | server CPU per request |"))
        cells = [c.strip().strip("*") for c in line.strip("|").split("|")]
        assert cells[2:6] == [ratio, ci, verdict, fl], line
    # report.html: the verdict table is the first table after the header list.
    verdicts = html_tables(d / "report.html")[0]
    assert verdicts[0][:6] == ["configuration", "metric", "ratio (cell / baseline)", "95% CI", "verdict", "noise floor"]
    for cell, (ratio, ci, verdict) in want.items():
        (row,) = [r for r in verdicts if r[:2] == [cell, "server CPU per request"]]
        assert row[2:6] == [ratio, ci, verdict, fl], row
    assert f"±{floor() * 100:.1f}% in server CPU per request" in out  # the header's noise floor line


def test_ranking_cells_hold_geometric_means_with_units(tmp_path: Path) -> None:
    d = write_run(tmp_path / "run")
    out = report(d)
    cpu = {c: geomean([BASE_CPU[i] * RATIOS[c][i] for i in range(ROUNDS)]) for c in RATIOS}
    gen = {c: geomean(GEN_CPU[c]) for c in GEN_CPU}
    order = sorted(RATIOS, key=lambda c: cpu[c])  # lower cost ranks first

    head = terminal_header(out, "cell")
    assert head[:4] == ["cell", "runs", "CPU/req", "vs base"] and "gen CPU (cores)" in head, head
    g = head.index("gen CPU (cores)")
    ranked = [r for c in order for r in terminal_rows(out, c) if len(r) == len(head)]
    assert [r[0] for r in ranked] == order
    for r in ranked:
        assert r[1] == str(ROUNDS)
        assert r[2] == f"{cpu[r[0]] * 1e3:.2f} ms", r
        assert r[g] == f"{gen[r[0]]:.2f}", r

    html_ranking = html_tables(d / "report.html")[1]
    hh = html_ranking[0]
    assert "generator CPU (cores)" in hh and hh[3] == "server CPU per request (s)", hh
    gi = hh.index("generator CPU (cores)")
    by = {r[1].split(" ")[0]: r for r in html_ranking[1:]}
    for c in RATIOS:
        assert by[c][gi].startswith(f"{gen[c]:.2f} ["), by[c]  # the mean, then its interval
        assert by[c][3].startswith(f"{cpu[c] * 1e3:.2f} ms ["), by[c]
    md = (d / "summary.md").read_text()
    md_head = next(x for x in md.splitlines() if x.startswith("| # | configuration |"))
    assert "| generator CPU (cores) |" in md_head, md_head
