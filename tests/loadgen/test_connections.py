"""--xfer-connections user | call | pool:N against real servers: the connections the client says it opened are
the ones the server accepted (xfer_connections_accepted_total), and as many as the strategy should make.

Every run gets a server of its own (so what it accepted is what that run made) and goes through the session's
`runs` (tests/loadgen/harness.py): two Locust processes at a time. Refusals of --xfer-connections values are
checked in-process (tests/loadgen/test_cli.py proves the `locust` command refuses through the same parser)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.loadgen.harness import Runs, in_background, runs_for
from tests.loadgen.inprocess import refusal
from tests.loadgen.support import (
    Sample,
    fetch,
    free_port,
    parse_prom,
    run_locust,
    settled_metrics,
    total,
)
from tests.support.servers import running_server

# Each user connects at its start and calls at once, so a second counts every user's connections; the
# counts below are exact whatever the run's length (compared as counts, never as speeds).
RUN_S = 1
USERS = 3
GRPC_INFLIGHT = 2
SERVER_ARGS = {"xferd-go": ["--store=mem"], "xferd-c": []}
# (server, transport)
SETUPS = [("xferd-go", "frame"), ("xferd-c", "frame"), ("xferd-go", "grpc")]


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return runs_for(request, tmp_path_factory)


def _accepted(samples: list[Sample]) -> float:
    return total(samples, "xfer_connections_accepted_total")


@dataclass
class Run:
    """One Locust run of echo users against a server of its own."""

    proc: subprocess.CompletedProcess[str]
    accepted: float  # connections the server accepted during the run (counted once it settled)
    dumps: list[str]  # the client's metrics, dumped at exit (one file expected)
    server_metrics: str  # the server's /metrics after the run

    def echo(self) -> dict[str, Any]:
        echo: dict[str, Any] = {e["name"]: e for e in json.loads(self.proc.stdout)}["Echo"]
        return echo

    def client(self) -> list[Sample]:
        (dump,) = self.dumps
        return parse_prom(dump)


def _dumps(folder: Path) -> list[str]:
    return [p.read_text() for p in folder.glob("local-*.prom")]


def _echo_run(tmp: Path, name: str, transport: str, users: int, options: list[str]) -> Run:
    """Locust's echo users with `options` against a server of its own."""
    with running_server(name, SERVER_ARGS[name]) as server:
        before = _accepted(parse_prom(fetch(server.metrics_url)))  # no client knows this server yet: 0
        r = run_locust(["--headless", "--json", "-t", f"{RUN_S}s", "-u", str(users), "-r", str(users),
                        "--host", server.target(transport), "--xfer-mix", "echo:1", *options,
                        "--xfer-metrics-port", "0", "--xfer-metrics-dump", str(tmp)], timeout=RUN_S + 60)
        accepted = _accepted(settled_metrics(server.metrics_url)) - before
        server_metrics = fetch(server.metrics_url)
    return Run(r, accepted, _dumps(tmp), server_metrics)


def _strategy_run(tmp: Path, setup: tuple[str, str], strategy: str, users: int = USERS) -> Run:
    name, transport = setup
    return _echo_run(tmp, name, transport, users, ["--xfer-connections", strategy,
                                                   "--xfer-grpc-inflight", str(GRPC_INFLIGHT)])


def _checked(run: Run) -> tuple[float, float, list[Sample]]:
    """(connections the server accepted meanwhile, operations Locust completed, the client's metrics dumped at
    exit), once the run is seen to have passed with no failed call and a well-formed dump."""
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    echo = run.echo()
    assert echo["num_failures"] == 0, run.proc.stderr[-3000:]
    (dump,) = run.dumps
    _promtool_clean(dump)
    return run.accepted, float(echo["num_requests"]), run.client()


def _promtool_clean(text: str) -> None:
    out = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def _ids(setup: tuple[str, str]) -> str:
    return "-".join(setup)


@pytest.mark.parametrize("setup", SETUPS, ids=_ids)
@in_background(lambda tmp, setup: _strategy_run(tmp, setup, "user"))
def test_user_opens_one_connection_per_user(runs: Runs, request: pytest.FixtureRequest,
                                            setup: tuple[str, str]) -> None:
    transport = setup[1]
    run = runs[request.node]
    accepted, done, client = _checked(run)
    assert done > 0
    assert accepted == USERS
    assert total(client, "xfer_client_connections_opened_total", transport=transport) == USERS
    assert total(client, "xfer_client_reconnects_total", transport=transport) == 0
    _promtool_clean(run.server_metrics)  # the servers' new xfer_connections_accepted_total too


DEFAULT_USERS = 16


def _default_grpc_run(tmp: Path) -> Run:
    """16 gRPC echo users with every connection option left at its default."""
    return _echo_run(tmp, "xferd-go", "grpc", DEFAULT_USERS, [])


@in_background(_default_grpc_run)
def test_grpc_users_get_a_connection_each_by_default(runs: Runs, request: pytest.FixtureRequest) -> None:
    """The default meaning of a gRPC user is one connection of its own: 16 users, 16 connections (channels that
    shared one subchannel would be one connection, and one Locust would measure a single HTTP/2 stream's
    ceiling)."""
    accepted, done, client = _checked(runs[request.node])
    assert done > 0
    assert accepted == DEFAULT_USERS
    assert total(client, "xfer_client_connections_opened_total", transport="grpc") == DEFAULT_USERS


