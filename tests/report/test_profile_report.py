"""The report's CPU attribution on synthetic run directories (no processes): the stacked bars, the Amdahl
line beside the measured ratio, the flame graph links, and the refusal to compare profiled windows with
unprofiled ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.report.test_report_cli import fake_run
from xferbench import cli
from xferbench.analysis import summary
from xferbench.analysis.summary import RunDirError
from xferbench.measure.profile.classify import BUCKETS
from xferbench.report import artifacts


def profiled(d: Path, allocator: dict[str, float], cells: set[str] | None = None) -> Path:
    """Gives the ok rows of the named cells (default: all) a cpu_profile with that allocator share, the rest
    of the samples in `other`, and a flame graph path."""
    rows = [json.loads(x) for x in (d / "runs.jsonl").read_text().splitlines()]
    for r in rows:
        if r["status"] == "ok" and (cells is None or r["cell"] in cells):
            a = allocator[r["cell"]]
            shares = dict.fromkeys(BUCKETS, 0.0) | {"allocator": a, "other": 1 - a}
            r["cpu_profile"] = {"samples": 1000, "shares": shares}
            r["flamegraph"] = f"profiles/{r['cell']}.r{r['repeat']}.svg"
    (d / "runs.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    return d


def test_report_shows_shares_amdahl_bound_and_flame_graphs(tmp_path: Path) -> None:
    d = profiled(fake_run(tmp_path / "a", {"a": 100.0, "b": 150.0}, 5, 1), {"a": 0.25, "b": 0.5})
    s = artifacts.write_all(d)
    md = (d / "summary.md").read_text()
    html = (d / "report.html").read_text()
    for text in (md, html):
        assert "Where the server's CPU goes" in text
        assert "allocator 25.0% of server CPU → at most 1.33x end to end from a faster allocator" in text
        assert "allocator 50.0% of server CPU → at most 2.00x end to end" in text
    b_line = next(line for line in md.splitlines() if line.startswith("| `b` [all runs]"))
    assert "measured client_qps vs baseline: 1.50x" in b_line and "50.0%" in b_line
    assert "profiles/b.r1.svg" in md and "href='profiles/a.r5.svg'" in html
    assert "[all runs](profiles/b.svg)" in md and "href='profiles/a.svg'>all runs<" in html  # the cell's own
    assert html.count("plotly.js v") == 1  # the stacked bars did not inline plotly.js a second time
    assert "barmode" in html or '"stack"' in html
    assert s.cells


def test_unprofiled_run_has_no_cpu_section(tmp_path: Path) -> None:
    d = fake_run(tmp_path / "a", {"a": 100.0, "b": 150.0}, 3, 1)
    artifacts.write_all(d)
    assert "Where the server's CPU goes" not in (d / "summary.md").read_text()


def test_profiled_and_unprofiled_rows_are_not_compared(tmp_path: Path) -> None:
    d = profiled(fake_run(tmp_path / "a", {"a": 100.0, "b": 150.0}, 3, 1), {"a": 0.2}, cells={"a"})
    with pytest.raises(RunDirError, match=r"profiled and the others not .*b.*not compared"):
        summary.load(d)


def test_compare_refuses_a_profiled_run_against_an_unprofiled_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = profiled(fake_run(tmp_path / "a", {"a": 100.0}, 3, 1), {"a": 0.2})
    b = fake_run(tmp_path / "b", {"a": 100.0}, 3, 2)
    assert cli.main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert "was profiled and the other run was not" in " ".join(err.split())
    c = profiled(fake_run(tmp_path / "c", {"a": 100.0}, 3, 3), {"a": 0.3})
    assert cli.main(["compare", str(a), str(c)]) == 0
