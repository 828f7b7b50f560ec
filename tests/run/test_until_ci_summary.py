"""One short real sweep, two ways of checking it.

`xferbench run --until-ci PCT` adds interleaved rounds until every ranked ratio's interval is within ±PCT,
the budget would be exceeded, or the rounds cap is reached (sweep.UntilCI.max_repeats). With a target no
real run can meet and a cap of 4, the sweep must run exactly 4 rounds (one more than the 3 it needs for a
first interval), record them, and say in experiment.json and summary.md that it stopped at the cap.

The same run's summary.csv is then recomputed by hand from runs.jsonl, with numpy and scipy directly and
none of xferbench's statistics: each cell's geometric mean and Student-t interval on the logs, each
ratio to the baseline paired by duet with its paired-t interval, the Holm-adjusted p over the verdict
family, the noise floor and the verdict.

Real servers (xferd-c, glibc against its pool) and real Locust, each round one duet: about 7 s a round.
The module's one sweep takes about 30-40 s on 2 loaded cores and cannot be shorter: the rule only acts
after 3 rounds, and the cap is one round more."""

from __future__ import annotations

import csv
import functools
import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from tests.support.runs import experiment_file, processes_mentioning, stray_children
from xferbench import cli
from xferbench.analysis import stats
from xferbench.analysis.summary import HELD_BY_LOAD
from xferbench.run import sweep

CAP = 4
TARGET = "0.0001%"  # ±1e-6: no measured ratio gets there, so only the cap can stop the sweep

EXPERIMENT = """
[experiment]
name = "untilci"
repeats = 1
warmup_s = 1
duet = true
baseline = "c/frame/alloc=glibc"
[load]
users = 2
spawn_rate = 2
duration_s = 2
rate = "20"
mix = "echo:1"
transport = "frame"
[[servers]]
server = "xferd-c"
label = "c"
[servers.flags]
alloc = ["glibc", "pool"]
"""

# The verdict metrics' directions, as docs/DESIGN.md gives them (higher is better?).
HIGHER_IS_BETTER = {
    "server_cpu_per_request_s": False,
    "server_cpu_per_gib_s": False,
    "capacity_rps": True,
    "client_qps": True,
    "client_p99_s": False,
    "server_p99_s": False,
    "rss_peak_bytes": False,
    "gc_pause_total_s": False,
}
ALPHA = 0.05  # the experiment's (the default)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("untilci")
    path = tmp / "untilci.toml"
    exp = experiment_file(path, EXPERIMENT)
    assert exp.duet and exp.repeats == 1 and len(exp.cells) == 2
    out = tmp / "run"
    mp = pytest.MonkeyPatch()
    # The CLI has no flag for the rounds cap (the budget is its time cap, which a loaded machine would make
    # nondeterministic): the same UntilCI the CLI builds, with max_repeats 4 instead of 50.
    mp.setattr(sweep, "UntilCI", functools.partial(sweep.UntilCI, max_repeats=CAP))
    try:
        code = cli.main(["run", str(path), "--out", str(out), "--until-ci", TARGET, "--budget", "30m", "--quick"])
    finally:
        mp.undo()
    assert code == 0, (out / "runs.jsonl").read_text() if (out / "runs.jsonl").exists() else "no runs.jsonl"
    assert not stray_children(), "the sweep left a child process"
    assert not processes_mentioning(str(out)), "orphans left behind"
    yield out


def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "runs.jsonl").read_text().splitlines()]


