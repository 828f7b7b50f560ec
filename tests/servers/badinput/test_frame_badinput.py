"""Hostile and malformed input on the frame transport, byte by byte over raw sockets.

Each case checks that the error names the problem (its code and the quoted subject); the autouse
fixture then checks that a new connection is served and that the sentinel file is unchanged.
"""

from __future__ import annotations

import socket
import struct
import zlib

import pytest

from py_client.frame import encode_request, frame_prefix
from tests.servers.badinput.conftest import SENTINEL, SENTINEL_CRC, SENTINEL_DATA
from tests.support.raw_frame import RawConn, Response, begin
from tests.support.servers import RunningServer
from xfer.v1 import file_transfer_pb2 as ft
from xfer.v1 import frame_pb2 as fr

MAX_FRAME = 8 << 20
MAX_CHUNK = 4 << 20
MAX_FILE = 1 << 30
CHUNK = 65536
MIN_CHUNK = 1024  # the smallest chunk --min-chunk allows when a file takes more than one
HALF_A, HALF_B = b"a" * MIN_CHUNK, b"b" * MIN_CHUNK  # a two-chunk file


def echo_ok(conn: RawConn, payload: bytes = b"still here") -> None:
    r = conn.call("Xfer.Echo", ft.EchoRequest(payload=payload))
    assert not r.error, r.error
    assert r.parse(ft.EchoResponse).payload == payload  # type: ignore[attr-defined]


def assert_error(r: Response, code: str, *subjects: str) -> None:
    assert r.error, f"expected {code}, the call succeeded"
    assert r.code == code, f"want {code}, got {r.error!r}"
    assert r.body == b"", "a response with an error has an empty body"
    for s in subjects:
        assert s in r.error, f"{s!r} not named in {r.error!r}"


def stat_error(conn: RawConn, name: str) -> str:
    return conn.call("Xfer.Stat", ft.StatRequest(name=name)).error


# ---- connection errors: one seq-0 response, then the connection closes ----------------------------

@pytest.fixture
def raw(frame_server: RunningServer) -> RawConn:
    conn = RawConn(frame_server.addr("frame"))
    return conn


def test_length_prefix_over_limit(raw: RawConn) -> None:
    with raw:
        too_big = MAX_FRAME + (1 << 20)
        raw.send(struct.pack(">II", too_big, 20))  # the body never comes: refused on the length alone
        err = raw.connection_error()
    assert_error(err, "resource_exhausted", str(too_big), str(MAX_FRAME))


def test_length_just_over_limit(raw: RawConn) -> None:
    with raw:
        raw.send(struct.pack(">I", MAX_FRAME + 1))
        err = raw.connection_error()
    assert_error(err, "resource_exhausted", str(MAX_FRAME + 1))


def test_frame_len_below_minimum(raw: RawConn) -> None:
    with raw:
        raw.send(struct.pack(">I", 3) + b"\x00\x00\x00")
        assert_error(raw.connection_error(), "invalid_argument")


def test_header_len_over_limit(raw: RawConn) -> None:
    with raw:
        raw.send(struct.pack(">II", 4 + 1025, 1025))
        assert_error(raw.connection_error(), "invalid_argument", "1025")


def test_header_len_over_frame_len(raw: RawConn) -> None:
    with raw:
        raw.send(struct.pack(">II", 10, 7) + b"\x00" * 6)
        assert_error(raw.connection_error(), "invalid_argument")


@pytest.mark.parametrize("header", [b"\xff" * 10, b"\x0a\x20abc", b"\x12\x05\x01"],
                         ids=["ff", "truncated-string", "wrong-wire-type"])
def test_garbage_header(raw: RawConn, header: bytes) -> None:
    with raw:
        raw.send(frame_prefix(header, 0))
        assert_error(raw.connection_error(), "invalid_argument", "header")


