"""--xfer-connections user | call | pool:N against real servers: the connections the client says it opened are
the ones the server accepted (xfer_connections_accepted_total), and as many as the strategy should make."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.loadgen.support import Sample, fetch, parse_prom, run_locust, settled_metrics, total
from tests.support.servers import RunningServer, running_server

RUN_S = 3
USERS = 3
GRPC_INFLIGHT = 2
# (server, transport, gRPC engine)
SETUPS = [("xferd-go", "frame", "aio"), ("xferd-c", "frame", "aio"), ("xferd-go", "grpc", "aio"),
          ("xferd-go", "grpc", "gevent")]


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, RunningServer]]:
    with running_server("xferd-go", ["--store=mem"]) as go, running_server("xferd-c") as c:
        yield {"xferd-go": go, "xferd-c": c}


def _accepted(server: RunningServer) -> float:
    return total(settled_metrics(server.metrics_url), "xfer_connections_accepted_total")


def _run(server: RunningServer, transport: str, engine: str, strategy: str, tmp_path: Path, users: int = USERS,
         ) -> tuple[float, float, list[Sample]]:
    """One Locust run of echo users; returns (connections the server accepted meanwhile, operations Locust
    completed, the client's metrics dumped at exit)."""
    before = _accepted(server)
    r = run_locust(["--headless", "--json", "-t", f"{RUN_S}s", "-u", str(users), "-r", str(users),
                    "--host", server.target(transport), "--xfer-mix", "echo:1", "--xfer-connections", strategy,
                    "--xfer-grpc-engine", engine, "--xfer-grpc-inflight", str(GRPC_INFLIGHT),
                    "--xfer-metrics-port", "0", "--xfer-metrics-dump", str(tmp_path)], timeout=RUN_S + 60)
    assert r.returncode == 0, r.stderr[-3000:]
    stats = {e["name"]: e for e in json.loads(r.stdout)}
    echo = stats["Echo"]
    assert echo["num_failures"] == 0, r.stderr[-3000:]
    (dump,) = tmp_path.glob("local-*.prom")
    _promtool_clean(dump.read_text())
    return _accepted(server) - before, float(echo["num_requests"]), parse_prom(dump.read_text())


def _promtool_clean(text: str) -> None:
    out = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def _ids(setup: tuple[str, str, str]) -> str:
    return "-".join(setup)


@pytest.mark.parametrize("setup", SETUPS, ids=_ids)
def test_user_opens_one_connection_per_user(servers: dict[str, RunningServer], tmp_path: Path,
                                            setup: tuple[str, str, str]) -> None:
    name, transport, engine = setup
    accepted, done, client = _run(servers[name], transport, engine, "user", tmp_path)
    assert done > 0
    assert accepted == USERS
    assert total(client, "xfer_client_connections_opened_total", transport=transport) == USERS
    assert total(client, "xfer_client_reconnects_total", transport=transport) == 0
    _promtool_clean(fetch(servers[name].metrics_url))  # the servers' new xfer_connections_accepted_total too


@pytest.mark.parametrize("setup", SETUPS, ids=_ids)
def test_pool_opens_exactly_its_size(servers: dict[str, RunningServer], tmp_path: Path,
                                     setup: tuple[str, str, str]) -> None:
    name, transport, engine = setup
    accepted, done, client = _run(servers[name], transport, engine, "pool:4", tmp_path, users=6)
    assert done > 0
    assert accepted == 4  # one Locust process: one pool of four, whatever the number of users
    assert total(client, "xfer_client_connections_opened_total", transport=transport) == 4
    assert total(client, "xfer_client_reconnects_total", transport=transport) == 0


@pytest.mark.parametrize("setup", [s for s in SETUPS if s[2] == "aio"], ids=_ids)
def test_call_opens_one_connection_per_operation(servers: dict[str, RunningServer], tmp_path: Path,
                                                 setup: tuple[str, str, str]) -> None:
    name, transport, engine = setup
    accepted, done, client = _run(servers[name], transport, engine, "call", tmp_path)
    assert done > 10
    # An operation cut off by the stop has its connection but no report: at most one per user on frame (one
    # operation at a time), GRPC_INFLIGHT per user on gRPC aio (whose users report theirs before stopping).
    in_flight = USERS * (GRPC_INFLIGHT if transport == "grpc" else 1)
    assert done <= accepted <= done + in_flight
    # A connect the stop cut off (the kernel finished the handshake, the greenlet was killed before it counted).
    opened = total(client, "xfer_client_connections_opened_total", transport=transport)
    assert accepted - in_flight <= opened <= accepted
    assert opened >= done
    assert total(client, "xfer_client_reconnects_total", transport=transport) == 0


def test_call_on_the_gevent_engine_is_refused(servers: dict[str, RunningServer]) -> None:
    r = run_locust(["--headless", "-t", "1s", "-u", "1", "--host", servers["xferd-go"].target("grpc"),
                    "--xfer-connections", "call", "--xfer-grpc-engine", "gevent", "--xfer-metrics-port", "off"])
    assert r.returncode != 0
    assert "--xfer-connections call with --xfer-grpc-engine gevent" in r.stderr


@pytest.mark.parametrize("bad", ["pool:0", "pool:x", "foo", "pool:", "pool:1025"])
def test_bad_strategies_are_refused(bad: str) -> None:
    r = run_locust(["--headless", "-t", "1s", "-u", "1", "--host", "frame://127.0.0.1:1",
                    "--xfer-connections", bad, "--xfer-metrics-port", "off"])
    assert r.returncode != 0
    assert f"--xfer-connections {bad!r}: want user" in r.stderr, r.stderr[-2000:]


def test_a_refused_connect_is_a_failure_with_its_reason(tmp_path: Path) -> None:
    from tests.loadgen.support import free_port
    port = free_port()  # nothing listens there
    r = run_locust(["--headless", "--json", "-t", "2s", "-u", "1", "--host", f"frame://127.0.0.1:{port}",
                    "--xfer-mix", "echo:1", "--xfer-connections", "call", "--xfer-metrics-port", "off"])
    echo = {e["name"]: e for e in json.loads(r.stdout)}["Echo"]
    assert echo["num_failures"] == echo["num_requests"] > 0
    assert "Connection refused" in r.stderr or "Connection refused" in json.dumps(echo), r.stderr[-2000:]


@pytest.mark.parametrize("transport", ["frame", "grpc"])
def test_connections_cut_by_the_network_are_reconnects(servers: dict[str, RunningServer], tmp_path: Path,
                                                       transport: str) -> None:
    """Toxiproxy's limit_data closes every connection after 20 kB from the server: each user's client
    connects again, and each connection after its first is a reconnect, counted as the server saw it."""
    from tests.support.toxiproxy import ProxiedServer, Toxic, running_toxiproxy

    server = servers["xferd-go"]
    with running_toxiproxy() as tp:
        proxy = ProxiedServer.create(tp, server, transport)
        with proxy.toxic(Toxic("limit_data", {"bytes": 20000})):
            before = _accepted(server)
            r = run_locust(["--headless", "--json", "-t", "4s", "-u", "2", "-r", "2", "--host", proxy.target,
                            "--xfer-mix", "echo:1", "--xfer-connections", "user", "--xfer-metrics-port", "0",
                            "--xfer-metrics-dump", str(tmp_path)], timeout=70)
            accepted = _accepted(server) - before
    assert r.returncode in (0, 1), r.stderr[-3000:]  # 1: Locust's own "some requests failed"
    (dump,) = tmp_path.glob("local-*.prom")
    client = parse_prom(dump.read_text())
    opened = total(client, "xfer_client_connections_opened_total", transport=transport)
    reconnects = total(client, "xfer_client_reconnects_total", transport=transport)
    assert reconnects >= 2, r.stderr[-2000:]
    assert reconnects == opened - 2  # every connection after each user's first
    # The server also saw connects the stop cut off (one per user). A gRPC channel whose connection was cut
    # may also reconnect by itself (grpc-core leaves TRANSIENT_FAILURE at once when nothing backs off) before
    # the user replaces it: at most once per replaced channel.
    own_reconnects = reconnects if transport == "grpc" else 0
    assert opened <= accepted <= opened + 2 + own_reconnects
