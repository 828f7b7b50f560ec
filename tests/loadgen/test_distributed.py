"""Distributed Locust on loopback against xferd-go: master + 2 workers, and --processes 2.

The master's request count (Locust's own stats, --json: whole operations only) must equal the sum over the
workers' client metrics (xfer_client_requests_total, as each worker wrote it at exit with
--xfer-metrics-dump), the master's run summary must count the same operations, and the
master must list its workers' /metrics URLs while the test runs. Each run has an xferd-go of its own and
goes through the session's `runs` (tests/loadgen/harness.py), beside another.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from loadgen._options import option
from tests.loadgen.harness import Runs, in_background, runs_for
from tests.loadgen.support import (
    LOCUST,
    ROOT,
    Sample,
    failed,
    fetch,
    free_port,
    locust_cmd,
    parse_prom,
    summary_counts,
    total,
)
from tests.support.servers import running_server

# A worker sends the master its /metrics URL as it starts (loadgen's xfer_hello), not only with its stats reports,
# every 3 s (Locust's interval): a run shorter than that interval must see both workers listed, as a short run on a
# starved machine needs (with the reports alone the master listed them 2-3 s into the run).
MASTER_RUN_S = 2
FOREIGN = Path(__file__).with_name("foreign_locustfile.py")
PROCESSES_RUN_S = 2  # counts only: every worker makes its calls within the first second
COMMON = ["--xfer-sizes", "64KiB,128KiB", "--xfer-chunk", "32KiB", "--xfer-inflight", "4"]


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return runs_for(request, tmp_path_factory)


def _workers_from_master(master_metrics: str, want: int, deadline: float) -> dict[str, str]:
    """Polls the master's /workers (a bounded loop) until `want` workers reported their /metrics URL."""
    workers: dict[str, str] = {}
    while time.monotonic() < deadline:
        try:
            workers = json.loads(fetch(master_metrics.removesuffix("/metrics") + "/workers"))["workers"]
        except OSError:
            workers = {}
        if len(workers) >= want:
            return workers
        time.sleep(0.2)
    return workers


def _check_counts(master_json: str, dump: Path, n_workers: int) -> None:
    stats = json.loads(master_json)
    dumps = sorted(dump.glob("worker-*.prom"))
    assert len(dumps) == n_workers, [p.name for p in dump.iterdir()]
    workers = [parse_prom(p.read_text()) for p in dumps]
    assert all(total(w, "xfer_client_requests_total") > 0 for w in workers), "a worker did no calls"
    # Locust's statistics hold whole operations only; the chunk calls are in the client metrics, apart.
    assert {e["name"] for e in stats} == {"Upload", "Download", "Echo"}
    for chunk in ("UploadChunk", "DownloadChunk"):
        assert sum(total(w, "xfer_client_requests_total", method=chunk) for w in workers) > 0, chunk
    for e in stats:
        name = e["name"]
        summed = sum(total(w, "xfer_client_requests_total", transport="grpc", method=name) for w in workers)
        n_failed = sum(failed(w, method=name) for w in workers)
        assert e["num_requests"] == summed, (e["name"], e["num_requests"], summed)
        assert e["num_failures"] == n_failed == 0, e["name"]
    operations = sum(total(w, "xfer_client_requests_total", method=m) for w in workers
                     for m in ("Upload", "Download", "Echo"))
    assert sum(e["num_requests"] for e in stats) == operations


@dataclass
class MasterRun:
    metrics_port: int
    listed: dict[str, str]  # worker -> its /metrics URL, as the master listed them during the run
    worker_info: dict[str, list[Sample]]  # each listed URL's scrape during the run
    master_info: list[Sample]  # the master's /metrics during the run
    returncodes: list[int | None]  # master, workers
    out: str
    err: str
    dump: Path  # where each process dumped its metrics at exit