def test_calls_before_a_bad_frame_are_answered(raw: RawConn) -> None:
    with raw:
        echo_ok(raw, b"first")
        raw.send(struct.pack(">I", MAX_FRAME + 5))
        err = raw.connection_error()
    assert_error(err, "resource_exhausted", str(MAX_FRAME + 5))


@pytest.mark.parametrize("cut", [2, 8, 20], ids=["in-length", "after-prefix", "in-body"])
def test_truncated_frame_then_close(raw: RawConn, cut: int) -> None:
    frame = encode_request(1, "Xfer.Echo", ft.EchoRequest(payload=b"x" * 64).SerializeToString())
    with raw:
        raw.send(frame[:cut])
        raw.sock.shutdown(socket.SHUT_WR)
        got = raw.wait_closed(timeout=10)
    assert all(r.seq == 0 for r in got), f"a call was answered for a frame never completed: {got}"


# ---- call errors: that call only; the connection goes on ----------------------------------------------

def test_unknown_method(raw: RawConn) -> None:
    with raw:
        r = raw.call("Xfer.Nope", b"")
        assert_error(r, "unimplemented", '"Xfer.Nope"')
        assert r.method == "Xfer.Nope"
        echo_ok(raw)


def test_empty_method(raw: RawConn) -> None:
    with raw:
        r = raw.call("", b"")
        assert r.code in ("unimplemented", "invalid_argument"), r.error
        echo_ok(raw)


@pytest.mark.parametrize(("method", "type_name"), [
    ("Xfer.UploadBegin", "UploadBeginRequest"), ("Xfer.UploadChunk", "UploadChunkRequest"),
    ("Xfer.Read", "ReadRequest"), ("Xfer.Echo", "EchoRequest"), ("Xfer.Stat", "StatRequest"),
    ("Xfer.Meta", "MetaRequest"),
])
def test_malformed_body(raw: RawConn, method: str, type_name: str) -> None:
    with raw:
        r = raw.call(method, b"\x0a\xff\xff")  # a length-delimited field whose length never ends
        assert_error(r, "invalid_argument", "malformed", type_name)
        echo_ok(raw)


def test_body_of_the_wrong_type(raw: RawConn) -> None:
    """A ReadRequest body sent as UploadChunk: field 1 has the wrong wire type, and no open upload."""
    with raw:
        r = raw.call("Xfer.UploadChunk", fr.ReadRequest(name="sentinel.bin", offset=0, length=10))
        assert r.code in ("invalid_argument", "not_found"), r.error
        r = raw.call("Xfer.UploadCommit", ft.StatRequest(name=SENTINEL))
        assert r.code in ("invalid_argument", "not_found"), r.error
        echo_ok(raw)


def test_pipelined_errors_answer_only_their_call(raw: RawConn) -> None:
    with raw:
        raw.request("Xfer.Echo", ft.EchoRequest(payload=b"a"), seq=11)
        raw.request("Xfer.Nope", b"", seq=12)
        raw.request("Xfer.Stat", ft.StatRequest(name="missing.bin"), seq=13)
        raw.request("Xfer.Echo", ft.EchoRequest(payload=b"b"), seq=14)
        got = {r.seq: r for r in (raw.response() for _ in range(4))}
    assert sorted(got) == [11, 12, 13, 14]
    assert got[11].parse(ft.EchoResponse).payload == b"a"  # type: ignore[attr-defined]
    assert_error(got[12], "unimplemented", '"Xfer.Nope"')
    assert_error(got[13], "not_found", '"missing.bin"')
    assert got[14].parse(ft.EchoResponse).payload == b"b"  # type: ignore[attr-defined]


def test_echo_over_max_chunk(raw: RawConn) -> None:
    with raw:
        r = raw.call("Xfer.Echo", ft.EchoRequest(payload=b"\0" * (MAX_CHUNK + 1)))
        assert_error(r, "invalid_argument", str(MAX_CHUNK + 1))
        echo_ok(raw)


