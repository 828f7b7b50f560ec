"""Conformance fixtures: every test runs once per (server, transport) of the registry."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from py_client import FrameClient, GrpcClient, connect
from tests.support.pool import ServerPool, module_pool
from tests.support.servers import RunningServer, server_transports

PAIRS = server_transports()


pool = module_pool()  # one process per server kind for the whole module, with a disk store


@pytest.fixture(params=PAIRS, ids=[f"{s}-{t}" for s, t in PAIRS])
def pair(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def live(pool: ServerPool, pair: tuple[str, str]) -> RunningServer:
    return pool.get(pair[0])


@pytest.fixture
def target(live: RunningServer, pair: tuple[str, str]) -> str:
    return live.target(pair[1])


@pytest.fixture
def client(target: str) -> Iterator[GrpcClient | FrameClient]:
    with connect(target, timeout=60) as c:
        yield c