def _master(mport: int, metrics_port: int, tmp: Path, *args: str) -> subprocess.Popen[str]:
    """A headless loadgen master expecting two workers on `mport`."""
    return subprocess.Popen(
        locust_cmd("--master", "--expect-workers", "2", "--master-bind-host", "127.0.0.1",
                   "--master-bind-port", str(mport), "--headless", "--json", "--xfer-metrics-port", str(metrics_port),
                   "--xfer-metrics-dump", str(tmp), *args),
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def _worker(mport: int, metrics_port: int, tmp: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        locust_cmd("--worker", "--master-host", "127.0.0.1", "--master-port", str(mport),
                   "--xfer-metrics-port", str(metrics_port), "--xfer-metrics-dump", str(tmp)),
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def _master_and_two_workers(tmp: Path) -> MasterRun:
    with running_server("xferd-go") as go_server:
        mport, metrics_port = free_port(), free_port()
        master_url = f"http://127.0.0.1:{metrics_port}/metrics"
        master = _master(mport, metrics_port, tmp, "--host", go_server.target("grpc"), "-u", "6", "-r", "6",
                         "-t", f"{MASTER_RUN_S}s", "--xfer-check", "failures==0", *COMMON)
        workers = [_worker(mport, metrics_port, tmp) for _ in range(2)]
        procs = [master, *workers]
        try:
            listed = _workers_from_master(master_url, 2, time.monotonic() + 30)
            worker_info, master_info = {}, []
            if len(listed) == 2:  # else the run has ended: the test says so
                worker_info = {url: parse_prom(fetch(url)) for url in listed.values()}
                master_info = parse_prom(fetch(master_url))
            out, err = master.communicate(timeout=MASTER_RUN_S + 60)
            for w in workers:
                w.wait(timeout=30)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    return MasterRun(metrics_port, listed, worker_info, master_info, [p.returncode for p in procs], out, err, tmp)


@in_background(_master_and_two_workers)
def test_master_and_two_workers(runs: Runs, request: pytest.FixtureRequest) -> None:
    run: MasterRun = runs[request.node]
    assert len(run.listed) == 2, run.listed
    for url in run.listed.values():  # worker ports: the first free ones after the master's
        assert int(url.rsplit(":", 1)[1].split("/")[0]) > run.metrics_port
        assert total(run.worker_info[url], "xfer_client_info", role="worker") == 1
    assert total(run.master_info, "xfer_client_info", role="master") == 1
    assert run.returncodes[0] == 0, run.err[-3000:]
    assert run.returncodes[1:] == [0, 0]
    assert "said no hello" not in run.err  # the master held the run until both had
    _check_counts(run.out, run.dump, 2)
    # The master's own summary of the run: its workers' whole operations (the calls a user has in flight and
    # one more may land between the worker's last report and Locust's final table).
    locust_total = sum(e["num_requests"] for e in json.loads(run.out))
    slack = (int(option("grpc_inflight").default) + 1) * 6
    assert abs(summary_counts(run.err)["operations"] - locust_total) <= slack, (summary_counts(run.err), locust_total)


def _master_with_a_foreign_worker(tmp: Path) -> tuple[list[int | None], str, str]:
    """A master, a loadgen worker and a worker that runs another locustfile (returncodes, master's stderr, the
    foreign worker's stdout)."""
    with running_server("xferd-go") as go_server:
        mport, metrics_port = free_port(), free_port()
        master = _master(mport, metrics_port, tmp, "--host", go_server.target("grpc"), "-u", "2", "-r", "2",
                         "-t", "1s", "--xfer-mix", "echo:1")
        foreign = subprocess.Popen(
            [LOCUST, "-f", str(FOREIGN), "--worker", "--master-host", "127.0.0.1", "--master-port", str(mport)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, stdin=subprocess.DEVNULL)
        procs = [master, _worker(mport, metrics_port, tmp), foreign]
        try:
            _, err = master.communicate(timeout=60)
            foreign_out, _ = foreign.communicate(timeout=30)
            procs[1].wait(timeout=30)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    return [p.returncode for p in procs], err, foreign_out


@in_background(_master_with_a_foreign_worker)
def test_a_worker_running_another_locustfile_is_named_before_the_run(runs: Runs, request: pytest.FixtureRequest) -> None:
    """Locust counts a worker ready when it connects, before its init: the master holds the run for each worker's
    hello (the end of loadgen's init), or its first report without xfer figures, which names it as foreign."""
    returncodes, err, foreign_out = runs[request.node]
    assert returncodes == [0, 0, 0], err[-3000:]
    (foreign_id,) = [line.split()[1] for line in foreign_out.splitlines() if line.startswith("foreign-worker-id ")]
    (warning,) = [line for line in err.splitlines() if "another locustfile" in line]
    assert "1 of 2 workers" in warning and warning.endswith(f": {foreign_id}"), warning
    assert "said no hello" not in err  # the master knew the foreign worker at once: it did not wait it out
    assert summary_counts(err)["operations"] > 0  # the loadgen worker's calls


def _processes_two(tmp: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    with running_server("xferd-go") as go_server:
        mport, metrics_port = free_port(), free_port()
        return subprocess.run(
            locust_cmd("--processes", "2", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(mport),
                       "--master-port", str(mport), "--headless", "--host", go_server.target("grpc"),
                       "-u", "4", "-r", "4", "-t", f"{PROCESSES_RUN_S}s", "--json",
                       "--xfer-metrics-port", str(metrics_port), "--xfer-metrics-dump", str(tmp), *COMMON),
            cwd=ROOT, capture_output=True, text=True, timeout=PROCESSES_RUN_S + 60, stdin=subprocess.DEVNULL), tmp


@in_background(_processes_two)
def test_processes_two(runs: Runs, request: pytest.FixtureRequest) -> None:
    r, dump = runs[request.node]
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(list(dump.glob("master-*.prom"))) == 1
    # --processes children print their own (empty) --json lists too; the master's is the last one.
    master_json = r.stdout[r.stdout.rindex("[\n"):]
    _check_counts(master_json, dump, 2)