@pytest.mark.parametrize(("offset", "length", "code", "subject"), [
    (200_001, 10, "out_of_range", "200001"),
    (0, 0, "invalid_argument", "0"),
    (0, MAX_CHUNK + 1, "invalid_argument", str(MAX_CHUNK + 1)),
])
def test_bad_read(raw: RawConn, offset: int, length: int, code: str, subject: str) -> None:
    with raw:
        r = raw.call("Xfer.Read", fr.ReadRequest(name=SENTINEL, offset=offset, length=length))
        assert_error(r, code, subject)
        ok = raw.call("Xfer.Read", fr.ReadRequest(name=SENTINEL, offset=200_000 - 5, length=10))
        assert ok.parse(fr.ReadResponse).data == SENTINEL_DATA[-5:]  # type: ignore[attr-defined]


def test_read_missing_file(raw: RawConn) -> None:
    with raw:
        r = raw.call("Xfer.Read", fr.ReadRequest(name="nope.bin", offset=0, length=10))
        assert_error(r, "not_found", '"nope.bin"')


@pytest.mark.parametrize(("size", "chunk", "subject"), [
    (MAX_FILE + 1, CHUNK, str(MAX_FILE + 1)),
    (100, 0, "chunk"),
    (100, MAX_CHUNK + 1, str(MAX_CHUNK + 1)),
])
def test_bad_upload_begin(raw: RawConn, size: int, chunk: int, subject: str) -> None:
    with raw:
        r = raw.call("Xfer.UploadBegin", fr.UploadBeginRequest(name="begin.bin", size=size, chunk_size=chunk))
        assert_error(r, "invalid_argument", subject)


# ---- chunks out of order, past the size, after commit ---------------------------------------------

SIZE = 200_000  # chunks at 0, 65536, 131072 (full) and 196608 (3392 bytes)


def chunk(conn: RawConn, uid: int, offset: int, data: bytes) -> Response:
    return conn.call("Xfer.UploadChunk", fr.UploadChunkRequest(upload_id=uid, offset=offset, data=data))


def test_misaligned_chunk(raw: RawConn) -> None:
    with raw:
        uid = begin(raw, "misaligned.bin", SIZE, CHUNK)
        assert_error(chunk(raw, uid, 100, b"\1" * CHUNK), "invalid_argument", "100", str(CHUNK))


def test_duplicate_chunk(raw: RawConn) -> None:
    with raw:
        uid = begin(raw, "dup.bin", SIZE, CHUNK)
        assert not chunk(raw, uid, CHUNK, b"\1" * CHUNK).error
        assert_error(chunk(raw, uid, CHUNK, b"\1" * CHUNK), "failed_precondition", str(CHUNK))


def test_chunk_past_declared_size(raw: RawConn) -> None:
    with raw:
        uid = begin(raw, "past.bin", SIZE, CHUNK)
        assert_error(chunk(raw, uid, 4 * CHUNK, b"\1" * CHUNK), "out_of_range", str(4 * CHUNK))
        # the last chunk, sent full-size, ends past the declared size too
        assert_error(chunk(raw, uid, 3 * CHUNK, b"\1" * CHUNK), "out_of_range")


def test_chunk_of_the_wrong_length(raw: RawConn) -> None:
    with raw:
        uid = begin(raw, "short.bin", SIZE, CHUNK)
        assert_error(chunk(raw, uid, 0, b"\1" * 100), "invalid_argument", "100")


def test_chunk_and_commit_after_commit(raw: RawConn) -> None:
    with raw:
        uid = begin(raw, "once.bin", 2 * MIN_CHUNK, MIN_CHUNK)
        assert not chunk(raw, uid, 0, HALF_A).error
        assert not chunk(raw, uid, MIN_CHUNK, HALF_B).error
        crc = zlib.crc32(HALF_A + HALF_B)
        c = raw.call("Xfer.UploadCommit", fr.UploadCommitRequest(upload_id=uid, crc32=crc))
        assert not c.error, c.error
        assert_error(chunk(raw, uid, 0, HALF_A), "not_found", str(uid))
        again = raw.call("Xfer.UploadCommit", fr.UploadCommitRequest(upload_id=uid, crc32=0))
        assert_error(again, "not_found", str(uid))


