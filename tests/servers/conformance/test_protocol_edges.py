"""The protocol's last edges (PROTOCOL.md "Request headers", "Quoting", "Integers"), identically in every server.

Frames are built byte by byte here, because the point is what a client written from the spec alone may send:
method names of any length and content, seq 0, wrong wire types, integers over 32 bits.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator

import grpc
import pytest

from tests.support.pool import ServerPool
from tests.support.raw_frame import IO_TIMEOUT_S, RawConn, Response
from tests.support.servers import SERVERS, selected_servers
from xfer.v1 import file_transfer_pb2 as ft

FRAME_SERVERS = [s for s in selected_servers() if "frame" in SERVERS[s].transports]
GRPC_SERVERS = [s for s in selected_servers() if "grpc" in SERVERS[s].transports]
HEADER_LIMIT = 1024  # the header_len a client's parser accepts
HEADER_BOUND = 400  # PROTOCOL.md "Quoting": the largest response header a server writes
MALFORMED_HEADER = "invalid_argument: malformed request header"
OVER_32_BITS = 1 << 32


# Written apart from proto/testdata/make_vectors.py's encoder on purpose: each cross-checks the other.
def varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    return bytes(out + bytes([v]))


def field_bytes(num: int, value: bytes) -> bytes:
    return varint(num << 3 | 2) + varint(len(value)) + value


def field_varint(num: int, value: int) -> bytes:
    return varint(num << 3) + varint(value)


def raw_frame(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


def header(method: bytes, seq: int) -> bytes:
    return field_bytes(1, method) + field_varint(2, seq)


@pytest.fixture(params=FRAME_SERVERS)
def conn(pool: ServerPool, request: pytest.FixtureRequest) -> Iterator[RawConn]:
    with RawConn(pool.get(request.param).addr("frame")) as c:
        yield c


def echo_ok(conn: RawConn) -> None:
    """The connection still serves calls."""
    r = conn.call("Xfer.Echo", ft.EchoRequest(payload=b"still here"))
    assert not r.error and r.parse(ft.EchoResponse).payload == b"still here"  # type: ignore[attr-defined]


def call_raw(conn: RawConn, frame: bytes) -> Response:
    conn.send(frame)
    return conn.response()


def header_len_of_next(conn: RawConn) -> int:
    """header_len of the next whole frame in the connection's buffer, without consuming it."""
    deadline = time.monotonic() + IO_TIMEOUT_S
    while len(conn.buf) < 8:
        assert conn._read_more(deadline), "connection closed"
    return int(struct.unpack(">I", conn.buf[4:8])[0])


# ---- method names ---------------------------------------------------------------------------------


def test_long_method_gets_a_short_header(conn: RawConn) -> None:
    method = b"Xfer." + b"x" * 1000
    conn.send(raw_frame(header(method, 1)))
    assert header_len_of_next(conn) <= HEADER_BOUND < HEADER_LIMIT
    r = conn.response()
    assert (r.seq, r.method) == (1, ""), "a method over 64 bytes is not echoed"
    assert r.error == 'unimplemented: unknown method "Xfer.' + "x" * 59 + '"...'
    echo_ok(conn)


def test_method_of_64_bytes_is_echoed(conn: RawConn) -> None:
    method = "Xfer." + "é" * 29 + "x"  # 64 bytes, multi-byte characters
    r = call_raw(conn, raw_frame(header(method.encode(), 2)))
    assert (r.seq, r.method, r.code) == (2, method, "unimplemented")
    assert r.error == f'unimplemented: unknown method "{method}"'


def test_nul_in_method_is_a_call_error(conn: RawConn) -> None:
    body = ft.EchoRequest(payload=b"x").SerializeToString()
    r = call_raw(conn, raw_frame(header(b"Xfer.Echo\x00", 3), body))
    assert r.seq == 3 and r.method == "Xfer.Echo\x00" and r.body == b""
    assert r.error == 'invalid_argument: method "Xfer.Echo\\x00" contains NUL'
    echo_ok(conn)


def test_non_utf8_method_is_a_connection_error(conn: RawConn) -> None:
    conn.send(raw_frame(header(b"Xfer.\xff\xfe", 4)))
    assert conn.connection_error().error == MALFORMED_HEADER


def test_method_with_wrong_wire_type_is_a_connection_error(conn: RawConn) -> None:
    conn.send(raw_frame(field_varint(1, 5) + field_varint(2, 5)))
    assert conn.connection_error().error == MALFORMED_HEADER


def test_seq_with_wrong_wire_type_is_a_connection_error(conn: RawConn) -> None:
    conn.send(raw_frame(field_bytes(1, b"Xfer.Echo") + field_bytes(2, b"\x01")))
    assert conn.connection_error().error == MALFORMED_HEADER


@pytest.mark.parametrize("hdr", [field_bytes(1, b"Xfer.Echo"), header(b"Xfer.Echo", 0), b""],
                         ids=["absent", "zero", "empty-header"])
def test_seq_zero_is_a_connection_error(conn: RawConn, hdr: bytes) -> None:
    echo_ok(conn)
    conn.send(raw_frame(hdr, ft.EchoRequest(payload=b"x").SerializeToString()))
    assert conn.connection_error().error == "invalid_argument: request seq 0 is reserved"


def test_unknown_and_repeated_header_fields(conn: RawConn) -> None:
    hdr = field_varint(2, 1) + field_bytes(7, b"skip me") + field_bytes(1, b"Xfer.Nope") + header(b"Xfer.Echo", 9)
    r = call_raw(conn, raw_frame(hdr, ft.EchoRequest(payload=b"y").SerializeToString()))
    assert (r.seq, r.method, r.error) == (9, "Xfer.Echo", "")


