"""The frame protocol's bytes (PROTOCOL.md "Frames"): encoding, and a stateless parser.

    frame_len (4, BE) | header_len (4, BE) | header (protobuf) | body (protobuf)

frame_len counts the bytes after itself: 4 + header_len + body_len.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from google.protobuf.message import DecodeError, Message

from xfer.v1 import file_transfer_pb2, frame_pb2

DEFAULT_MAX_FRAME = 8 << 20  # frame_len limit (bytes after the length field)
MAX_HEADER = 1024
PREFIX_LEN = 8  # frame_len + header_len
MIN_FRAME_LEN = 4

_PREFIX = struct.Struct(">II")
_U32 = struct.Struct(">I")

Buffer = bytes | bytearray | memoryview

# method → (request type, response type)
METHODS: dict[str, tuple[type[Message], type[Message]]] = {
    "Xfer.UploadBegin": (frame_pb2.UploadBeginRequest, frame_pb2.UploadBeginResponse),
    "Xfer.UploadChunk": (frame_pb2.UploadChunkRequest, frame_pb2.UploadChunkResponse),
    "Xfer.UploadCommit": (frame_pb2.UploadCommitRequest, frame_pb2.UploadCommitResponse),
    "Xfer.UploadAbort": (frame_pb2.UploadAbortRequest, frame_pb2.UploadAbortResponse),
    "Xfer.Read": (frame_pb2.ReadRequest, frame_pb2.ReadResponse),
    "Xfer.Echo": (file_transfer_pb2.EchoRequest, file_transfer_pb2.EchoResponse),
    "Xfer.Stat": (file_transfer_pb2.StatRequest, file_transfer_pb2.StatResponse),
    "Xfer.Meta": (file_transfer_pb2.MetaRequest, file_transfer_pb2.MetaResponse),
}


@dataclass(frozen=True)
class ParseResult:
    """What a parser says about the bytes received so far."""

    outcome: Literal["need_more", "frame", "error"]
    size: int = 0  # total bytes of the frame (4 + frame_len) when outcome == "frame"
    code: str = ""  # error code when outcome == "error"
    message: str = ""

    def __str__(self) -> str:
        if self.outcome == "frame":
            return f"frame:{self.size}"
        if self.outcome == "error":
            return f"error:{self.code}"
        return "need_more"


NEED_MORE = ParseResult("need_more")


def parse_frame(buf: Buffer, max_frame: int = DEFAULT_MAX_FRAME) -> ParseResult:
    """Stateless: checks the limits as soon as the bytes that carry them are there."""
    have = len(buf)
    if have < 4:
        return NEED_MORE
    (frame_len,) = _U32.unpack_from(buf, 0)
    if frame_len > max_frame:
        return ParseResult("error", code="resource_exhausted",
                           message=f"frame length {frame_len} exceeds limit {max_frame}")
    if frame_len < MIN_FRAME_LEN:
        return ParseResult("error", code="invalid_argument",
                           message=f"frame length {frame_len} is below the minimum {MIN_FRAME_LEN}")
    if have < PREFIX_LEN:
        return NEED_MORE
    (header_len,) = _U32.unpack_from(buf, 4)
    if header_len > MAX_HEADER:
        return ParseResult("error", code="invalid_argument",
                           message=f"header length {header_len} exceeds limit {MAX_HEADER}")
    if header_len > frame_len - 4:
        return ParseResult("error", code="invalid_argument",
                           message=f"header length {header_len} exceeds frame length {frame_len} - 4")
    total = 4 + frame_len
    if have < total:
        return NEED_MORE
    return ParseResult("frame", size=total)


def frame_prefix(header: bytes, body_len: int) -> bytes:
    """frame_len + header_len + header: what goes before a body of body_len bytes."""
    return _PREFIX.pack(4 + len(header) + body_len, len(header)) + header


def request_header(seq: int, method: str) -> bytes:
    return frame_pb2.RequestHeader(method=method, seq=seq).SerializeToString()


def response_header(seq: int, method: str, error: str = "") -> bytes:
    return frame_pb2.ResponseHeader(method=method, seq=seq, error=error).SerializeToString()


def encode_request(seq: int, method: str, body: Buffer = b"") -> bytes:
    return frame_prefix(request_header(seq, method), len(body)) + bytes(body)


def encode_response(seq: int, method: str, error: str = "", body: Buffer = b"") -> bytes:
    return frame_prefix(response_header(seq, method, error), len(body)) + bytes(body)


def split_frame(frame: Buffer) -> tuple[memoryview, memoryview]:
    """(header bytes, body bytes) of one whole frame, as views (no copy)."""
    view = memoryview(frame)
    frame_len, header_len = _PREFIX.unpack_from(view, 0)
    if len(view) != 4 + frame_len or header_len > frame_len - 4:
        raise ValueError(f"not one whole frame: {len(view)} bytes, frame_len {frame_len}, "
                         f"header_len {header_len}")
    return view[PREFIX_LEN : PREFIX_LEN + header_len], view[PREFIX_LEN + header_len :]


def decode_request(frame: Buffer) -> tuple[frame_pb2.RequestHeader, memoryview]:
    header, body = split_frame(frame)
    msg = frame_pb2.RequestHeader()
    msg.ParseFromString(header)  # type: ignore[arg-type]  # protobuf parses any buffer; its stubs say bytes
    return msg, body


def decode_response(frame: Buffer) -> tuple[frame_pb2.ResponseHeader, memoryview]:
    header, body = split_frame(frame)
    msg = frame_pb2.ResponseHeader()
    try:
        msg.ParseFromString(header)  # type: ignore[arg-type]  # any buffer, as above
    except DecodeError as e:
        raise ValueError(f"malformed response header: {e}") from e
    return msg, body


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def chunk_request_prefix(upload_id: int, offset: int, data_len: int) -> bytes:
    """The canonical UploadChunkRequest encoding up to (not including) its data bytes.

    Lets a client send a chunk's data straight from the caller's buffer: prefix + data is exactly
    UploadChunkRequest{upload_id, offset, data}.SerializeToString().
    """
    out = bytearray()
    if upload_id:
        out += b"\x08" + _varint(upload_id)
    if offset:
        out += b"\x10" + _varint(offset)
    if data_len:
        out += b"\x1a" + _varint(data_len)
    return bytes(out)


def body_parts(body: Message | Buffer | Sequence[Buffer]) -> list[Buffer]:
    """A request body as a list of buffers: a message is serialized, raw bytes go as they are."""
    if isinstance(body, Message):
        return [body.SerializeToString()]
    if isinstance(body, bytes | bytearray | memoryview):
        return [body]
    return list(body)
