"""Upload and download over one frame connection (plaintext RawConn or TlsConn alike), chunk calls pipelined:
every request of a pass is sent before its answers are read, so the server answers in any order (matched by
seq) and writes large answers while it still reads."""

from __future__ import annotations

import zlib

from tests.support.raw_frame import RawConn, Response
from xfer.v1 import frame_pb2

CHUNK = 64 << 10
READ_LEN = 1 << 20


def answers(conn: RawConn, seqs: list[int]) -> dict[int, Response]:
    """The answers of the calls seqs, in whatever order they come."""
    got: dict[int, Response] = {}
    while len(got) < len(seqs):
        r = conn.response()
        assert r.seq in seqs and r.seq not in got, f"unexpected answer seq {r.seq}"
        got[r.seq] = r
    return got


def upload(conn: RawConn, name: str, data: bytes, chunk: int = CHUNK) -> tuple[int, int]:
    """Uploads data whole; returns the committed (size, crc32)."""
    begin = conn.call("Xfer.UploadBegin", frame_pb2.UploadBeginRequest(name=name, size=len(data), chunk_size=chunk))
    uid = begin.parse(frame_pb2.UploadBeginResponse).upload_id  # type: ignore[attr-defined]
    seqs = [
        conn.request(
            "Xfer.UploadChunk", frame_pb2.UploadChunkRequest(upload_id=uid, offset=off, data=data[off : off + chunk])
        )
        for off in range(0, len(data), chunk)
    ]
    for r in answers(conn, seqs).values():
        assert not r.error, r.error
    commit = conn.call("Xfer.UploadCommit", frame_pb2.UploadCommitRequest(upload_id=uid, crc32=zlib.crc32(data)))
    msg = commit.parse(frame_pb2.UploadCommitResponse)
    return msg.size, msg.crc32  # type: ignore[attr-defined]


def download(conn: RawConn, name: str, size: int, length: int = READ_LEN) -> tuple[bytes, list[bytes]]:
    """Reads a file of size bytes whole; returns its bytes and each Read answer's raw body, in offset order."""
    offsets = list(range(0, max(size, 1), length))
    seqs = [conn.request("Xfer.Read", frame_pb2.ReadRequest(name=name, offset=off, length=length)) for off in offsets]
    got = answers(conn, seqs)
    bodies = [got[s].body for s in seqs]
    data = bytearray()
    for s in seqs:
        msg = got[s].parse(frame_pb2.ReadResponse)
        data += msg.data  # type: ignore[attr-defined]
    return bytes(data), bodies
