"""Every recording rule and every dashboard query, evaluated by a real Prometheus scraping real processes.

One module-scoped stack: xferd-go and xferd-c on free ports, a Locust run (when loadgen/ has locustfiles)
exporting client metrics, a bounded py_client load on every transport (including calls that must fail,
so error panels have something to show), and Debian's Prometheus with deploy/prometheus/ rewritten to those
ports and a 1 s scrape interval. Each rule and each panel query must return at least one series, with the
dashboard's template variables set to All and to each real server in turn.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.deploy.promcheck import (
    DASHBOARDS,
    ROOT,
    PromAPI,
    load_dashboard,
    panel_queries,
    resolve_variables,
    rule_exprs,
    substitute,
)
from tests.support.servers import RunningServer, running_server
from xferbench.measure.scrape import scrape
from xferbench.run.process import free_port
from xferbench.tools.stack import running_prometheus

LOAD_MAX_S = 90.0         # the background load stops by itself after this long at most
LOAD_MAX_CALLS = 20_000   # ... or after this many calls per target
LOCUST_RUN_S = 90         # Locust's own -t: it exits by itself even if the fixture never stops it
SETTLE_TIMEOUT_S = 45.0   # every rule must have produced a series within this long
CLIENT_METRICS = ("xfer_client_", "locust_process_cpu")
SERVER_ONLY = {"go_": "xferd-go", "xfer_allocator_": "xferd-c"}  # metric families only one server exports
MISSING = "no-such-file"  # the load's call that must fail: Stat of a file nobody uploads
MISSING_ERROR = ("not_found", f'file "{MISSING}" not found')  # proto/PROTOCOL.md's code and message for it
COUNT_TIMEOUT_S = 10.0


def loadgen_ready() -> bool:
    d = ROOT / "loadgen"
    return d.is_dir() and any(not p.name.startswith("_") for p in d.rglob("*.py"))


# ------------------------------------------------------------------------------------------------ load


@dataclass
class LoadState:
    errors: list[str] = field(default_factory=list)
    refused: dict[str, int] = field(default_factory=dict)  # target → calls that failed as they must, so far


def _load_loop(target: str, stop: threading.Event, state: LoadState) -> None:
    from py_client import XferError, connect

    deadline = time.monotonic() + LOAD_MAX_S
    payload = bytes(range(256)) * 256  # 64 KiB
    try:
        with connect(target) as client:
            for i in range(LOAD_MAX_CALLS):
                if stop.is_set() or time.monotonic() > deadline:
                    return
                client.echo(b"x" * 64)
                client.stat("gen:65536:7")
                if i % 5 == 0:
                    client.upload(f"deploy-test-{i % 8}.bin", payload, chunk_size=16384)
                    client.download("gen:131072:3")
                if i % 10 == 0:  # a call that must fail: errors panels get a series
                    try:
                        client.stat(MISSING)
                    except XferError as e:
                        if (e.code, e.message) != MISSING_ERROR:
                            state.errors.append(f"{target}: Stat of a missing file: {e!r}, expected {MISSING_ERROR}")
                            return
                        state.refused[target] += 1  # counted once the failure is seen
                    else:
                        state.errors.append(f"{target}: Stat of a missing file succeeded")
                        return
    except Exception as e:  # reported by the fixture; the rest of the load goes on
        state.errors.append(f"{target}: {type(e).__name__}: {e}")


@contextmanager
def background_load(targets: list[str]) -> Iterator[LoadState]:
    stop = threading.Event()
    state = LoadState(refused=dict.fromkeys(targets, 0))
    threads = [threading.Thread(target=_load_loop, args=(t, stop, state), daemon=True) for t in targets]
    for t in threads:
        t.start()
    try:
        yield state
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)


@contextmanager
def locust_run(host: str, metrics_port: int, logdir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A small headless Locust run against `host` that serves client metrics on `metrics_port`."""
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    log = open(logdir / f"locust-{metrics_port}.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", str(ROOT / "loadgen"), "--headless", "--host", host,
         "-u", "2", "-r", "2", "-t", f"{LOCUST_RUN_S}s", "--only-summary", "--loglevel", "WARNING",
         "--xfer-metrics-port", str(metrics_port), "--xfer-sizes", "64KiB"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": pythonpath},
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


# ------------------------------------------------------------------------------------------------ stack


@dataclass
class Live:
    api: PromAPI
    client_metrics: bool
    servers: dict[str, RunningServer]
    load: LoadState


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    work = tmp_path_factory.mktemp("deploy-live")
    with ExitStack() as stack:
        go = stack.enter_context(running_server("xferd-go"))
        c = stack.enter_context(running_server("xferd-c"))
        clients: list[str] = []
        if loadgen_ready():
            for host in (go.target("grpc"), c.target("frame")):
                port = free_port()
                stack.enter_context(locust_run(host, port, work))
                clients.append(f"127.0.0.1:{port}")
        services = {"xferd-go": [go.addr("metrics")], "xferd-c": [c.addr("metrics")],
                    "locust-master": clients, "locust-worker": []}
        prom = stack.enter_context(running_prometheus(work / "prom", services=services, scrape_interval="1s"))
        load = stack.enter_context(background_load([go.target("grpc"), go.target("frame"), c.target("frame")]))
        api = PromAPI(prom.url)
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        for record, _ in rule_exprs():
            if not clients and record_is_client(record):
                continue
            api.wait_for(record, max(0.0, deadline - time.monotonic()))
        assert not load.errors, f"the test load failed: {load.errors}"
        yield Live(api, bool(clients), {"xferd-go": go, "xferd-c": c}, load)
        assert not load.errors, f"the test load failed: {load.errors}"


def record_is_client(expr: str) -> bool:
    return any(m in expr for m in CLIENT_METRICS)


def server_only(expr: str) -> str | None:
    names = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr))
    for prefix, server in SERVER_ONLY.items():
        if any(n.startswith(prefix) or f":{prefix}" in n for n in names):
            return server
    return None