# ---- integers in 32-bit fields ----------------------------------------------------------------------


@pytest.mark.parametrize(("method", "body", "type_name"), [
    ("Xfer.UploadBegin", field_bytes(1, b"big.bin") + field_varint(2, 1 << 20) + field_varint(3, OVER_32_BITS + 65536),
     "UploadBeginRequest"),
    ("Xfer.Read", field_bytes(1, b"gen:100:1") + field_varint(3, OVER_32_BITS + 10), "ReadRequest"),
    ("Xfer.UploadCommit", field_varint(1, 12345) + field_varint(2, OVER_32_BITS), "UploadCommitRequest"),
], ids=["chunk_size", "length", "crc32"])
def test_32_bit_overflow_is_malformed(conn: RawConn, method: str, body: bytes, type_name: str) -> None:
    r = conn.call(method, body)
    assert r.error == f"invalid_argument: malformed {type_name} body"
    echo_ok(conn)


def test_32_bit_maximum_is_accepted(conn: RawConn) -> None:
    """2^32 - 1 is in range: the Read is refused for its length limit, not as malformed."""
    r = conn.call("Xfer.Read", field_bytes(1, b"gen:100:1") + field_varint(3, OVER_32_BITS - 1))
    assert r.code == "invalid_argument" and "malformed" not in r.error and str(OVER_32_BITS - 1) in r.error


# ---- names in bodies and the quoting of error subjects -----------------------------------------------


@pytest.mark.parametrize(("name", "quoted"), [
    (b'q"\x01\x7f', '"q\\"\\x01\\x7f"'),
    (b"a" * 63 + "é".encode(), '"' + "a" * 63 + '"...'),
    ("日本".encode() * 30, '"' + "日本" * 10 + "日" + '"...'),
], ids=["escapes", "cut-before-2-byte", "cut-3-byte"])
def test_not_found_quotes_per_spec(conn: RawConn, name: bytes, quoted: str) -> None:
    r = conn.call("Xfer.Stat", field_bytes(1, name))
    assert r.error == f"not_found: file {quoted} not found"


@pytest.mark.parametrize(("method", "rest", "type_name"), [
    ("Xfer.Stat", b"", "StatRequest"),
    ("Xfer.Read", field_varint(3, 10), "ReadRequest"),
    ("Xfer.UploadBegin", field_varint(2, 10) + field_varint(3, 1024), "UploadBeginRequest"),
])
def test_non_utf8_name_is_a_malformed_body(conn: RawConn, method: str, rest: bytes, type_name: str) -> None:
    """A proto3 string must be UTF-8: the body does not decode, in both servers alike."""
    r = conn.call(method, field_bytes(1, b"bad\xff") + rest)
    assert r.error == f"invalid_argument: malformed {type_name} body"


@pytest.mark.parametrize(("method", "body"), [
    ("Xfer.Stat", field_bytes(1, b"gen:" + b"\x01" * 251)),
    ("Xfer.Stat", field_bytes(1, b"\x01" * 255)),
    ("Xfer.Stat", field_bytes(1, b"\x01" * 256)),
    ("Xfer.UploadBegin", field_bytes(1, b"gen:\x01" + b"\x7f" * 250) + field_varint(2, 10) + field_varint(3, 1024)),
    ("Xfer.Read", field_bytes(1, b"gen:100:1\x01" + b"\x01" * 200) + field_varint(2, (1 << 64) - 1) + field_varint(3, 10)),
], ids=["gen-name", "name-255", "name-256", "reserved", "read"])
def test_longest_errors_fit_the_header_bound(conn: RawConn, method: str, body: bytes) -> None:
    conn.request(method, body, seq=(1 << 64) - 1)
    assert header_len_of_next(conn) <= HEADER_BOUND
    r = conn.response()
    assert r.seq == (1 << 64) - 1 and r.code in ("invalid_argument", "not_found") and r.error.count('"') == 2, r.error


def test_nul_in_name_is_invalid_argument(conn: RawConn) -> None:
    r = conn.call("Xfer.Stat", field_bytes(1, b"a\x00b"))
    assert r.error == 'invalid_argument: name "a\\x00b" contains NUL'


# ---- gRPC (xferd-go) ---------------------------------------------------------------------------------


@pytest.fixture(params=GRPC_SERVERS)
def channel(pool: ServerPool, request: pytest.FixtureRequest) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(pool.get(request.param).addr("grpc")) as ch:
        yield ch


def identity(b: bytes) -> bytes:
    return b


def test_grpc_upload_chunk_size_overflow(channel: grpc.Channel) -> None:
    upload = channel.stream_unary("/xfer.v1.FileTransfer/Upload", request_serializer=identity,
                                  response_deserializer=ft.UploadResponse.FromString)
    hdr = field_bytes(1, b"grpc-big.bin") + field_varint(2, 1 << 20) + field_varint(3, OVER_32_BITS + 65536)
    with pytest.raises(grpc.RpcError) as exc:
        upload(iter([field_bytes(1, hdr)]), timeout=10)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT, exc.value


def test_grpc_download_chunk_size_overflow(channel: grpc.Channel) -> None:
    download = channel.unary_stream("/xfer.v1.FileTransfer/Download", request_serializer=identity,
                                    response_deserializer=ft.DownloadResponse.FromString)
    with pytest.raises(grpc.RpcError) as exc:
        list(download(field_bytes(1, b"gen:100:1") + field_varint(2, OVER_32_BITS), timeout=10))
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT, exc.value
