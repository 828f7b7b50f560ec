"""Bad-input fixtures: servers shared per module, a sentinel file, and a health check after every test.

After each test, for every server the module started: a fresh valid request on a NEW connection
succeeds (each transport), and the sentinel committed at start still has its size and CRC-32.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from py_client import FrameClient, GrpcClient
from py_client.content import crc32, gen_bytes
from tests.support.pool import ServerPool, module_pool
from tests.support.servers import SERVERS, RunningServer, selected_servers

SENTINEL = "sentinel.bin"
SENTINEL_DATA = gen_bytes(200_000, 99)
SENTINEL_CRC = crc32(SENTINEL_DATA)

FRAME_SERVERS = [s for s in selected_servers() if "frame" in SERVERS[s].transports]
GRPC_SERVERS = [s for s in selected_servers() if "grpc" in SERVERS[s].transports]


def upload_sentinel(s: RunningServer) -> None:
    with FrameClient(s.addr("frame"), timeout=30) as c:
        r = c.upload(SENTINEL, SENTINEL_DATA, chunk_size=65536)
    assert r.crc32 == SENTINEL_CRC


def check_healthy(s: RunningServer) -> None:
    assert s.alive(), f"{s.kind.name} died:\n" + "\n".join(s.stderr_lines)
    clients: list[FrameClient | GrpcClient] = []
    if "frame" in s.kind.transports:
        clients.append(FrameClient(s.addr("frame"), timeout=30))
    if "grpc" in s.kind.transports:
        clients.append(GrpcClient(s.addr("grpc"), timeout=30))
    for c in clients:
        with c:
            assert c.echo(b"fresh connection") == b"fresh connection"
            st = c.stat(SENTINEL)
            assert (st.size, st.crc32) == (len(SENTINEL_DATA), SENTINEL_CRC), "a committed file changed"
            assert c.download(SENTINEL, chunk_size=65536).data == SENTINEL_DATA


pool = module_pool(on_start=upload_sentinel)


@pytest.fixture
def health_check() -> Callable[[RunningServer], None]:
    """How still_healthy checks each server; a module whose servers settle asynchronously overrides it."""
    return check_healthy


@pytest.fixture(autouse=True)
def still_healthy(pool: ServerPool, health_check: Callable[[RunningServer], None]) -> Iterator[None]:
    yield
    for s in pool.running():
        health_check(s)


@pytest.fixture(params=FRAME_SERVERS)
def frame_server(request: pytest.FixtureRequest, pool: ServerPool) -> RunningServer:
    return pool.get(request.param)


@pytest.fixture(params=GRPC_SERVERS)
def grpc_server(request: pytest.FixtureRequest, pool: ServerPool) -> RunningServer:
    return pool.get(request.param)