def test_until_ci_adds_rounds_up_to_the_cap_and_says_why_it_stopped(run_dir: Path) -> None:
    rows = _rows(run_dir)
    assert all(r["status"] == "ok" for r in rows), [(r["cell"], r["status"], r["error"]) for r in rows]
    # --until-ci raised the experiment's 1 repeat to the 3 a first interval needs, then added rounds until
    # the cap: exactly 4 rounds of one duet each, interleaved, every duet both cells at once.
    assert [r["repeat"] for r in rows] == [1, 1, 2, 2, 3, 3, 4, 4]
    by_pair: dict[str, list[str]] = {}
    for r in rows:
        by_pair.setdefault(r["pair"], []).append(r["cell"])
    assert sorted(by_pair) == [f"r{k}/c/frame/alloc=pool" for k in range(1, CAP + 1)]
    assert all(sorted(c) == ["c/frame/alloc=glibc", "c/frame/alloc=pool"] for c in by_pair.values()), by_pair
    meta = json.loads((run_dir / "experiment.json").read_text())
    assert (meta["repeats"], meta["rounds"], meta["interrupted"]) == (3, CAP, False)
    until = meta["until_ci"]
    assert until["met"] is False and until["why"] == f"{CAP} rounds reached", until
    assert until["rounds"] == CAP and until["target"] == pytest.approx(1e-6)
    assert until["metric"] == "server_cpu_per_request_s"
    assert until["widest"] is not None and 1e-6 < until["widest"] < 10, until  # a real, finite interval
    md = (run_dir / "summary.md").read_text()
    line = next((x for x in md.splitlines() if x.startswith("- **Until CI**")), None)
    assert line is not None, md
    assert line.startswith(f"- **Until CI**: target ±0.0001% on server CPU per request: not met after {CAP} rounds "
                           f"({CAP} rounds reached); widest interval ±"), line


# --- summary.csv against figures computed by hand -----------------------------------------------------------


def _num(text: str) -> float | None:
    return None if text == "" else float(text)


def _close(got: str, want: float | None, what: str) -> None:
    """summary.csv writes 6 significant digits."""
    if want is None:
        assert got == "", f"{what}: summary.csv has {got!r}, by hand there is none"
        return
    assert got != "", f"{what}: summary.csv is empty, by hand {want!r}"
    assert float(got) == pytest.approx(want, rel=2e-5, abs=1e-300), f"{what}: summary.csv {got}, by hand {want!r}"


def _t(df: float) -> float:
    return float(sps.t.ppf(0.975, df))


def _geo_ci(values: list[float]) -> tuple[float, float, float]:
    logs = np.log(np.asarray(values, dtype=float))
    m = logs.mean()
    half = _t(len(values) - 1) * logs.std(ddof=1) / math.sqrt(len(values))
    return math.exp(m), math.exp(m - half), math.exp(m + half)


def _paired(base: dict[str, float], cell: dict[str, float]) -> dict[str, float | None]:
    """Ratio cell/base paired by duet: geometric mean of per-pair ratios, paired t on their logs."""
    keys = sorted(set(base) & set(cell))
    d = np.log([cell[k] for k in keys]) - np.log([base[k] for k in keys])
    n, mean = len(d), float(d.mean())
    se = float(d.std(ddof=1)) / math.sqrt(n)
    if se < 1e-9 and abs(mean) < 1e-9:  # the same figure on both sides in every round (a histogram
        # quantile on a bucket bound): no difference, a point interval at 1, p = 1, and no spread to pool
        return {"ratio": 1.0, "lo": 1.0, "hi": 1.0, "p": 1.0, "se": 0.0, "df": n - 1, "n": n}
    if se < 1e-9:  # identical ratios: the report gives no interval (stats.NO_SPREAD)
        return {"ratio": math.exp(mean), "lo": None, "hi": None, "p": None, "se": None, "df": None, "n": n}
    half = _t(n - 1) * se
    return {"ratio": math.exp(mean), "lo": math.exp(mean - half), "hi": math.exp(mean + half),
            "p": float(2 * sps.t.sf(abs(mean) / se, n - 1)), "se": se, "df": n - 1, "n": n}


