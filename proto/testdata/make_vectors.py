"""Writes gen.vectors, frames.vectors, bodies.vectors, headers.vectors, quote.vectors and meta.vectors (PROTOCOL.md,
"Test vectors").

Run from the repository root: .venv/bin/python proto/testdata/make_vectors.py [OUT_DIR]
The committed files are the contract; rerunning must give no diff (a test checks it).
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

from py_client.content import crc32, gen_bytes
from py_client.meta import expected_response
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


QUOTE_MAX = 64  # bytes of a subject that an error quotes (PROTOCOL.md "Quoting")


def utf8_len(b: bytes, i: int) -> int:
    """Length of the valid UTF-8 character at b[i], or 0 when b[i] does not start one."""
    c = b[i]
    if c < 0x80:
        return 1
    need = 2 if 0xC2 <= c <= 0xDF else 3 if 0xE0 <= c <= 0xEF else 4 if 0xF0 <= c <= 0xF4 else 0
    if not need or i + need > len(b):
        return 0
    try:
        b[i:i + need].decode("utf-8")  # rejects overlongs, surrogates and code points over U+10FFFF
    except UnicodeDecodeError:
        return 0
    return need


def quote(b: bytes) -> str:
    """The reference of PROTOCOL.md "Quoting"; the servers' quoting must give the same strings."""
    out, i = [], 0
    while i < len(b):
        k = utf8_len(b, i)
        if i + max(k, 1) > QUOTE_MAX:
            break
        c = b[i]
        if k > 1:
            out.append(b[i:i + k].decode("utf-8"))
        elif k == 1 and c in b'"\\':
            out.append("\\" + chr(c))
        elif k == 1 and 0x20 <= c < 0x7F:
            out.append(chr(c))
        else:
            out.append(f"\\x{c:02x}")
        i += max(k, 1)
    return '"' + "".join(out) + '"' + ("..." if i < len(b) else "")


def quote_vectors() -> list[str]:
    a = b"a"
    cases = [
        b"", b"a.bin", b'a"b\\c', bytes([0, 1, 9, 10, 0x1F, 0x7F]), bytes(range(0x20, 0x7F)),
        "é日本😀".encode(), b"Xfer.Echo\x00",
        b"\xff", b"\xfe\x80", b"\xc0\x80", b"\xc1\xbf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80",
        b"ab\xe6\x97", b"\x80abc", b"\xe0\x80\x80", b"\xf0\x80\x80\x80",
        a * 64, a * 65, a * 62 + "é".encode(), a * 63 + "é".encode(), a * 61 + "😀".encode(), a * 60 + "😀".encode(),
        a * 62 + "日".encode() + a, a * 63 + b"\xff" + a, a * 63 + b"\xe6\x97", b"\xff" * 64, b"\xff" * 65,
        "é".encode() * 300, b'"' * 65, bytes(range(256)),
    ]
    return ["# input_hex\tquoted"] + [f"{c.hex() or '-'}\t{quote(c)}" for c in cases]


def varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    return bytes(out + bytes([v]))


def method_field(m: bytes) -> bytes:
    return b"\x0a" + varint(len(m)) + m


def seq_field(s: int) -> bytes:
    return b"\x10" + varint(s)


def header_vectors() -> list[str]:
    """Request headers a hostile client may send, and what PROTOCOL.md "Request headers" makes of them."""
    echo = b"Xfer.Echo"
    bad = "conn_error:invalid_argument"
    cases: list[tuple[bytes, str]] = [
        (b"", bad),                                                    # empty: seq absent
        (method_field(echo), bad),                                     # seq absent
        (method_field(echo) + b"\x10\x00", bad),                       # seq 0 on the wire
        (method_field(echo) + seq_field(1), ""),
        (seq_field(1), ""),                                            # method absent: empty name
        (method_field(echo) + seq_field(2**64 - 1), ""),               # max seq
        (method_field(echo) + b"\x10" + b"\xff" * 9 + b"\x02", bad),   # 10-byte varint over 64 bits
        (method_field(echo) + b"\x10" + b"\x81" + b"\x80" * 9 + b"\x00", bad),  # 11-byte varint
        (method_field(echo) + b"\x10" + b"\x81\x80\x80\x80\x80\x80\x80\x80\x80\x00", ""),  # 10 bytes, non-minimal 1
        (method_field(echo) + b"\x10\x80", bad),                       # truncated varint
        (b"\x0a\x05Xfe", bad),                                         # length past the header
        (b"\x08\x01" + seq_field(1), bad),                             # method as a varint
        (b"\x0d\x00\x00\x00\x00" + seq_field(1), bad),                 # method as fixed32
        (b"\x09" + b"\x00" * 8 + seq_field(1), bad),                    # method as fixed64
        (method_field(echo) + b"\x12\x01\x01", bad),                    # seq as bytes
        (method_field(echo) + b"\x15\x01\x00\x00\x00", bad),            # seq as fixed32
        (method_field(echo) + seq_field(1) + b"\x18\x07", ""),         # unknown varint skipped
        (method_field(echo) + seq_field(1) + b"\x22\x02hi", ""),       # unknown bytes skipped
        (method_field(echo) + seq_field(1) + b"\x7d\x01\x02\x03\x04", ""),  # unknown fixed32 (field 15)
        (method_field(echo) + seq_field(1) + b"\xf9\x01" + b"\x00" * 8, ""),  # unknown fixed64 (field 31)
        (method_field(echo) + seq_field(1) + b"\x1b\x1c", bad),        # group wire types
        (method_field(echo) + seq_field(1) + b"\x1e", bad),             # wire type 6
        (b"\x00\x00" + method_field(echo) + seq_field(1), bad),        # field number 0
        (method_field(echo) + seq_field(1) + b"\x80\x80\x80\x80\x10\x00", bad),  # field number 2^29, over the maximum
        (seq_field(1) + seq_field(7) + method_field(b"Xfer.Nope") + method_field(echo), ""),  # last wins
        (method_field(echo) + seq_field(5) + b"\x10\x00", bad),          # last seq is 0
        (method_field(b"\xff") + method_field(echo) + seq_field(1), bad),  # an earlier method not UTF-8
        (method_field(b"Xfer.\xff") + seq_field(1), bad),                # not UTF-8
        (method_field(b"Xfer.\xed\xa0\x80") + seq_field(1), bad),        # a surrogate is not UTF-8
        (method_field(b"Xfer.\xc0\x80") + seq_field(1), bad),            # overlong NUL
        (method_field(echo + b"\x00") + seq_field(1), "call_error:invalid_argument"),
        (method_field(b"\x00") + seq_field(3), "call_error:invalid_argument"),
        (method_field(b"\x00") + b"\x10\x00", bad),                      # seq 0 wins over NUL
        (method_field(b"Xfer." + b"x" * 1000) + seq_field(9), ""),      # long but valid
        (method_field("Xfer.日本".encode()) + seq_field(1), ""),
    ]
    rows = ["# header_hex\toutcome"]
    for h, outcome in cases:
        if not outcome:
            ref = fr.RequestHeader()
            ref.ParseFromString(h)
            outcome = f"ok:{ref.seq}:{ref.method.encode().hex() or '-'}"
        rows.append(f"{h.hex() or '-'}\t{outcome}")
    return rows


