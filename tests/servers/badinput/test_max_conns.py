"""More connections than --max-conns: the extra one gets resource_exhausted with seq 0 and is closed."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

from tests.servers.badinput.conftest import check_healthy, upload_sentinel
from tests.support.pool import module_pool
from tests.support.raw_frame import RawConn
from tests.support.servers import RunningServer
from xfer.v1 import file_transfer_pb2 as ft

MAX_CONNS = 4
SETTLE_S = 5.0  # the server notices closed connections asynchronously; poll up to this long

T = TypeVar("T")


def eventually(fn: Callable[[], T], what: str) -> T:
    """Retries fn until it stops raising, for at most SETTLE_S (polling, not a fixed sleep)."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        try:
            return fn()
        except Exception as e:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: still failing after {SETTLE_S}s: {e}") from e
            time.sleep(0.02)  # poll interval while the server reaps closed connections


pool = module_pool(args=[f"--max-conns={MAX_CONNS}"], on_start=upload_sentinel)


@pytest.fixture
def health_check() -> Callable[[RunningServer], None]:
    """Healthy once the server has reaped the test's closed connections: until then the check's own
    connections can be over --max-conns."""

    def settled(s: RunningServer) -> None:
        eventually(lambda: check_healthy(s), f"{s.kind.name} healthy after the test")

    return settled


def echo(conn: RawConn, payload: bytes) -> None:
    r = conn.call("Xfer.Echo", ft.EchoRequest(payload=payload))
    assert not r.error, r.error
    assert r.parse(ft.EchoResponse).payload == payload  # type: ignore[attr-defined]


def fill(addr: str) -> list[RawConn]:
    """MAX_CONNS open connections, each proven accepted by a round trip.

    Connections closed just before (by earlier checks) are reaped by the server asynchronously, so a
    connection refused with seq 0 here is retried until the deadline.
    """
    conns: list[RawConn] = []

    def more() -> None:
        while len(conns) < MAX_CONNS:
            c = RawConn(addr, timeout=5)
            try:
                echo(c, b"fill %d" % len(conns))
            except BaseException:
                c.close()
                raise
            conns.append(c)

    try:
        eventually(more, f"{MAX_CONNS} connections accepted")
    except BaseException:
        for c in conns:
            c.close()
        raise
    return conns


def test_connections_over_the_limit(frame_server: RunningServer) -> None:
    addr = frame_server.addr("frame")

    def fresh_conn_works() -> None:
        with RawConn(addr, timeout=5) as c:
            echo(c, b"new")

    conns = fill(addr)
    try:
        with RawConn(addr) as extra:
            err = extra.connection_error()  # exactly one seq-0 response, then EOF
        assert err.code == "resource_exhausted", err.error
        assert str(MAX_CONNS) in err.error, err.error
        for i, c in enumerate(conns):
            echo(c, b"still %d" % i)  # the earlier ones still work
        conns.pop(0).close()
        eventually(fresh_conn_works, "a new connection after one closed")
    finally:
        for c in conns:
            c.close()


def test_rejected_request_is_not_executed(frame_server: RunningServer) -> None:
    """A request sent on a rejected connection gets the seq-0 error only, never its own answer."""
    addr = frame_server.addr("frame")
    conns = fill(addr)
    try:
        with RawConn(addr) as extra:
            try:
                extra.request("Xfer.Echo", ft.EchoRequest(payload=b"sneaky"))
            except OSError:
                pass  # the server may already have closed it
            got = extra.wait_closed(timeout=10)
        assert [r.seq for r in got] in ([0], []), got
        assert all(r.code == "resource_exhausted" for r in got), got
    finally:
        for c in conns:
            c.close()
