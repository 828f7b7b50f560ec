"""deploy/docker-compose.yml up for real: both servers, a Locust master with two workers and the containerised
Prometheus, on the project's engine (engine.ensure(): DOCKER_HOST, else its own Podman service), driven by
Debian's docker-compose 1.29 over the Docker API.

Why docker-compose and not podman-compose: docker-compose talks to the engine's Docker API (the same socket
the runner and `xferbench images build` use, so whatever engine DOCKER_HOST names), while podman-compose
drives the `podman` command line (the host's default runtime, crun, which fails on this cgroup layout) and
only works with Podman.

The images come from `xferbench images build` (images.ensure builds what is missing; that one-time build is
not part of this test's time). Then: `up` under a project name of this test's own, a bounded headless load
started from the Locust master's web API (run_time, so it stops by itself), a few host-side calls on the
published ports (one of which must fail, so the error panels have a series), and the checks: every
Prometheus target up, every recording rule and every dashboard query returns series. `down -v` last, and
nothing with the project's label or name is left: containers, networks, volumes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import docker
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
from xferbench.run.containers import engine, images
from xferbench.run.process import free_port

COMPOSE = ROOT / "deploy" / "docker-compose.yml"
PROJECT = f"xferbench-composetest-{os.getpid()}"
WORKERS = 2
COMPOSE_TIMEOUT_S = 120.0  # up or down
READY_TIMEOUT_S = 60.0     # Locust workers connected, Prometheus answering, every target up
SETTLE_TIMEOUT_S = 60.0    # every rule has a series (5 s scrapes and evaluations, 1m rates)
LOAD_RUN_S = 40            # the Locust run stops by itself after this long
HOST_CALLS = 40            # host-side calls per server (bounded)
PORTS = ("XFERD_GO_GRPC", "XFERD_GO_FRAME", "XFERD_GO_METRICS", "XFERD_C_FRAME", "XFERD_C_METRICS", "LOCUST",
         "PROMETHEUS", "GRAFANA")
# The first test also waits for the fixture: images.ensure may build (~7 min from scratch here), then up.
# The whole stack up, loaded and down: about two minutes, so `make test-slow`.
pytestmark = [pytest.mark.timeout(1200), pytest.mark.slow]
RULES = rule_exprs()
QUERIES = [q for path in DASHBOARDS for q in panel_queries(path)]


def docker_host() -> str:
    """The engine engine.ensure() found, as docker-compose's DOCKER_HOST: the one given, else the first socket
    that exists in ensure()'s order (it has just answered)."""
    if os.environ.get("DOCKER_HOST"):
        return os.environ["DOCKER_HOST"]
    found = next((s for s in (engine.SOCKET, *engine.KNOWN_SOCKETS) if s.exists()), None)
    assert found, "engine.ensure() answered, but none of its sockets exists"
    return f"unix://{found}"


