"""What a headless run tells its user: Locust's Aggregated row counts whole operations (chunk calls apart,
in loadgen's summary and metrics), a user count too small for the mix is said, and `python -m loadgen`
lists every --xfer-* option (Locust's --help cannot: it prints before it imports a locustfile). The runs go
through the session's `runs` (tests/loadgen/harness.py), two at a time, each with its own server."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest

import loadgen
from loadgen._options import option
from tests.loadgen.harness import Runs, in_background, runs_for
from tests.loadgen.support import ROOT, parse_prom, run_locust, summary_counts, total
from tests.support.servers import running_server

RUN_S = 1  # counts, not speeds: a second makes hundreds of transfers (far above the slack below)
OPERATIONS = ("Upload", "Download", "Echo")


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return runs_for(request, tmp_path_factory)


def _locust(*args: str) -> subprocess.CompletedProcess[str]:
    with running_server("xferd-go", ["--store=mem"]) as server:
        return run_locust(["--headless", "--host", server.target("grpc"), *args], timeout=RUN_S + 60)


GRPC_INFLIGHT = int(option("grpc_inflight").default)


def _aggregated_run(tmp: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    return _locust("-u", "3", "-r", "3", "-t", f"{RUN_S}s", "--xfer-sizes", "64KiB", "--xfer-chunk", "16KiB",
                   "--xfer-metrics-port", "0", "--xfer-metrics-dump", str(tmp), "--csv", str(tmp / "run"),
                   "--only-summary"), tmp


@in_background(_aggregated_run)
def test_aggregated_counts_whole_operations(runs: Runs, request: pytest.FixtureRequest) -> None:
    r, tmp_path = runs[request.node]
    assert r.returncode == 0, r.stderr[-3000:]
    rows = {row["Name"]: int(row["Request Count"]) for row in csv.DictReader(open(tmp_path / "run_stats.csv"))}
    client = parse_prom(next(tmp_path.glob("local-*.prom")).read_text())
    whole = {m: total(client, "xfer_client_requests_total", method=m) for m in OPERATIONS}
    chunks = {m: total(client, "xfer_client_requests_total", method=m) for m in ("UploadChunk", "DownloadChunk")}
    assert set(rows) == {*OPERATIONS, "Aggregated"}, rows
    assert rows["Aggregated"] == sum(rows[m] for m in OPERATIONS)
    # Locust's table, loadgen's summary and the final metrics are read at slightly different moments
    # around the stop: a call or two of each user may land between them. Chunk calls, were they counted,
    # would add four per transfer: hundreds.
    # Per user: the calls it has in flight and the one it is starting, which land around the stop and may be
    # counted by either reader first: up to that many on each side (seen: 18 apart for 3 users at depth 4).
    slack = 2 * (GRPC_INFLIGHT + 1) * 3
    assert all(0 < whole[m] and abs(rows[m] - whole[m]) <= slack for m in OPERATIONS), (rows, whole)
    # 64 KiB in 16 KiB chunks: four chunk calls per transfer, counted apart from the operations.
    assert chunks == {"UploadChunk": 4 * whole["Upload"], "DownloadChunk": 4 * whole["Download"]}
    printed = summary_counts(r.stderr)
    assert abs(printed["operations"] - rows["Aggregated"]) <= slack, (printed, rows)
    assert whole["Upload"] + whole["Download"] > slack  # so that counted chunk calls could not hide in the slack
    assert printed["operations"] == sum(printed[m] for m in OPERATIONS)
    assert printed["UploadChunk"] == 4 * printed["Upload"] and printed["DownloadChunk"] == 4 * printed["Download"]
    assert "chunk calls (parts of the Upload and Download operations above, not counted in them)" in r.stderr
    assert re.search(r"generator CPU \d+\.\d\d cores", r.stderr), r.stderr[-2000:]


@in_background(lambda tmp: _locust("-u", "2", "-r", "2", "-t", f"{RUN_S}s", "--xfer-sizes", "4KiB",
                                   "--xfer-metrics-port", "0", "--only-summary"))
def test_too_few_users_for_the_mix_is_said(runs: Runs, request: pytest.FixtureRequest) -> None:
    r = runs[request.node]
    assert r.returncode == 0, r.stderr[-3000:]
    m = re.search(r"WARNING: (\w+User) never ran: the user count is too small for every class of --xfer-mix", r.stderr)
    assert m, r.stderr[-3000:]
    idle = m.group(1).removesuffix("User")
    assert idle not in summary_counts(r.stderr)  # it really made no call
    assert "raise -u to at least 3" in r.stderr


@in_background(lambda tmp: subprocess.run([sys.executable, "-m", "loadgen"], cwd=ROOT, capture_output=True, text=True,
                                          timeout=60))
def test_python_m_loadgen_lists_every_option(runs: Runs, request: pytest.FixtureRequest) -> None:
    r = runs[request.node]
    assert r.returncode == 0, r.stderr
    for opt in loadgen.OPTIONS:
        assert f"{opt.flag} (default: {opt.default or 'none'}; env {opt.env_var})" in r.stdout, opt.flag
    # ...and they are the options Locust really takes: each default is accepted as given.
    assert loadgen.command_line({o.key: o.default for o in loadgen.OPTIONS if o.default})
