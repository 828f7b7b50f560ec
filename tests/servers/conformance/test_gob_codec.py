"""xferd-go --frame-codec gob: net/rpc's own gob stream on the frame listener (proto/GOB.md).

Python has no maintained gob implementation, so the calls come from build/bin/xferload --codec gob (net/rpc's
own client) and the bad input from raw sockets: every xferload call is counted exactly by the server's
/metrics, a broken stream gets its connection closed, and the server keeps serving other clients after it.
"""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Iterator

import pytest

from tests.loadgen.support import fetch, parse_prom, total
from tests.support.servers import RunningServer, running_server
from tests.tools.test_xferload import METHODS, requests_after, run_json

READ_TIMEOUT_S = 0.5
CLOSE_BOUND_S = 10.0  # far above what the server needs: only a server that never closes fails
MAX_FRAME = 8 << 20  # xferd-go's default --max-frame, also the gob message limit


@pytest.fixture(scope="module")
def gob_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    store = tmp_path_factory.mktemp("store")
    with running_server("xferd-go", [f"--store=disk:{store}", f"--read-timeout={int(READ_TIMEOUT_S * 1000)}ms"],
                        env={"XFERD_FRAME_CODEC": "gob"}) as s:
        yield s


def test_ready_line_and_metrics_name_the_codec(gob_server: RunningServer) -> None:
    assert gob_server.ready["frame_codec"] == "gob"
    samples = parse_prom(fetch(gob_server.metrics_url))
    assert total(samples, "xfer_frame_codec_info", codec="gob") == 1


def test_default_codec_is_protobuf() -> None:
    with running_server("xferd-go") as s:
        assert s.ready["frame_codec"] == "protobuf"
        assert total(parse_prom(fetch(s.metrics_url)), "xfer_frame_codec_info", codec="protobuf") == 1


def test_unknown_codec_is_refused_with_its_name() -> None:
    with pytest.raises(RuntimeError, match=r'--frame-codec "json": want protobuf or gob'):
        with running_server("xferd-go", ["--frame-codec", "json"]):
            pass


@pytest.mark.parametrize("method", list(METHODS))
def test_xferload_gob_is_counted_exactly(gob_server: RunningServer, method: str) -> None:
    before = total(parse_prom(fetch(gob_server.metrics_url)), "xfer_requests_total", transport="frame")
    r = run_json(gob_server, *METHODS[method], "--codec", "gob", "--conns", "2", "--inflight", "3",
                 "--duration", "1s")
    assert r["calls"] > 0 and r["bytes"] > 0
    assert r["errors"] == {}, r
    expected = before + r["calls"] + r["warmup_calls"] + r["setup_calls"]
    assert requests_after(gob_server, expected) == expected


def echo_works(server: RunningServer) -> None:
    r = run_json(server, "--codec", "gob", "--method", "echo", "--size", "100", "--max-calls", "20")
    assert r["calls"] == 20 and r["errors"] == {}, r


def closed_within_bound(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection; fails if it does not within the bound."""
    sock.settimeout(CLOSE_BOUND_S)
    got = b""
    end = time.monotonic() + CLOSE_BOUND_S
    while time.monotonic() < end:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return got
        if not chunk:
            return got
        got += chunk
    raise AssertionError(f"the server kept the connection open for {CLOSE_BOUND_S} s")


# A gob message is its byte count then the message; these are what no net/rpc client sends.
RANDOM = random.Random(7).randbytes(4096)
# Count 3: type id 2 (int, as the gob int 4), a 0 delta, the int 7: an int where rpc.Request is due.
INT_AS_HEADER = bytes([0x03, 0x04, 0x00, 0x0E])
# Count as 4 big-endian bytes (0xFC = -4): 256 MiB, beyond --max-frame.
OVERSIZED = bytes([0xFC]) + (256 << 20).to_bytes(4, "big")
# A message promising 100 bytes that sends 10: the client stalls.
STALLED = bytes([100]) + bytes(10)


@pytest.mark.parametrize(("name", "data", "half_close", "says"), [
    ("random bytes", RANDOM, False, b""),
    ("type mismatch in the header", INT_AS_HEADER, False, b"type mismatch"),
    ("truncated message", STALLED, True, b""),
    ("oversized message", OVERSIZED, False, b"exceeds limit 8388608 (--max-frame)"),
    ("stalled request", STALLED, False, b"--read-timeout"),
])
def test_corrupt_stream_closes_the_connection_and_others_are_served(
        gob_server: RunningServer, name: str, data: bytes, half_close: bool, says: bytes) -> None:
    host, port = gob_server.addr("frame").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=CLOSE_BOUND_S) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        got = closed_within_bound(sock)
    # The seq-0 response a failed connection gets carries the reason in its text.
    assert says in got, (name, got)
    assert gob_server.alive()
    echo_works(gob_server)
