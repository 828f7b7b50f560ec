"""Property tests of py_client's frame parsing (PROTOCOL.md "Frames"), with Hypothesis.

The vectors in testdata/ pin known cases; these look for the unknown ones: arbitrary bytes and limits
for the stateless parser, arbitrary split points for reassembly, and garbage responses fed to a real
FrameClient over a loopback socket (the path a misbehaving server exercises).
Derandomized and bounded, so a run is reproducible and its length fixed.
"""

from __future__ import annotations

import itertools
import socket
import struct
import threading
from collections.abc import Iterator

import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from py_client import FrameClient, XferError
from py_client.errors import KNOWN_CODES
from py_client.frame import (
    DEFAULT_MAX_FRAME,
    MAX_HEADER,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    parse_frame,
)
from xfer.v1 import file_transfer_pb2, frame_pb2

FUZZ = settings(derandomize=True, max_examples=300, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])
PARSE_ERROR_CODES = {"resource_exhausted", "invalid_argument"}  # the parser's rows of PROTOCOL.md's limits
U32 = st.integers(0, 2**32 - 1)


@st.composite
def near_limits(draw: st.DrawFn) -> bytes:
    """Random bytes almost always start with a huge frame_len; these put frame_len and header_len near
    each other's limits and send about as many bytes as declared, so every answer is reached."""
    header_len = draw(st.integers(0, MAX_HEADER + 8) | st.integers(MAX_HEADER - 4, MAX_HEADER + 4) | U32)
    frame_len = draw(st.integers(-8, 300).map(lambda d: header_len + 4 + d) | st.integers(0, 8) | U32)
    frame_len = min(max(frame_len, 0), 2**32 - 1)
    tail = max(0, min(frame_len - 4, 4000) + draw(st.integers(-4, 4)))
    return struct.pack(">II", frame_len, header_len) + bytes(tail)  # its prefixes: the test cuts them


buffers = st.binary(max_size=64) | near_limits()
limits = st.integers(0, 4096) | U32 | st.just(DEFAULT_MAX_FRAME)


def _check_rules(buf: bytes, max_frame: int) -> None:
    """PROTOCOL.md's table of limits, each applied as soon as the bytes that carry it are there."""
    r = parse_frame(buf, max_frame)  # any exception fails the test
    assert r.outcome in ("need_more", "frame", "error")
    if r.outcome == "error":
        assert r.code in PARSE_ERROR_CODES and r.message, r
    if len(buf) < 4:
        assert r.outcome == "need_more", r
        return
    (frame_len,) = struct.unpack_from(">I", buf)
    if frame_len > max_frame:
        assert (r.outcome, r.code) == ("error", "resource_exhausted"), r
    elif frame_len < 4:
        assert (r.outcome, r.code) == ("error", "invalid_argument"), r
    elif len(buf) < 8:
        assert r.outcome == "need_more", r
    elif (header_len := struct.unpack_from(">I", buf, 4)[0]) > MAX_HEADER or header_len > frame_len - 4:
        assert (r.outcome, r.code) == ("error", "invalid_argument"), r
    elif len(buf) < 4 + frame_len:
        assert r.outcome == "need_more", r
    else:
        assert (r.outcome, r.size) == ("frame", 4 + frame_len), r  # one frame, within the buffer


@FUZZ
@given(buf=buffers, max_frame=limits, extra=st.binary(max_size=16))
def test_parse_frame_answers_only_declared_outcomes(buf: bytes, max_frame: int, extra: bytes) -> None:
    declared = struct.unpack_from(">I", buf)[0] if len(buf) >= 4 else 0
    for limit in (max_frame, *(d for d in (declared - 1, declared, declared + 1) if d >= 0)):  # + the edges
        _check_rules(buf, limit)
    # Stateless: bytearray/memoryview (what FrameClient passes) agree, and so does every prefix, which may
    # only lack information (need_more); a frame or error stays the same whatever follows it.
    r = parse_frame(buf, max_frame)
    assert parse_frame(bytearray(buf), max_frame) == r == parse_frame(memoryview(buf), max_frame)
    for cut in range(len(buf)):
        _check_rules(buf[:cut], max_frame)
        assert parse_frame(buf[:cut], max_frame) in (r, parse_frame(b"", max_frame)), cut
    if r.outcome != "need_more":
        assert parse_frame(buf + extra, max_frame) == r