def _entry(key: bytes, value: bytes) -> bytes:
    """A MetaEntry field of a MetaRequest, by hand, so invalid UTF-8 and NUL can be written."""
    inner = b""
    if key:
        inner += b"\x0a" + varint(len(key)) + key
    if value:
        inner += b"\x12" + varint(len(value)) + value
    return b"\x0a" + varint(len(inner)) + inner


def meta_vectors() -> list[str]:
    """(name, max_entries, request body, outcome): what a server answers to a MetaRequest body."""
    rows = ["# name\tmax_entries\tbody_hex\toutcome: ok:<response body hex> or <code>:<what the message names>"]
    ok: list[tuple[str, int, list[tuple[str, str]]]] = [
        ("empty", 1024, []),
        ("one", 1024, [("a", "1")]),
        ("unsorted", 1024, [("b", "2"), ("a", "1"), ("c", "")]),
        ("bytewise", 1024, [("\u00e9t\u00e9", "summer"), ("zebra", "z"), ("Zed", "cap")]),
        ("longest", 1024, [("k" * 256, "v" * 4096)]),
        ("at_limit", 4, [(f"key{i}", f"value{i}") for i in range(4)]),
    ]
    for name, limit, entries in ok:
        body = b"".join(_entry(k.encode(), v.encode()) for k, v in entries)
        resp = expected_response(entries).SerializeToString(deterministic=True)
        rows.append(f"{name}\t{limit}\t{body.hex() or '-'}\tok:{resp.hex() or '-'}")
    bad: list[tuple[str, int, bytes, str]] = [
        ("over_limit", 4, b"".join(_entry(f"k{i}".encode(), b"v") for i in range(5)), "limit 4"),
        ("empty_key", 1024, _entry(b"", b"v"), "key length 0"),
        ("long_key", 1024, _entry(b"k" * 257, b"v"), "key length 257"),
        ("long_value", 1024, _entry(b"k", b"v" * 4097), "value length 4097"),
        ("duplicate", 1024, _entry(b"a", b"1") + _entry(b"b", b"2") + _entry(b"a", b"3"), 'duplicate key "a"'),
        ("nul_key", 1024, _entry(b"a\0b", b"v"), "key contains NUL"),
        ("nul_value", 1024, _entry(b"a", b"v\0"), "value contains NUL"),
        ("utf8_key", 1024, _entry(b"\xff", b"v"), "UTF-8"),
        ("utf8_value", 1024, _entry(b"k", b"\xc3\x28"), "UTF-8"),
    ]
    rows += [f"{name}\t{limit}\t{body.hex()}\tinvalid_argument:{what}" for name, limit, body, what in bad]
    return rows


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    (out / "gen.vectors").write_text("\n".join(gen_vectors()) + "\n")
    (out / "frames.vectors").write_text("\n".join(frame_vectors()) + "\n")
    rows = ["# type\tfields\tbody_hex"] + [f"{t}\t{f}\t{b.hex() or '-'}" for t, f, b in body_cases()]
    (out / "bodies.vectors").write_text("\n".join(rows) + "\n")
    (out / "headers.vectors").write_text("\n".join(header_vectors()) + "\n")
    (out / "quote.vectors").write_text("\n".join(quote_vectors()) + "\n")
    (out / "meta.vectors").write_text("\n".join(meta_vectors()) + "\n")


if __name__ == "__main__":
    main()