def test_unknown_upload_id(raw: RawConn) -> None:
    with raw:
        assert_error(chunk(raw, 12345, 0, b"x"), "not_found", "12345")
        r = raw.call("Xfer.UploadAbort", fr.UploadAbortRequest(upload_id=12345))
        assert_error(r, "not_found", "12345")


def test_commit_before_every_byte_arrived(raw: RawConn) -> None:
    with raw:
        uid = begin(raw, "incomplete.bin", 2 * MIN_CHUNK, MIN_CHUNK)
        assert not chunk(raw, uid, 0, HALF_A).error
        r = raw.call("Xfer.UploadCommit", fr.UploadCommitRequest(upload_id=uid, crc32=0))
        assert_error(r, "failed_precondition", str(MIN_CHUNK), str(2 * MIN_CHUNK))
        # any failed commit aborts the upload
        assert_error(chunk(raw, uid, MIN_CHUNK, HALF_B), "not_found", str(uid))
        assert_error(raw.call("Xfer.Stat", ft.StatRequest(name="incomplete.bin")), "not_found")


def test_commit_with_wrong_crc(raw: RawConn) -> None:
    data = b"0123456789"
    with raw:
        uid = begin(raw, "badcrc.bin", 10, 10)
        assert not chunk(raw, uid, 0, data).error
        r = raw.call("Xfer.UploadCommit", fr.UploadCommitRequest(upload_id=uid, crc32=0xDEADBEEF))
        assert_error(r, "data_loss", "0xdeadbeef", f"0x{zlib.crc32(data):08x}")
        assert_error(raw.call("Xfer.Stat", ft.StatRequest(name="badcrc.bin")), "not_found")
        assert_error(chunk(raw, uid, 0, data), "not_found")


def test_failed_commit_keeps_the_old_file(raw: RawConn) -> None:
    with raw:
        uid = begin(raw, SENTINEL, 10, 10)  # a second upload of the sentinel's name, bound to fail
        assert not chunk(raw, uid, 0, b"0123456789").error
        r = raw.call("Xfer.UploadCommit", fr.UploadCommitRequest(upload_id=uid, crc32=1))
        assert_error(r, "data_loss")
        st = raw.call("Xfer.Stat", ft.StatRequest(name=SENTINEL)).parse(ft.StatResponse)
        assert (st.size, st.crc32) == (len(SENTINEL_DATA), SENTINEL_CRC)  # type: ignore[attr-defined]


def test_abandoned_upload_leaves_nothing(frame_server: RunningServer) -> None:
    with RawConn(frame_server.addr("frame")) as raw:
        uid = begin(raw, "abandoned.bin", 2 * MIN_CHUNK, MIN_CHUNK)
        assert not chunk(raw, uid, 0, HALF_A).error
    with RawConn(frame_server.addr("frame")) as raw:
        assert_error(raw.call("Xfer.Stat", ft.StatRequest(name="abandoned.bin")), "not_found")


# ---- names ----------------------------------------------------------------------------------------

BAD_NAMES = {
    "slash": ("a/b", '"a/b"'),
    "backslash": ("a\\b", "name"),
    "dotdot": ("..", '".."'),
    "dot": (".", '"."'),
    "dotdot-path": ("../etc/passwd", "name"),
    "nul": ("a\x00b", "name"),
    "empty": ("", "name"),
    "too-long": ("x" * 256, "255"),
}


@pytest.mark.parametrize("case", list(BAD_NAMES), ids=list(BAD_NAMES))
def test_bad_names(raw: RawConn, case: str) -> None:
    name, subject = BAD_NAMES[case]
    with raw:
        r = raw.call("Xfer.UploadBegin", fr.UploadBeginRequest(name=name, size=1, chunk_size=1))
        assert_error(r, "invalid_argument", subject)
        assert_error(raw.call("Xfer.Stat", ft.StatRequest(name=name)), "invalid_argument")
        r = raw.call("Xfer.Read", fr.ReadRequest(name=name, offset=0, length=1))
        assert_error(r, "invalid_argument")
        echo_ok(raw)


