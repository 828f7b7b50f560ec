"""The verdict table of `make run` (`xferbench run experiments/quick.toml`) as bench figures: every ranked
metric of every cell that got a verdict, its ratio to the baseline with the 95% CI as its spread, read from
the run directory's summary.csv (the report package is a sibling of this one, so its file, not its code)."""

from __future__ import annotations

import csv
import os
import subprocess
import tomllib
from pathlib import Path

from xferbench.analysis.metrics import BY_NAME
from xferbench.config.files import ROOT
from xferbench.tools.bench import tools
from xferbench.tools.bench.quiet import BUSY_CORES, Others
from xferbench.tools.bench.record import Figure

EXPERIMENT = ROOT / "experiments" / "quick.toml"
EXIT_SOME_RUNS_FAILED = 3  # as xferbench.cli, which this package may not import
RUN_TIMEOUT_S = 600.0  # quick.toml takes ~3.5 min; twice that is a hung run


def run_quick(out: Path) -> list[Figure]:
    """Runs the quick experiment into `out` (the runner pins its own processes) and returns its verdicts, busy
    when others used the CPUs meanwhile."""
    others = Others()
    # The experiment's own rounds only: the bench's time is fixed, and each verdict carries its interval anyway.
    argv = [str(ROOT / ".venv" / "bin" / "xferbench"), "run", str(EXPERIMENT), "--out", str(out), "--until-ci", "off"]
    try:
        done = subprocess.run(
            argv, cwd=ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=dict(os.environ), check=False
        )
    except subprocess.TimeoutExpired:
        raise tools.BenchError(f"xferbench run {EXPERIMENT.name} ran past {RUN_TIMEOUT_S:.0f}s") from None
    # Exit 3: some runs failed but the report is written; its verdicts stand on the runs that did not fail
    # (each figure's rounds say how many).
    if done.returncode not in (0, EXIT_SOME_RUNS_FAILED) or not (out / "summary.csv").exists():
        raise tools.BenchError(f"xferbench run exited {done.returncode}: {(done.stdout + done.stderr)[-800:]}")
    with open(EXPERIMENT, "rb") as f:
        baseline = str(tomllib.load(f)["experiment"].get("baseline", ""))
    return read_verdicts(out / "summary.csv", others.cores() > BUSY_CORES, baseline)


def read_verdicts(path: Path, busy: bool, baseline: str = "") -> list[Figure]:
    """One figure per (cell, ranked metric) with a verdict: "run <cell> <metric>", the verdict as its note.
    The baseline's own row (1.0 against itself) is left out."""
    out = []
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        if row["cell"] == baseline:
            continue
        for m, metric in BY_NAME.items():
            verdict = row.get(f"{m}_verdict") or ""
            ratio, lo, hi = (row.get(f"{m}_{k}") or "" for k in ("ratio", "ratio_ci_lo", "ratio_ci_hi"))
            if f"{m}_p" not in row or not verdict or not ratio or not lo or not hi:
                continue  # a diagnostic, the baseline itself, or a metric this run did not measure
            out.append(
                Figure(
                    f"run {row['cell']} {m}",
                    "ratio",
                    metric.better,
                    float(ratio),
                    float(lo),
                    float(hi),
                    int(row["runs_ok"]),
                    busy,
                    note=verdict,
                )
            )
    return out