def needs_client(live: Live, expr: str) -> None:
    assert not record_is_client(expr) or live.client_metrics, f"no client metrics to evaluate {expr!r} against"


# ------------------------------------------------------------------------------------------------ tests

RULES = rule_exprs()
QUERIES = [q for path in DASHBOARDS for q in panel_queries(path)]


def test_every_target_is_up(live: Live) -> None:
    res = live.api.query("up == 0")
    assert not res, f"targets down: {[r['metric'] for r in res]}"


@pytest.mark.parametrize(("record", "expr"), RULES, ids=[r for r, _ in RULES])
def test_recording_rule_has_series(live: Live, record: str, expr: str) -> None:
    needs_client(live, expr)
    assert live.api.wait_for(record, 10.0), f"rule {record} recorded nothing"
    # The expression itself, evaluated now, agrees that there is something to record.
    assert live.api.query(expr), f"rule {record}: its expression returns nothing"


@pytest.mark.parametrize("query", QUERIES, ids=[q.name for q in QUERIES])
def test_panel_query_all_values(live: Live, query) -> None:
    needs_client(live, query.expr)
    dash = next(load_dashboard(p) for p in DASHBOARDS if load_dashboard(p)["uid"] == query.dashboard)
    expr = substitute(query.expr, resolve_variables(live.api, dash))
    assert "$" not in expr, f"unsubstituted variable left in {expr}"
    assert live.api.query(expr), f"{query.name}: no series for\n{expr}"


@pytest.mark.parametrize("server", ["xferd-go", "xferd-c"])
@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.stem for p in DASHBOARDS])
def test_panel_queries_per_server(live: Live, path: Path, server: str) -> None:
    """With $server set to one real server, every query that applies to it still finds data."""
    dash = load_dashboard(path)
    values = resolve_variables(live.api, dash, pick={"server": server})
    empty = []
    for q in panel_queries(path):
        only = server_only(q.expr)
        if (only and only != server) or (record_is_client(q.expr) and not live.client_metrics):
            continue
        if not live.api.query(substitute(q.expr, values)):
            empty.append(q.name)
    assert not empty, f"$server={server}: no series for {empty}"


def test_configuration_variable_lists_each_server(live: Live) -> None:
    """The `config` variable offers one configuration per running server, from xfer_build_info."""
    configs = live.api.variable_values("label_values(instance:xfer_build_info:config, config)")
    assert len(configs) >= 1
    by_server = {r["metric"]["server"]: r["metric"]["config"]
                 for r in live.api.query("instance:xfer_build_info:config")}
    assert set(by_server) == {"xferd-go", "xferd-c"}, by_server
    assert by_server["xferd-c"].startswith("alloc=") and "alloc=" in by_server["xferd-go"]


def _not_found_stats(server: RunningServer, transport: str) -> float:
    snap = scrape(server.metrics_url)
    assert snap is not None, f"{server.metrics_url} does not answer"
    n = snap.sum("xfer_requests_total", lambda d: (d.get("transport"), d.get("method"), d.get("code"))
                 == (transport, "Stat", MISSING_ERROR[0]))
    return n or 0.0


@pytest.mark.parametrize(("server", "transport"), [("xferd-go", "grpc"), ("xferd-go", "frame"), ("xferd-c", "frame")])
def test_a_call_that_must_fail_fails_and_is_counted(live: Live, server: str, transport: str) -> None:
    """The load's Stat of a missing file fails with not_found and PROTOCOL.md's message every time (any other
    outcome is a load error, and ends that target's load), and the server's error counter moves with each:
    xfer_requests_total{method="Stat",code="not_found"} on that transport counts exactly the failures the load
    has seen. Only this load's thread for the target makes that call there, one call at a time; the server
    counts a call once it has written the answer, so the count may lag the client's by the call just answered
    (polled until it catches up) and lead it by the call in flight."""
    srv = live.servers[server]
    target = srv.target(transport)
    assert not live.load.errors, live.load.errors
    seen = live.load.refused[target]
    assert seen >= 1, f"{target}: the load has made no call that must fail yet"
    deadline = time.monotonic() + COUNT_TIMEOUT_S
    while (counted := _not_found_stats(srv, transport)) < seen:
        assert time.monotonic() < deadline, f"{target}: the server counted {counted:g} of {seen} failed calls"
        time.sleep(0.05)  # the poll interval between scrapes of /metrics
    assert counted <= live.load.refused[target] + 1, (target, counted, seen)
    assert not live.load.errors, live.load.errors