@dataclass
class Stack:
    client: docker.DockerClient
    env: dict[str, str]
    ports: dict[str, int]
    down_done: bool = False
    log: list[str] = field(default_factory=list)

    def compose(self, *args: str, timeout: float = COMPOSE_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        exe = shutil.which("docker-compose")
        assert exe, "docker-compose is not installed (apt-get install docker-compose); this test does not skip"
        r = subprocess.run([exe, "-p", PROJECT, "-f", str(COMPOSE), *args], env=self.env, capture_output=True,
                           text=True, timeout=timeout)
        self.log.append(f"$ docker-compose {' '.join(args)} -> {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
        return r

    def logs(self) -> str:
        r = self.compose("logs", "--no-color", "--tail=15")
        return r.stdout[-6000:]

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    def down(self) -> subprocess.CompletedProcess[str]:
        self.down_done = True
        return self.compose("down", "-v", "--remove-orphans", "--timeout", "10")

    def leftovers(self) -> dict[str, list[str]]:
        """Containers, networks and volumes of this project: by compose's label, and by name too."""
        label: dict[str, str | list[str] | bool] = {"label": f"com.docker.compose.project={PROJECT}"}
        by_name: dict[str, str | list[str] | bool] = {"name": PROJECT}
        containers = self.client.containers.list(all=True, filters=label) + \
            self.client.containers.list(all=True, filters=by_name)
        networks = self.client.networks.list(filters=label) + self.client.networks.list(names=[f"{PROJECT}_xferbench"])
        volumes = [v for v in self.client.volumes.list() if str(v.name).startswith(PROJECT)
                   or (v.attrs.get("Labels") or {}).get("com.docker.compose.project") == PROJECT]
        return {"containers": sorted({str(c.name) for c in containers}),
                "networks": sorted({str(n.name) for n in networks}),
                "volumes": sorted({str(v.name) for v in volumes})}


def _get_json(url: str, data: dict[str, str] | None = None) -> Any:
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    with urllib.request.urlopen(url, data=body, timeout=5) as r:
        return json.loads(r.read())


def _poll(what: str, fn: Any, timeout: float, stack: Stack) -> Any:
    """fn() until it returns something true; its last value or error is in the failure message."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except OSError as e:
            last = f"{type(e).__name__}: {e}"
        time.sleep(0.5)
    raise AssertionError(f"{what} not within {timeout:.0f}s (last: {last})\n{stack.logs()}")


def _host_calls(stack: Stack) -> None:
    """Calls on the published ports: both servers get traffic, and a stat of a missing file fails."""
    from py_client import XferError, connect

    for target in (f"grpc://127.0.0.1:{stack.ports['XFERD_GO_GRPC']}",
                   f"frame://127.0.0.1:{stack.ports['XFERD_C_FRAME']}"):
        with connect(target) as c:
            for i in range(HOST_CALLS):
                c.echo(b"x" * 64)
                if i % 10 == 0:
                    c.upload(f"compose-{i}.bin", bytes(range(256)) * 256, chunk_size=16384)
                    with pytest.raises(XferError):
                        c.stat("no-such-file")


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    client = engine.ensure()
    images.ensure(client, ["xferd-go", "xferd-c", "locust", "prometheus"])
    ports = {p: free_port() for p in PORTS}
    env = {**os.environ, "DOCKER_HOST": docker_host(), **{f"XFERBENCH_{k}_PORT": str(v) for k, v in ports.items()}}
    s = Stack(client, env, ports)
    try:
        r = s.compose("up", "-d", "--no-build", "--scale", f"locust-worker={WORKERS}")
        assert r.returncode == 0, "\n".join(s.log) + s.logs()
        _poll(f"{WORKERS} Locust workers connected",
              lambda: len(_get_json(f"{s.url('LOCUST')}/stats/requests").get("workers", [])) == WORKERS,
              READY_TIMEOUT_S, s)
        started = _get_json(f"{s.url('LOCUST')}/swarm", {
            "user_count": "4", "spawn_rate": "4", "host": "grpc://xferd-go:50051", "run_time": f"{LOAD_RUN_S}s"})
        assert started.get("success"), started
        _host_calls(s)
        yield s
    finally:
        if not s.down_done:
            s.down()


@pytest.fixture(scope="module")
def prom(stack: Stack) -> PromAPI:
    api = PromAPI(stack.url("PROMETHEUS"))
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    for record, _ in RULES:
        api.wait_for(record, max(0.0, deadline - time.monotonic()))
    return api


def test_every_target_is_up(stack: Stack) -> None:
    def targets() -> list[dict[str, Any]] | None:
        active: list[dict[str, Any]] = _get_json(f"{stack.url('PROMETHEUS')}/api/v1/targets")["data"]["activeTargets"]
        jobs = sorted(t["labels"]["job"] for t in active)
        want = sorted(["prometheus"] + ["xferd"] * 2 + ["locust"] * (1 + WORKERS))
        return active if jobs == want and all(t["health"] == "up" for t in active) else None

    try:
        _poll("every target (2 servers, the Locust master and workers, Prometheus) up", targets,
              READY_TIMEOUT_S, stack)
    except AssertionError:
        active = _get_json(f"{stack.url('PROMETHEUS')}/api/v1/targets")["data"]["activeTargets"]
        raise AssertionError([(t["scrapeUrl"], t["health"], t["lastError"]) for t in active]) from None


def test_locust_ran_calls(stack: Stack) -> None:
    stats = _poll("Locust requests", lambda: _get_json(f"{stack.url('LOCUST')}/stats/requests").get("total_rps"),
                  READY_TIMEOUT_S, stack)
    assert stats > 0


@pytest.mark.parametrize(("record", "expr"), RULES, ids=[r for r, _ in RULES])
def test_recording_rule_has_series(prom: PromAPI, record: str, expr: str) -> None:
    assert prom.wait_for(record, 10.0), f"rule {record} recorded nothing"


@pytest.mark.parametrize("query", QUERIES, ids=[q.name for q in QUERIES])
def test_panel_query_has_series(prom: PromAPI, query: PanelQuery) -> None:
    dash = next(load_dashboard(p) for p in DASHBOARDS if load_dashboard(p)["uid"] == query.dashboard)
    expr = substitute(query.expr, resolve_variables(prom, dash))
    assert "$" not in expr, f"unsubstituted variable left in {expr}"
    assert prom.wait_for(expr, 10.0), f"{query.name}: no series for\n{expr}"


def test_zz_down_leaves_nothing(stack: Stack) -> None:
    """Last in this module: `down -v` removes every container, the network and the volumes."""
    assert stack.leftovers()["containers"], "the stack was not up before `down`"
    r = stack.down()
    assert r.returncode == 0, "\n".join(stack.log)
    left = stack.leftovers()
    assert not any(left.values()), f"left behind after down: {left}"
