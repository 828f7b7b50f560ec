"""SIGTERM with calls in flight (PROTOCOL.md "Shutdown"): listeners close at once, parsed calls are answered
or cut at --drain-timeout, and the process exits 0 within drain + 1 s whatever its clients do."""

from __future__ import annotations

import signal
import socket
import time

import pytest

from py_client.frame import encode_request
from tests.support.raw_frame import RawConn, begin
from tests.support.servers import SERVERS, running_server, selected_servers
from xfer.v1 import frame_pb2

FRAME_SERVERS = [n for n in selected_servers() if "frame" in SERVERS[n].transports]
DRAIN_S = 1.0
MIB = 1 << 20


def _read_frames(seq: int, length: int) -> bytes:
    req = frame_pb2.ReadRequest(name="gen:8388608:5", offset=0, length=length).SerializeToString()
    return b"".join(encode_request(seq + i, "Xfer.Read", req) for i in range(8))


def _refused(addr: str) -> bool:
    host, port = addr.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return True
    return False


@pytest.mark.parametrize("name", FRAME_SERVERS)
def test_sigterm_with_calls_in_flight(name: str) -> None:
    with running_server(name, ["--store=mem", f"--drain-timeout={DRAIN_S:g}s"]) as s:
        addr = s.addr("frame")
        assert s.ready["drain_timeout"] == "1s", s.ready
        host, port = addr.rsplit(":", 1)
        # A reader that never reads: its answers stall in the socket until the deadline cuts them.
        stalled = socket.create_connection((host, int(port)), timeout=10)
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
        stalled.settimeout(2)
        for k in range(8):
            stalled.sendall(_read_frames(1 + 8 * k, MIB))
        # An uploader with chunks pipelined, and a well-behaved reader whose calls were parsed in time.
        uploader = RawConn(addr, timeout=10)
        upload_id = begin(uploader, "in-flight.bin", 64 * (256 << 10), 256 << 10)
        chunk = b"u" * (256 << 10)
        uploader.send(b"".join(encode_request(
            100 + i, "Xfer.UploadChunk",
            frame_pb2.UploadChunkRequest(upload_id=upload_id, offset=i * (256 << 10), data=chunk).SerializeToString())
            for i in range(16)))
        reader = RawConn(addr, timeout=10)
        reader.send(_read_frames(1, 64 << 10))
        first = reader.response()  # its frames arrived and were parsed before the signal
        assert not first.error, first.error

        t0 = time.monotonic()
        s.proc.send_signal(signal.SIGTERM)
        deadline = t0 + DRAIN_S + 1.0
        while not _refused(addr):
            assert time.monotonic() < t0 + 1.0, "new connections still accepted 1 s after SIGTERM"
            time.sleep(0.02)  # poll interval
        status = s.proc.wait(timeout=max(deadline - time.monotonic(), 0) + 2.0)
        elapsed = time.monotonic() - t0
        assert status == 0, f"exit status {status}"
        assert elapsed <= DRAIN_S + 1.0, f"{name} exited {elapsed:.2f} s after SIGTERM, drain {DRAIN_S} s"

        rest = reader.wait_closed(timeout=5)
        assert sorted(r.seq for r in [first, *rest]) == list(range(1, 9)), "a parsed call went unanswered"
        assert all(not r.error for r in rest), [r.error for r in rest]
        for c in (uploader, reader):
            c.close()
        stalled.close()
