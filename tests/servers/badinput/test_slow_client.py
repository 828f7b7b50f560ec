"""A client that sends part of a frame and stalls is dropped by --read-timeout; others are served."""

from __future__ import annotations

import time

import pytest

from py_client import FrameClient
from py_client.frame import encode_request
from tests.servers.badinput.conftest import upload_sentinel
from tests.support.pool import module_pool
from tests.support.raw_frame import RawConn
from tests.support.servers import RunningServer
from xfer.v1 import file_transfer_pb2 as ft

READ_TIMEOUT_S = 1.0
DROP_DEADLINE_S = 8.0  # generous bound: the server must drop the staller well before this


pool = module_pool(args=["--read-timeout=1s"], on_start=upload_sentinel)


@pytest.mark.parametrize("cut", [2, 8, 30], ids=["in-length", "after-prefix", "in-body"])
def test_stalled_client_is_dropped(frame_server: RunningServer, cut: int) -> None:
    assert frame_server.ready.get("read_timeout") in ("1s", "1000ms", "1"), frame_server.ready
    addr = frame_server.addr("frame")
    frame = encode_request(1, "Xfer.Echo", ft.EchoRequest(payload=b"y" * 100).SerializeToString())
    with RawConn(addr) as stall, RawConn(addr) as idle:
        stall.send(frame[:cut])
        t0 = time.monotonic()
        # Another client is served while the staller holds its connection.
        with FrameClient(addr, timeout=5) as other:
            for i in range(20):
                assert other.echo(b"meanwhile %d" % i) == b"meanwhile %d" % i
            assert other.download("gen:1000000:1").bytes == 1000000
        got = stall.wait_closed(timeout=DROP_DEADLINE_S)  # raises TimeoutError if never dropped
        elapsed = time.monotonic() - t0
        assert not [r for r in got if r.seq != 0], f"the stalled frame was answered: {got}"
        assert elapsed >= READ_TIMEOUT_S * 0.5, f"dropped after {elapsed:.2f}s, before the read timeout"
        # An idle connection that has begun no frame is not subject to the read timeout.
        r = idle.call("Xfer.Echo", ft.EchoRequest(payload=b"idle"))
        assert not r.error and r.parse(ft.EchoResponse).payload == b"idle"  # type: ignore[attr-defined]


def test_trickling_client_is_dropped(frame_server: RunningServer) -> None:
    """Bytes keep arriving, but the frame is not whole within the read timeout."""
    addr = frame_server.addr("frame")
    frame = encode_request(1, "Xfer.Echo", ft.EchoRequest(payload=b"z" * 1000).SerializeToString())
    with RawConn(addr) as slow:
        t0 = time.monotonic()
        sent = 0
        closed = False
        while time.monotonic() - t0 < DROP_DEADLINE_S and sent < len(frame):
            try:
                slow.send(frame[sent : sent + 1])
            except OSError:
                closed = True
                break
            sent += 1
            try:  # one byte every 100 ms, waiting on the socket (EOF ends the wait early)
                slow.wait_closed(timeout=0.1)
            except TimeoutError:
                continue  # still open: send the next byte
            closed = True
            break
        elapsed = time.monotonic() - t0
    assert closed, f"a frame trickled for {elapsed:.1f}s ({sent} of {len(frame)} bytes) and was not dropped"
    assert elapsed < DROP_DEADLINE_S
