"""Writes gen.vectors, frames.vectors and bodies.vectors (PROTOCOL.md, "Test vectors").

Run from the repository root: .venv/bin/python proto/testdata/make_vectors.py [OUT_DIR]
The committed files are the contract; rerunning must give no diff (a test checks it).
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

from py_client.content import crc32, gen_bytes
from xfer.v1 import file_transfer_pb2 as ft
from xfer.v1 import frame_pb2 as fr

HERE = Path(__file__).parent
MAX_FRAME = 8 << 20


def frame(header: bytes, body: bytes) -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


def gen_vectors() -> list[str]:
    rows = ["# size\tseed\tcrc32\toffset\thex of up to 32 bytes at offset"]
    cases = [(0, 0, 0), (1, 0, 0), (7, 1, 0), (8, 1, 0), (9, 1, 3), (100, 42, 50), (65536, 7, 65500),
             (1 << 20, 12345, 999_999), (10 << 20, 2**64 - 1, (10 << 20) - 32), (3000001, 9, 1500003)]
    for size, seed, offset in cases:
        data = gen_bytes(size, seed, offset, 32)
        rows.append(f"{size}\t{seed}\t{crc32(gen_bytes(size, seed)):08x}\t{offset}\t{data.hex() or '-'}")
    return rows


def body_cases() -> list[tuple[str, str, bytes]]:
    """(type, fields, encoded) for messages with every field set, and the empty message."""
    msgs = [
        (fr.UploadBeginRequest(name="a.bin", size=1 << 20, chunk_size=65536), "name=a.bin,size=1048576,chunk_size=65536"),
        (fr.UploadBeginResponse(upload_id=0xFEDCBA9876543210), "upload_id=18364758544493064720"),
        (fr.UploadChunkRequest(upload_id=5, offset=65536, data=b"\x00\x01\xff"), "upload_id=5,offset=65536,data=0001ff"),
        (fr.UploadChunkResponse(received=131072), "received=131072"),
        (fr.UploadCommitRequest(upload_id=5, crc32=0xCBF43926), "upload_id=5,crc32=3421780262"),
        (fr.UploadCommitResponse(size=9, crc32=0xCBF43926), "size=9,crc32=3421780262"),
        (fr.UploadAbortRequest(upload_id=5), "upload_id=5"),
        (fr.UploadAbortResponse(), "-"),
        (fr.ReadRequest(name="gen:100:42", offset=64, length=36), "name=gen:100:42,offset=64,length=36"),
        (fr.ReadResponse(data=b"hi", size=100, crc32=1), "data=6869,size=100,crc32=1"),
        (ft.EchoRequest(payload=b"ping"), "payload=70696e67"),
        (ft.EchoResponse(), "-"),
        (ft.StatRequest(name="x"), "name=x"),
        (ft.StatResponse(name="x", size=2**64 - 1, crc32=2**32 - 1), "name=x,size=18446744073709551615,crc32=4294967295"),
    ]
    return [(type(m).__name__, fields, m.SerializeToString(deterministic=True)) for m, fields in msgs]


def frame_vectors() -> list[str]:
    rows = ["# request\tseq\tmethod\tbody_hex\tframe_hex",
            "# response\tseq\tmethod\terror\tbody_hex\tframe_hex",
            "# parse\tmax_frame\toutcome\thex"]
    echo = ft.EchoRequest(payload=b"hello").SerializeToString()
    for seq, method, body in [(1, "Xfer.Echo", echo), (2**64 - 1, "Xfer.Stat", ft.StatRequest(name="f").SerializeToString()),
                              (300, "Xfer.UploadAbort", b"")]:
        h = fr.RequestHeader(method=method, seq=seq).SerializeToString()
        rows.append(f"request\t{seq}\t{method}\t{body.hex() or '-'}\t{frame(h, body).hex()}")
    for seq, method, err, body in [(1, "Xfer.Echo", "", ft.EchoResponse(payload=b"hello").SerializeToString()),
                                   (7, "Xfer.Read", 'not_found: file "x" not found', b""),
                                   (0, "", "resource_exhausted: frame length 9437184 exceeds limit 8388608", b"")]:
        h = fr.ResponseHeader(method=method, seq=seq, error=err).SerializeToString()
        rows.append(f"response\t{seq}\t{method or '-'}\t{err or '-'}\t{body.hex() or '-'}\t{frame(h, body).hex()}")
    good = frame(fr.RequestHeader(method="Xfer.Echo", seq=1).SerializeToString(), echo)
    parse = [
        (MAX_FRAME, "need_more", b""),
        (MAX_FRAME, "need_more", good[:3]),
        (MAX_FRAME, "need_more", good[:8]),
        (MAX_FRAME, "need_more", good[:-1]),
        (MAX_FRAME, f"frame:{len(good)}", good),
        (MAX_FRAME, f"frame:{len(good)}", good + good[:5]),  # a second frame begun
        (MAX_FRAME, "error:resource_exhausted", struct.pack(">I", MAX_FRAME + 1)),
        (64, "error:resource_exhausted", struct.pack(">I", 65) + b"\x00" * 8),
        (MAX_FRAME, "error:invalid_argument", struct.pack(">I", 3) + b"\x00\x00\x00"),
        (MAX_FRAME, "error:invalid_argument", struct.pack(">II", 10, 1025)),  # header over 1024
        (MAX_FRAME, "error:invalid_argument", struct.pack(">II", 10, 7)),     # header past the frame
        (MAX_FRAME, "frame:8", struct.pack(">II", 4, 0)),                     # empty header, empty body
    ]
    rows += [f"parse\t{limit}\t{outcome}\t{data.hex() or '-'}" for limit, outcome, data in parse]
    return rows


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    (out / "gen.vectors").write_text("\n".join(gen_vectors()) + "\n")
    (out / "frames.vectors").write_text("\n".join(frame_vectors()) + "\n")
    rows = ["# type\tfields\tbody_hex"] + [f"{t}\t{f}\t{b.hex() or '-'}" for t, f, b in body_cases()]
    (out / "bodies.vectors").write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
