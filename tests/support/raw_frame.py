"""A raw frame-protocol socket for bad-input tests: send any bytes, read responses, wait for EOF.

Every operation has a bounded timeout; nothing sleeps.
"""

from __future__ import annotations

import select
import socket
import time
from dataclasses import dataclass

from google.protobuf.message import Message

from py_client.frame import decode_response, encode_request, parse_frame
from xfer.v1 import frame_pb2

IO_TIMEOUT_S = 10.0


@dataclass
class Response:
    seq: int
    method: str
    error: str
    body: bytes

    @property
    def code(self) -> str:
        return self.error.partition(": ")[0] if self.error else ""

    def parse(self, msg_type: type[Message]) -> Message:
        assert not self.error, f"call failed: {self.error}"
        m = msg_type()
        m.ParseFromString(self.body)
        return m


class ConnectionClosed(AssertionError):
    pass


class RawConn:
    def __init__(self, address: str, timeout: float = IO_TIMEOUT_S) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.buf = bytearray()
        self.seq = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(self, method: str, body: Message | bytes = b"", seq: int | None = None) -> int:
        if seq is None:
            self.seq += 1
            seq = self.seq
        raw = body.SerializeToString() if isinstance(body, Message) else body
        self.send(encode_request(seq, method, raw))
        return seq

    def _read_more(self, deadline: float) -> bool:
        """Reads once; False at EOF (or a reset, which is also the server closing)."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no data from the server in time")
        ready, _, _ = select.select([self.sock], [], [], remaining)
        if not ready:
            raise TimeoutError("no data from the server in time")
        try:
            data = self.sock.recv(1 << 20)
        except ConnectionResetError:
            return False
        if not data:
            return False
        self.buf += data
        return True

    def response(self, timeout: float | None = None) -> Response:
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            r = parse_frame(self.buf, 64 << 20)
            if r.outcome == "frame":
                hdr, body = decode_response(bytes(self.buf[: r.size]))
                resp = Response(hdr.seq, hdr.method, hdr.error, bytes(body))
                del self.buf[: r.size]
                return resp
            assert r.outcome == "need_more", f"server sent a bad frame: {r}"
            if not self._read_more(deadline):
                raise ConnectionClosed(f"connection closed with {len(self.buf)} bytes of a frame pending")

    def call(self, method: str, body: Message | bytes = b"") -> Response:
        seq = self.request(method, body)
        resp = self.response()
        assert resp.seq == seq, f"response seq {resp.seq} for request {seq}"
        return resp

    def wait_closed(self, timeout: float) -> list[Response]:
        """Reads until the server closes the connection; returns the responses it sent first."""
        deadline = time.monotonic() + timeout
        out: list[Response] = []
        while True:
            try:
                out.append(self.response(max(deadline - time.monotonic(), 1e-3)))
            except ConnectionClosed:
                return out

    def connection_error(self, timeout: float = IO_TIMEOUT_S) -> Response:
        """Expects exactly one seq-0 response and then EOF (PROTOCOL.md "Connection errors")."""
        got = self.wait_closed(timeout)
        assert len(got) == 1, f"want one seq-0 response before close, got {got}"
        assert got[0].seq == 0 and got[0].method == "" and got[0].error, got[0]
        assert got[0].body == b"", "a response with an error has an empty body"
        return got[0]


def begin(conn: RawConn, name: str, size: int, chunk: int) -> int:
    r = conn.call("Xfer.UploadBegin", frame_pb2.UploadBeginRequest(name=name, size=size, chunk_size=chunk))
    msg = r.parse(frame_pb2.UploadBeginResponse)
    assert isinstance(msg, frame_pb2.UploadBeginResponse) and msg.upload_id != 0
    return msg.upload_id
