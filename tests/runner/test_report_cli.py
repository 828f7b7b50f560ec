"""`xferbench report` and `compare` on synthetic run directories (no processes): artifacts, verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from xferbench import cli, report, stats


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
    s = report.load(d)
    by = {c.name: c for c in s.cells}
    assert by["b"].vs_base["client_qps"].verdict == stats.BETTER
    assert by["c"].vs_base["client_qps"].verdict == stats.SAME
    assert by["b"].n_failed == 1 and "status 1" in (d / "summary.md").read_text()
    html = (d / "report.html").read_text()
    assert html.count("<script") >= 2 and "<script src=" not in html  # plotly.js inlined
    head = (d / "summary.csv").read_text().splitlines()[0].split(",")
    assert "client_qps_ci_lo" in head and "client_qps_verdict" in head


def test_two_repeats_say_no_ci(tmp_path: Path) -> None:
    d = fake_run(tmp_path / "a", {"a": 100.0, "b": 150.0}, 2, 1)
    report.write_all(d)
    md = (d / "summary.md").read_text()
    assert "(no CI)" in md and "[" not in md.split("| `b`")[1].split("|")[3]


def test_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = fake_run(tmp_path / "a", {"a": 100.0, "b": 100.0}, 5, 1)
    b = fake_run(tmp_path / "b", {"a": 100.0, "b": 80.0}, 5, 2)
    assert cli.main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "worse" in out and "no significant difference" in out
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
