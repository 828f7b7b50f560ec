"""`xferbench report` and `compare` on synthetic run directories (no processes): artifacts, verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from xferbench import cli
from xferbench.analysis import stats, summary
from xferbench.report import artifacts


def fake_run(d: Path, qps: dict[str, float], repeats: int, seed: int) -> Path:
    d.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    meta = {
        "experiment": "synthetic",
        "cells": list(qps),
        "baseline": next(iter(qps)),
        "repeats": repeats,
        "warmup_s": 1,
        "source": "scrape",
    }
    (d / "experiment.json").write_text(json.dumps(meta))
    (d / "timeseries").mkdir()
    rows = []
    for r in range(1, repeats + 1):
        for cell, q in qps.items():
            stem = f"{cell.replace('/', '_')}.r{r}"
            (d / "timeseries" / f"{stem}.csv").write_text(
                "t,client_qps,client_p95_s,rss_bytes,gc_pause_s_per_s\n"
                + "".join(f"{t},{q},0.01,1e7,0\n" for t in range(1, 6))
            )
            rows.append(
                {
                    "cell": cell,
                    "repeat": r,
                    "server": "xferd-go",
                    "transport": "grpc",
                    "axes": {},
                    "status": "ok",
                    "warnings": [],
                    "timeseries": f"timeseries/{stem}.csv",
                    "client_qps": float(rng.normal(q, q * 0.01)),
                    "client_p95_s": 0.01,
                    "rss_peak_bytes": 1e7,
                }
            )
    rows.append(
        {
            "cell": "b",
            "repeat": 9,
            "server": "xferd-c",
            "transport": "frame",
            "axes": {},
            "status": "failed",
            "error": "xferd-c exited with status 1 before it was ready",
            "stderr_tail": ["boom"],
            "warnings": [],
        }
    )
    (d / "runs.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    return d


def test_report_renders_every_artifact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = fake_run(tmp_path / "a", {"a": 100.0, "b": 150.0, "c": 100.0}, 5, 1)
    assert cli.main(["report", str(d)]) == 0
    assert "report.html" in capsys.readouterr().out
    s = summary.load(d)
    by = {c.name: c for c in s.cells}
    assert by["b"].vs_base["client_qps"].verdict == stats.BETTER
    assert by["c"].vs_base["client_qps"].verdict == stats.SAME
    assert by["b"].n_failed == 1 and "status 1" in (d / "summary.md").read_text()
    html = (d / "report.html").read_text()
    assert html.count("<script") >= 2 and "<script src=" not in html  # plotly.js inlined
    assert html.count("plotly.js v") == 1  # ... once
    head = (d / "summary.csv").read_text().splitlines()[0].split(",")
    assert "client_qps_center" in head and "client_qps_ci_lo" in head and "client_qps_verdict" in head
    assert "client_qps_p" in head and "client_qps_floor" in head  # a ranked metric
    assert "client_p95_s_center" in head and "client_p95_s_p" not in head  # not ranked: no verdict family
    assert not [h for h in head if h.endswith("_median")]
    md = (d / "summary.md").read_text()
    for text in (md, html):
        assert "bootstrap" not in text.lower()
        assert s.floor_text() in text and "not pinned" in text and "Holm" in text
    # The header, then the verdict table, then the ranking.
    assert md.index("Noise floor") < md.index("## Verdicts") < md.index("## Ranking by client QPS")
    assert html.index("Noise floor") < html.index("Verdicts: each") < html.index("Ranking by") < html.index("Time series")
    b_qps = next(line for line in md.splitlines() if line.startswith("| `b` | client QPS |"))
    assert "| better |" in b_qps.replace("**", "")


def test_header_names_pinning_aa_and_family(tmp_path: Path) -> None:
    d = fake_run(tmp_path / "a", {"a": 100.0, "aa": 100.0, "b": 150.0}, 5, 1)
    meta = json.loads((d / "experiment.json").read_text())
    meta["aa_cell"] = "aa"
    text = "server on CPUs 2, load generator on CPUs 3"
    meta["pinning"] = {"mode": "manual", "server": [2], "generator": [3], "text": text}
    (d / "experiment.json").write_text(json.dumps(meta))
    s = artifacts.write_all(d)
    md = (d / "summary.md").read_text()
    assert "**Pinning**: server on CPUs 2, load generator on CPUs 3" in md
    aa = next(line for line in md.splitlines() if line.startswith("- **A/A**"))
    assert "aa vs baseline a" in aa and "no significant difference" in aa
    n = sum(1 for v in s.verdicts if v.comparison.p is not None)
    assert n == len(s.verdicts) == 2 * 2  # aa and b x client QPS and peak RSS
    assert f"over {n} comparisons" in md
    assert "`aa` (A/A)" in md


def test_two_repeats_say_no_ci(tmp_path: Path) -> None:
    d = fake_run(tmp_path / "a", {"a": 100.0, "b": 150.0}, 2, 1)
    s = artifacts.write_all(d)
    md = (d / "summary.md").read_text()
    ranking = md.split("## Ranking")[1]
    b_row = next(line for line in ranking.splitlines() if "| `b` |" in line)
    assert "(no CI)" in b_row and "[" not in b_row  # neither the estimates nor the ratio have an interval
    assert {v.comparison.verdict for v in s.verdicts} == {stats.NO_CI}
    assert "no noise floor" in md


def test_series_are_medians_with_min_max_band(tmp_path: Path) -> None:
    from xferbench.report import charts

    d = fake_run(tmp_path / "a", {"a": 100.0, "b": 150.0}, 3, 1)
    for r, q in ((1, 10.0), (2, 20.0), (3, 60.0)):  # cell a: three repeats, samples every half second
        (d / "timeseries" / f"a.r{r}.csv").write_text(
            "t,client_qps,rss_bytes\n" + f"0.9,{q},\n1.2,{q + 2},\n2.4,{q},5\n"
        )
    data = charts.series_by_second(summary.load(d), d)
    a = data["client_qps"]["a"]
    assert sorted(a) == [1, 2] and sorted(a[1]) == [11.0, 21.0, 61.0]  # t 0.9 and 1.2 both round to 1 s
    assert data["rss_bytes"]["a"] == {2: [5.0, 5.0, 5.0]}  # empty fields are gaps, not zeros
    fig = charts.series(summary.load(d), d, {"a": "#636EFA", "b": "rgb(102,194,165)"})
    med = next(t for t in fig.data if t.name == "a" and t.xaxis == "x")
    assert list(med.x) == [1, 2] and list(med.y) == [21.0, 20.0]
    band = next(t for t in fig.data if t.fill == "toself" and t.legendgroup == "a" and t.xaxis == "x")
    assert list(band.y) == [61.0, 60.0, 10.0, 11.0]  # max forward, min back


def test_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = fake_run(tmp_path / "a", {"a": 100.0, "b": 100.0}, 5, 1)
    b = fake_run(tmp_path / "b", {"a": 100.0, "b": 80.0}, 5, 2)
    assert cli.main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "worse" in out and "no significant difference" in out
    assert "p (Holm)" in out and "Holm-adjusted over 4 comparisons" in out  # a, b x client QPS, peak RSS
    assert cli.main(["compare", str(a), str(tmp_path / "nope")]) == 2


def test_compare_names_configuration_differences(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def with_load(d: Path, sizes: str) -> Path:
        meta = json.loads((d / "experiment.json").read_text())
        meta["cell_configs"] = {"a": {"server": "xferd-go", "load": {"sizes": sizes, "users": 8}}}
        (d / "experiment.json").write_text(json.dumps(meta))
        return d

    a = with_load(fake_run(tmp_path / "a", {"a": 100.0}, 3, 1), "256KiB")
    b = with_load(fake_run(tmp_path / "b", {"a": 100.0}, 3, 2), "4MiB")
    same = with_load(fake_run(tmp_path / "c", {"a": 100.0}, 3, 3), "256KiB")
    assert cli.main(["compare", str(a), str(b)]) == 0
    err = capsys.readouterr().err
    assert "a ran different configurations" in err and "load.sizes '256KiB' → '4MiB'" in err
    assert "users" not in err
    assert cli.main(["compare", str(a), str(same)]) == 0
    assert "different configurations" not in capsys.readouterr().err


def test_run_refuses_invalid_experiment_before_starting(tmp_path: Path, capsys) -> None:
    p = tmp_path / "bad.toml"
    p.write_text('[[servers]]\nserver = "xferd-c"\n[servers.flags]\nalloc = "hoard"\n')
    assert cli.main(["run", str(p), "--out", str(tmp_path / "run")]) == 2
    assert "servers[0].flags.alloc" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
