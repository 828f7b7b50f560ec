"""`xferbench export`: a real run's recorded series, backfilled by promtool into a real Prometheus (Debian's),
answer every recording rule and every dashboard query over the run's own time range.

One module-scoped run of tests/deploy/data/export-run.toml (both servers, real Locust; `--quick`: 1 s of
warm-up and 3 s measured per cell, a few samples of every series, which is all the 1m rule windows need),
exported with `--tsdb`, which backfills the samples and then the recording rules; a Prometheus then serves that
TSDB and each query is asked as Grafana's panel would over the run's range (query_range, template variables at
All). The export itself goes through `cli.main` in this process (promtool and the Prometheus it backfills with
are real processes all the same). A run and a backfill take 20 s: the whole module is make test-slow's, and
make test keeps export's refusals (tests/tools/test_export.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.deploy.promcheck import (
    DASHBOARDS,
    ROOT,
    PanelQuery,
    PromAPI,
    load_dashboard,
    panel_queries,
    resolve_variables,
    rule_exprs,
    substitute,
)
from xferbench import cli
from xferbench.run import process
from xferbench.tools import export, stack

EXPERIMENT = Path(__file__).parent / "data" / "export-run.toml"
RUN_TIMEOUT_S = 300
pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]  # the first test waits for the run and the backfill
RULES = rule_exprs()
QUERIES = [q for path in DASHBOARDS for q in panel_queries(path)]


def xferbench(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xferbench", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@dataclass
class Backfilled:
    run_dir: Path
    openmetrics: Path
    api: PromAPI
    start: float
    end: float


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backfilled]:
    work = tmp_path_factory.mktemp("export")
    run_dir = work / "run"
    for b in (ROOT / "build" / "bin" / "xferd-go", ROOT / "build" / "bin" / "xferd-c"):
        assert b.exists(), f"{b} is not built: run `make build` (this test does not skip)"
    r = xferbench("run", str(EXPERIMENT), "--out", str(run_dir), "--quick", timeout=RUN_TIMEOUT_S)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    om, tsdb = work / "run.om", work / "tsdb"
    assert cli.main(["export", str(run_dir), "-o", str(om), "--tsdb", str(tsdb)]) == 0  # its output: the captured stderr
    times = [float(line.rsplit(" ", 1)[1]) for line in om.read_text().splitlines() if not line.startswith("#")]
    config = work / "prometheus.yml"
    config.write_text("global: {}\n")
    listen = f"127.0.0.1:{process.free_port()}"
    prom = stack.start_prometheus(config, tsdb, listen, work / "prometheus.log", retention=export.RETENTION)
    try:
        yield Backfilled(run_dir, om, PromAPI(prom.url), min(times), max(times) + export.RULES_AFTER_S)
    finally:
        prom.stop()


def test_openmetrics_keeps_names_labels_and_times(backfilled: Backfilled) -> None:
    lines = backfilled.openmetrics.read_text().splitlines()
    assert lines[-1] == "# EOF"
    row = json.loads((backfilled.run_dir / "runs.jsonl").read_text().splitlines()[0])
    stem = Path(row["timeseries"]).name.removesuffix(".csv")
    snap = json.loads((backfilled.run_dir / "timeseries" / f"{stem}.snapshots.jsonl").read_text().splitlines()[0])
    name, labels, value = snap["samples"][0]
    want = {**labels, "job": export.JOBS[snap["side"]], "instance": stem, "run": "run", "cell": row["cell"],
            "repeat": str(row["repeat"])}
    hits = [ln for ln in lines if ln.startswith(name + "{") and ln.endswith(f" {snap['t']:.3f}")
            and all(f'{k}="{v}"' in ln for k, v in want.items())]
    assert len(hits) == 1, f"{name} {want} at {snap['t']} not exported once: {hits}"
    assert float(hits[0].split("} ", 1)[1].split(" ")[0]) == pytest.approx(float(value))


def test_every_cell_and_side_is_there(backfilled: Backfilled) -> None:
    rows = [json.loads(x) for x in (backfilled.run_dir / "runs.jsonl").read_text().splitlines()]
    got = {(r["metric"]["job"], r["metric"]["cell"]) for r in backfilled.api.query_range(
        "count by (job, cell) (xfer_requests_total or xfer_client_requests_total)",
        backfilled.start, backfilled.end, "5s")}
    assert got == {(j, r["cell"]) for r in rows for j in ("xferd", "locust")}


@pytest.mark.parametrize(("record", "expr"), RULES, ids=[r for r, _ in RULES])
def test_recording_rule_backfilled(backfilled: Backfilled, record: str, expr: str) -> None:
    assert backfilled.api.query_range(record, backfilled.start, backfilled.end), f"rule {record}: no series"


@pytest.mark.parametrize("query", QUERIES, ids=[q.name for q in QUERIES])
def test_panel_query_over_the_run(backfilled: Backfilled, query: PanelQuery) -> None:
    dash = next(load_dashboard(p) for p in DASHBOARDS if load_dashboard(p)["uid"] == query.dashboard)
    expr = substitute(query.expr, resolve_variables(backfilled.api, dash))
    assert "$" not in expr, f"unsubstituted variable left in {expr}"
    res = backfilled.api.query_range(expr, backfilled.start, backfilled.end)
    assert res, f"{query.name}: no series over the run's range for\n{expr}"