def test_summary_csv_matches_figures_computed_by_hand(run_dir: Path) -> None:
    rows = [r for r in _rows(run_dir) if r["status"] == "ok"]
    with open(run_dir / "summary.csv", newline="", encoding="utf-8") as f:
        table = {line["cell"]: line for line in csv.DictReader(f)}
    base_name, other_name = "c/frame/alloc=glibc", "c/frame/alloc=pool"
    assert sorted(table) == [base_name, other_name]

    def values(cell: str, metric: str) -> dict[str, float]:
        """pair key → value, of the cell's completed runs that measured the metric; none when some run could only
        bound it (a server latency under its histogram's first bucket: the cell's figure is then that bound)."""
        runs = [r for r in rows if r["cell"] == cell]
        if any(metric in (r.get("bounds") or {}) for r in runs):
            return {}
        return {r["pair"] or f"r{r['repeat']}": float(r[metric]) for r in runs if r.get(metric) is not None}

    # Every cell, every metric that rows carry: the geometric mean and its interval.
    checked = 0
    for cell in (base_name, other_name):
        line = table[cell]
        assert (int(line["runs_ok"]), int(line["runs_failed"])) == (CAP, 0)
        for metric in ("server_cpu_per_request_s", "client_qps", "client_p99_s", "server_qps", "rss_peak_bytes",
                       "server_cpu_cores", "alloc_allocated_bytes"):
            vs = list(values(cell, metric).values())
            assert len(vs) == CAP and all(v > 0 for v in vs), (cell, metric, vs)
            center, lo, hi = _geo_ci(vs)
            _close(line[f"{metric}_center"], center, f"{cell} {metric} center")
            _close(line[f"{metric}_ci_lo"], lo, f"{cell} {metric} ci_lo")
            _close(line[f"{metric}_ci_hi"], hi, f"{cell} {metric} ci_hi")
            checked += 1
    assert checked == 14

    # The verdict family: the metrics with a p column (the ranked ones) that some run measured, but the rate the
    # open loop offers: every cell serves it, so it is held fixed by the load, never tested.
    family = [m for m in HIGHER_IS_BETTER if f"{m}_p" in table[other_name]
              and (values(base_name, m) or values(other_name, m)) and m not in HELD_BY_LOAD]
    assert "server_cpu_per_request_s" in family and "client_qps" not in family
    held = table[other_name]
    assert (held["client_qps_verdict"], held["client_qps_p"], held["client_qps_floor"]) == (stats.HELD, "", "")
    assert set(family) <= set(HIGHER_IS_BETTER)
    cmp_ = {m: _paired(values(base_name, m), values(other_name, m)) for m in family}
    tested = [m for m in family if cmp_[m]["p"] is not None]
    # Holm's step-down adjustment over the family's p-values.
    order = sorted(tested, key=lambda m: cmp_[m]["p"])
    running, holm = 0.0, {}
    for rank, m in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * cmp_[m]["p"]))
        holm[m] = running
    line, base_line = table[other_name], table[base_name]
    for m in family:
        c = cmp_[m]
        _close(line[f"{m}_ratio"], c["ratio"], f"{m} ratio")
        _close(line[f"{m}_ratio_ci_lo"], c["lo"], f"{m} ratio_ci_lo")
        _close(line[f"{m}_ratio_ci_hi"], c["hi"], f"{m} ratio_ci_hi")
        # With one compared cell, the pooled noise floor is that comparison's own half-width.
        floor = math.exp(_t(c["df"]) * c["se"]) - 1 if c["p"] is not None else None
        _close(line[f"{m}_floor"], floor, f"{m} floor")
        _close(base_line[f"{m}_floor"], floor, f"{m} floor (baseline row)")
        if c["p"] is None:
            assert line[f"{m}_verdict"].startswith("no CI"), (m, line[f"{m}_verdict"])
            assert line[f"{m}_p"] == ""
            continue
        _close(line[f"{m}_p"], holm[m], f"{m} p (Holm)")
        if holm[m] >= ALPHA:
            want = "no significant difference"
        elif abs(math.log(c["ratio"])) < math.log1p(floor):
            want = "below the noise floor"
        else:
            want = "better" if (c["ratio"] > 1) == HIGHER_IS_BETTER[m] else "worse"
        assert line[f"{m}_verdict"] == want, (m, c, holm[m], floor, line[f"{m}_verdict"])
        # The baseline against itself: ratio 1, a point interval, no p.
        assert (base_line[f"{m}_ratio"], base_line[f"{m}_ratio_ci_lo"], base_line[f"{m}_ratio_ci_hi"],
                base_line[f"{m}_p"]) == ("1", "1", "1", ""), m
    assert len(tested) >= 2, cmp_  # the check above compared real intervals, not only empty cells
