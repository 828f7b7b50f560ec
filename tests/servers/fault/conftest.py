"""Fault fixtures: one server per kind and one toxiproxy-server per module, a proxy per (server, transport).

Each test gets the proxy of its pair with no toxic on it, and leaves it that way (teardown removes whatever
the test added), so the pairs share one toxiproxy-server without seeing each other's toxics.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.pool import ServerPool, module_pool
from tests.support.servers import server_transports
from tests.support.toxiproxy import ProxiedServer, Toxiproxy, running_toxiproxy

PAIRS = server_transports()


pool = module_pool()


@pytest.fixture(scope="module")
def toxiproxy() -> Iterator[Toxiproxy]:
    with running_toxiproxy() as tp:
        yield tp


@pytest.fixture(scope="module")
def proxies() -> dict[tuple[str, str], ProxiedServer]:
    return {}


@pytest.fixture(params=PAIRS, ids=[f"{s}-{t}" for s, t in PAIRS])
def proxied(request: pytest.FixtureRequest, pool: ServerPool, toxiproxy: Toxiproxy,
            proxies: dict[tuple[str, str], ProxiedServer]) -> Iterator[ProxiedServer]:
    server, transport = request.param
    p = proxies.get((server, transport))
    if p is None:
        p = proxies[(server, transport)] = ProxiedServer.create(toxiproxy, pool.get(server), transport)
    yield p
    p.clear()