@pytest.mark.parametrize("setup", SETUPS, ids=_ids)
@in_background(lambda tmp, setup: _strategy_run(tmp, setup, "pool:4", users=6))
def test_pool_opens_exactly_its_size(runs: Runs, request: pytest.FixtureRequest,
                                     setup: tuple[str, str]) -> None:
    transport = setup[1]
    accepted, done, client = _checked(runs[request.node])
    assert done > 0
    assert accepted == 4  # one Locust process: one pool of four, whatever the number of users
    assert total(client, "xfer_client_connections_opened_total", transport=transport) == 4
    assert total(client, "xfer_client_reconnects_total", transport=transport) == 0


@pytest.mark.parametrize("setup", SETUPS, ids=_ids)
@in_background(lambda tmp, setup: _strategy_run(tmp, setup, "call"))
def test_call_opens_one_connection_per_operation(runs: Runs, request: pytest.FixtureRequest,
                                                 setup: tuple[str, str]) -> None:
    transport = setup[1]
    accepted, done, client = _checked(runs[request.node])
    assert done > 10
    # An operation cut off by the stop has its connection but no report: at most one per user on frame (one
    # operation at a time), GRPC_INFLIGHT per user on gRPC (whose users report theirs before stopping).
    in_flight = USERS * (GRPC_INFLIGHT if transport == "grpc" else 1)
    assert done <= accepted <= done + in_flight
    # A connect the stop cut off (the kernel finished the handshake, the greenlet was killed before it counted).
    opened = total(client, "xfer_client_connections_opened_total", transport=transport)
    assert accepted - in_flight <= opened <= accepted
    assert opened >= done
    assert total(client, "xfer_client_reconnects_total", transport=transport) == 0


# ---- refusals: no server needed --------------------------------------------------------------------------

REFUSAL_BASE = ["--headless", "-t", "1s", "-u", "1", "--xfer-metrics-port", "off"]


@pytest.mark.parametrize("bad", ["pool:0", "pool:x", "foo", "pool:", "pool:1025"])
def test_bad_strategies_are_refused(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    # Refused by argparse, through the type loadgen registers for every option: the real command's path for
    # such a value is proven in tests/loadgen/test_cli.py (test_the_locust_command_refuses_the_same_way).
    err = refusal([*REFUSAL_BASE, "--host", "frame://127.0.0.1:1", "--xfer-connections", bad], capsys)
    assert f"--xfer-connections {bad!r}: want user" in err, err[-2000:]


# ---- failures and reconnects -----------------------------------------------------------------------------

def _refused_run(tmp: Path) -> subprocess.CompletedProcess[str]:
    port = free_port()  # nothing listens there
    return run_locust(["--headless", "--json", "-t", f"{RUN_S}s", "-u", "1", "--host", f"frame://127.0.0.1:{port}",
                       "--xfer-mix", "echo:1", "--xfer-connections", "call", "--xfer-metrics-port", "off"])


@in_background(_refused_run)
def test_a_refused_connect_is_a_failure_with_its_reason(runs: Runs, request: pytest.FixtureRequest) -> None:
    r = runs[request.node]
    echo = {e["name"]: e for e in json.loads(r.stdout)}["Echo"]
    assert echo["num_failures"] == echo["num_requests"] > 0
    assert "Connection refused" in r.stderr or "Connection refused" in json.dumps(echo), r.stderr[-2000:]


CUT_RUN_S = 1  # a connection carries about 70 echo calls before it is cut: a second saw some 15 reconnects (loaded)


def _cut_run(tmp: Path, transport: str) -> Run:
    """Toxiproxy's limit_data closes every connection after 20 kB from the server."""
    from tests.support.toxiproxy import ProxiedServer, Toxic, running_toxiproxy

    with running_server("xferd-go", SERVER_ARGS["xferd-go"]) as server, running_toxiproxy() as tp:
        proxy = ProxiedServer.create(tp, server, transport)
        with proxy.toxic(Toxic("limit_data", {"bytes": 20000})):
            before = _accepted(parse_prom(fetch(server.metrics_url)))  # no client has come through yet: 0
            r = run_locust(["--headless", "--json", "-t", f"{CUT_RUN_S}s", "-u", "2", "-r", "2",
                            "--host", proxy.target, "--xfer-mix", "echo:1", "--xfer-connections", "user",
                            "--xfer-metrics-port", "0", "--xfer-metrics-dump", str(tmp)], timeout=70)
            accepted = _accepted(settled_metrics(server.metrics_url)) - before
        server_metrics = fetch(server.metrics_url)
    return Run(r, accepted, _dumps(tmp), server_metrics)


@pytest.mark.parametrize("transport", ["frame", "grpc"])
@in_background(_cut_run)
def test_connections_cut_by_the_network_are_reconnects(runs: Runs, request: pytest.FixtureRequest,
                                                       transport: str) -> None:
    """Each user's client connects again after a cut, and each connection after its first is a reconnect,
    counted as the server saw it."""
    run = runs[request.node]
    r, accepted = run.proc, run.accepted
    assert r.returncode in (0, 1), r.stderr[-3000:]  # 1: Locust's own "some requests failed"
    client = run.client()
    opened = total(client, "xfer_client_connections_opened_total", transport=transport)
    reconnects = total(client, "xfer_client_reconnects_total", transport=transport)
    assert reconnects >= 2, r.stderr[-2000:]
    assert reconnects == opened - 2  # every connection after each user's first
    # The server also saw connects the stop cut off (one per user). A gRPC channel whose connection was cut
    # may also reconnect by itself (grpc-core leaves TRANSIENT_FAILURE at once when nothing backs off) before
    # the user replaces it: at most once per replaced channel.
    own_reconnects = reconnects if transport == "grpc" else 0
    assert opened <= accepted <= opened + 2 + own_reconnects