def test_name_of_255_bytes_is_fine(raw: RawConn) -> None:
    name = "é" * 127 + "x"  # 255 bytes of UTF-8
    assert len(name.encode()) == 255
    with raw:
        uid = begin(raw, name, 1, 1)
        assert not chunk(raw, uid, 0, b"z").error
        c = raw.call("Xfer.UploadCommit", fr.UploadCommitRequest(upload_id=uid, crc32=zlib.crc32(b"z")))
        assert not c.error, c.error


def test_gen_names_are_reserved(raw: RawConn) -> None:
    with raw:
        r = raw.call("Xfer.UploadBegin", fr.UploadBeginRequest(name="gen:1:2", size=1, chunk_size=1))
        assert_error(r, "invalid_argument", '"gen:1:2"', "reserved")
        st = raw.call("Xfer.Stat", ft.StatRequest(name="gen:1:2"))
        assert st.parse(ft.StatResponse).size == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["gen:01:2", "gen:1", "gen:1:2:3", "gen:-1:2", "gen:1:18446744073709551616",
                                  f"gen:{MAX_FILE + 1}:0", "gen:x:1"])
def test_malformed_gen_names(raw: RawConn, name: str) -> None:
    with raw:
        r = raw.call("Xfer.Read", fr.ReadRequest(name=name, offset=0, length=10))
        assert_error(r, "invalid_argument")
        assert_error(raw.call("Xfer.Stat", ft.StatRequest(name=name)), "invalid_argument")


# ---- Meta (PROTOCOL.md "Meta"): bytes no client library would send -------------------------------------

def meta_entry(key: bytes, value: bytes) -> bytes:
    """A MetaRequest's entries field by hand: protobuf libraries refuse to encode invalid UTF-8."""
    inner = b"\x0a" + bytes([len(key)]) + key + b"\x12" + bytes([len(value)]) + value
    return b"\x0a" + bytes([len(inner)]) + inner


@pytest.mark.parametrize(("body", "named"), [
    (meta_entry(b"ok", b"1") + meta_entry(b"\xff\xfe", b"v"), "not valid UTF-8"),
    (meta_entry(b"k", b"\xc3\x28"), "not valid UTF-8"),
    (meta_entry(b"\xed\xa0\x80", b"v"), "not valid UTF-8"),  # a UTF-16 surrogate
    (meta_entry(b"a\x00b", b"v"), "entry 0 key contains NUL"),
    (b"\x0a\x05\x0a\x09abc", "malformed MetaRequest body"),  # an entry whose key runs past it
], ids=["key-ff", "value-c328", "key-surrogate", "key-nul", "truncated-entry"])
def test_meta_bytes_a_client_would_not_send(raw: RawConn, body: bytes, named: str) -> None:
    with raw:
        assert_error(raw.call("Xfer.Meta", body), "invalid_argument", named)
        ok = raw.call("Xfer.Meta", meta_entry(b"b", b"2") + meta_entry(b"a", b"1"))
        assert not ok.error, ok.error
        answer = ok.parse(ft.MetaResponse)
        assert [(e.key, e.value) for e in answer.entries] == [("a", "1"), ("b", "2")]  # type: ignore[attr-defined]


def test_meta_at_the_frame_limit_is_answered(raw: RawConn) -> None:
    """1024 entries of the longest key and value (about 4.4 MiB): within --max-frame both ways."""
    body = b"".join(b"\x0a\x86\x22\x0a\x80\x02" + f"{i:0256d}".encode() + b"\x12\x80\x20" + b"v" * 4096
                    for i in range(1024))
    with raw:
        r = raw.call("Xfer.Meta", body)
        assert not r.error, r.error
        assert len(r.parse(ft.MetaResponse).entries) == 1024  # type: ignore[attr-defined]