names = st.text(st.characters(codec="utf-8"), max_size=100)  # <= 400 bytes: headers stay under 1024
frames = st.lists(
    st.tuples(st.booleans(), st.integers(0, 2**64 - 1), names, names, st.binary(max_size=3000)),
    min_size=1, max_size=8)


@FUZZ
@given(specs=frames, cuts=st.lists(st.integers(0, 10**6), max_size=40))
def test_split_stream_reassembles_exactly(specs: list[tuple[bool, int, str, str, bytes]],
                                          cuts: list[int]) -> None:
    encoded = [encode_response(seq, method, error, body) if is_resp else encode_request(seq, method, body)
               for is_resp, seq, method, error, body in specs]
    stream = b"".join(encoded)
    points = sorted({0, len(stream), *(c % (len(stream) + 1) for c in cuts)})
    buf, got = bytearray(), []
    for a, b in itertools.pairwise(points):  # feed piece by piece, as recv() would
        buf += stream[a:b]
        while (r := parse_frame(buf)).outcome == "frame":
            got.append(bytes(buf[: r.size]))
            del buf[: r.size]
        assert r.outcome == "need_more", r  # a valid stream never looks like an error
    assert got == encoded and not buf
    for frame, (is_resp, seq, method, error, body) in zip(got, specs, strict=True):
        if is_resp:
            hdr, rest = decode_response(frame)
            assert (hdr.seq, hdr.method, hdr.error, bytes(rest)) == (seq, method, error, body)
        else:
            req, rest = decode_request(frame)
            assert (req.seq, req.method, bytes(rest)) == (seq, method, body)


# ---- garbage responses through a real FrameClient ----------------------------------------------------

class GarbageServer:
    """Loopback listener: per connection, reads one request frame, answers with the bytes it was given
    and closes. One client at a time (the test is sequential), every wait bounded."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.5)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.reply = b""
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                buf = b""
                # read the whole request first, so closing sends FIN (unread data would mean RST)
                while parse_frame(buf).outcome == "need_more" and (data := conn.recv(65536)):
                    buf += data
                conn.sendall(self.reply)


@pytest.fixture(scope="module")
def garbage_server() -> Iterator[GarbageServer]:
    server = GarbageServer()
    yield server
    server.stop.set()
    server.thread.join(timeout=5)
    server.sock.close()


def _echo_against(server: GarbageServer, reply: bytes) -> bytes | XferError:
    server.reply = reply
    with FrameClient(server.address, timeout=5) as client:
        try:
            return client.echo(b"ping")  # anything but bytes or XferError fails the test
        except XferError as e:
            assert e.code in KNOWN_CODES, repr(e)
            return e


def _parses(msg_type: type, data: bytes) -> bool:
    try:
        msg_type().ParseFromString(data)
    except DecodeError:
        return False
    return True


@FUZZ
@given(raw=buffers)
def test_frame_client_rejects_garbage_stream(garbage_server: GarbageServer, raw: bytes) -> None:
    got = _echo_against(garbage_server, raw)
    r = parse_frame(raw, 2 * DEFAULT_MAX_FRAME)  # FrameClient's own limit
    if r.outcome == "error":
        assert isinstance(got, XferError) and got.code == r.code and "bad frame" in got.message, got
    elif r.outcome == "need_more":
        assert isinstance(got, XferError) and got.code == "unavailable" and "closed" in got.message, got


@FUZZ
@given(header=st.binary(max_size=MAX_HEADER), body=st.binary(max_size=64))
def test_frame_client_rejects_garbage_header(garbage_server: GarbageServer, header: bytes, body: bytes) -> None:
    frame = struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body
    got = _echo_against(garbage_server, frame)
    if not _parses(frame_pb2.ResponseHeader, header):
        assert isinstance(got, XferError) and "malformed response header" in got.message, got


@FUZZ
@given(body=st.binary(max_size=256), error=names)
def test_frame_client_rejects_garbage_body(garbage_server: GarbageServer, body: bytes, error: str) -> None:
    got = _echo_against(garbage_server, encode_response(1, "Xfer.Echo", error, body))
    if error:  # a call error: its text comes back as the XferError, whatever the body
        assert isinstance(got, XferError) and str(got) == str(XferError.parse(error)), got
    elif not _parses(file_transfer_pb2.EchoResponse, body):
        assert isinstance(got, XferError) and "malformed EchoResponse body" in got.message, got
    else:
        want = file_transfer_pb2.EchoResponse()
        want.ParseFromString(body)
        assert got == want.payload
