"""FrameClient: the framed TCP protocol with pipelining (PROTOCOL.md "Frames").

One connection, up to `inflight` calls outstanding, driven by one thread with a send-window loop: send
until the window is full, then read responses and match them by seq (they may arrive in any order).
The socket is non-blocking and every wait goes through select.poll, so the same code runs with plain
threads and under gevent's monkey-patching (Locust). While a large request is being sent, responses
that arrive are read too, so neither side can block the other.
"""

from __future__ import annotations

import os
import select
import socket
import ssl
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import BinaryIO, TypeVar, cast

from google.protobuf.message import DecodeError, Message

from py_client import meta
from py_client._source import UploadSource
from py_client.errors import XferError
from py_client.frame import (
    DEFAULT_MAX_FRAME,
    METHODS,
    PREFIX_LEN,
    Buffer,
    body_parts,
    chunk_request_prefix,
    decode_response,
    frame_prefix,
    parse_frame,
    request_header,
)
from py_client.meta import Entries
from py_client.results import StatResult, TransferResult
from py_client.target import split_host_port
from py_client.tls import TLSOptions
from xfer.v1 import file_transfer_pb2, frame_pb2

M = TypeVar("M", bound=Message)

# A request body: a message, raw bytes (tests send malformed bodies), or buffers sent back to back.
Body = Message | Buffer | Sequence[Buffer]
# (method, body) or (method, body, response type); the type defaults to the method's from METHODS.
CallSpec = tuple[str, Body] | tuple[str, Body, type[Message]]

_RECV_SIZE = 256 << 10
_BIG_FRAME = 256 << 10  # frames larger than this are received straight into their own buffer
_POLL_IN = select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP
# What one TLS send may hand OpenSSL: it takes all of it or nothing, and a send that would block must be
# retried with the same bytes.
_TLS_SEND = 256 << 10
# Non-blocking TLS reads and writes that must wait for the socket, as BlockingIOError for plain ones.
_WOULD_BLOCK = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)


class _ConnectionLost(Exception):
    """Internal: the connection can no longer be used; carries the error every in-flight call gets."""

    def __init__(self, error: XferError) -> None:
        super().__init__(str(error))
        self.error = error


class FrameClient:
    """Client for `frame://host:port`. Not meant to be shared by threads at once (calls serialize).

    With `tls`, the connection is TLS (PROTOCOL.md "TLS"); a failed handshake raises `unavailable` saying why,
    and with `tls.resume` each new connection resumes the session of the one before.
    """

    def __init__(self, address: str, *, inflight: int = 8, timeout: float = 60.0,
                 max_frame: int = 2 * DEFAULT_MAX_FRAME, tls: TLSOptions | None = None) -> None:
        if inflight < 1:
            raise ValueError(f"inflight {inflight} must be at least 1")
        if timeout <= 0:
            raise ValueError(f"timeout {timeout} must be positive")
        self.address = address
        self._host, self._port = split_host_port(address)
        self.inflight = inflight
        self.timeout = timeout
        self.max_frame = max_frame
        self._sock: socket.socket | None = None
        self._seq = 0
        self._rbuf = bytearray()
        self._big: bytearray | None = None
        self._big_fill = 0
        self._frames: deque[bytes | bytearray] = deque()
        self._lock = threading.Lock()
        self.tls = tls
        self._tls_context = tls.context() if tls is not None else None
        self._tls_session: ssl.SSLSession | None = None
        self.tls_resumed: bool | None = None  # whether the last TLS connection resumed a session

    # ---- connection -------------------------------------------------------------------------------

    def _connect(self) -> socket.socket:
        if self._sock is not None:
            return self._sock
        try:
            sock = socket.create_connection((self._host, self._port), timeout=self.timeout)
        except OSError as e:
            raise XferError("unavailable", f"connect to {self.address}: {e}") from e
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._tls_context is not None:
            sock = self._handshake(sock)
        sock.setblocking(False)
        self._sock = sock
        self._rbuf.clear()
        self._big, self._big_fill = None, 0
        self._frames.clear()
        return sock

    def _handshake(self, sock: socket.socket) -> ssl.SSLSocket:
        """The TLS handshake, within the call timeout the socket carries."""
        assert self._tls_context is not None and self.tls is not None
        try:
            tsock = self._tls_context.wrap_socket(sock, server_hostname=self.tls.name_for(self._host),
                                                  session=self._tls_session if self.tls.resume else None)
        except ssl.SSLError as e:
            sock.close()
            raise XferError("unavailable", f"TLS handshake with {self.address} failed: {self.tls.explain(e)}") from e
        except OSError as e:
            sock.close()
            raise XferError("unavailable", f"TLS handshake with {self.address} failed: {e}") from e
        self.tls_resumed = tsock.session_reused
        return tsock

    def _keep_session(self, sock: socket.socket) -> None:
        """Keeps the connection's session for the next one: TLS 1.3 sends its ticket after the handshake, so
        the session can resume only once a response has been read (which handled the ticket)."""
        if isinstance(sock, ssl.SSLSocket) and self.tls is not None and self.tls.resume:
            session = sock.session
            if session is not None and session.has_ticket:
                self._tls_session = session

    def close(self) -> None:
        sock, self._sock = self._sock, None
        self._rbuf = bytearray()
        self._big, self._big_fill = None, 0
        self._frames.clear()
        if sock is not None:
            self._keep_session(sock)
            sock.close()

    def __enter__(self) -> FrameClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def _lost(self, code: str, message: str) -> _ConnectionLost:
        """The error for a dead connection; a seq-0 response already received explains it better."""
        for frame in self._frames:
            try:
                hdr, _ = decode_response(frame)
            except ValueError:
                continue
            if hdr.seq == 0 and hdr.error:
                return _ConnectionLost(XferError.parse(hdr.error))
        return _ConnectionLost(XferError(code, message))

    # ---- bytes in and out -------------------------------------------------------------------------

    def _wait(self, sock: socket.socket, events: int) -> int:
        if events & select.POLLIN and isinstance(sock, ssl.SSLSocket) and sock.pending():
            return select.POLLIN  # decrypted bytes wait inside OpenSSL, not in the socket
        poller = select.poll()
        poller.register(sock, events)
        ready = poller.poll(self.timeout * 1000.0)
        if not ready:
            raise self._lost("deadline_exceeded",
                             f"no progress on the connection to {self.address} in {self.timeout:g}s")
        return int(ready[0][1])

    def _recv_some(self, sock: socket.socket) -> bool:
        """Reads what is there without blocking; False when nothing was. Raises at EOF."""
        try:
            if self._big is not None:
                n = sock.recv_into(memoryview(self._big)[self._big_fill :])
                if n:
                    self._big_fill += n
                    if self._big_fill == len(self._big):
                        self._frames.append(self._big)
                        self._big, self._big_fill = None, 0
            else:
                data = sock.recv(_RECV_SIZE)
                n = len(data)
                if n:
                    self._rbuf += data
                    self._extract_frames()
        except _WOULD_BLOCK:
            return False
        except OSError as e:
            raise self._lost("unavailable", f"connection to {self.address}: {e}") from e
        if n == 0:
            raise self._lost("unavailable", f"connection to {self.address} closed by the server")
        return True

    def _extract_frames(self) -> None:
        while True:
            result = parse_frame(self._rbuf, self.max_frame)
            if result.outcome == "frame":
                self._frames.append(bytes(memoryview(self._rbuf)[: result.size]))
                del self._rbuf[: result.size]
                continue
            if result.outcome == "error":
                raise self._lost(result.code, f"bad frame from the server: {result.message}")
            if len(self._rbuf) >= PREFIX_LEN:
                total = 4 + int.from_bytes(self._rbuf[:4], "big")
                if total > _BIG_FRAME:
                    self._big = bytearray(total)
                    self._big[: len(self._rbuf)] = self._rbuf
                    self._big_fill = len(self._rbuf)
                    self._rbuf.clear()
            return

    def _send(self, sock: socket.socket, parts: list[Buffer]) -> None:
        views = [v if v.format == "B" and v.ndim == 1 else v.cast("B")
                 for v in (memoryview(p) for p in parts) if v.nbytes]
        while views:
            try:
                n = sock.send(views[0][:_TLS_SEND]) if isinstance(sock, ssl.SSLSocket) else sock.sendmsg(views)
            except _WOULD_BLOCK:
                n = 0
            except OSError as e:
                self._drain_quietly(sock)
                raise self._lost("unavailable", f"send to {self.address}: {e}") from e
            while n and views:
                if n >= views[0].nbytes:
                    n -= views[0].nbytes
                    views.pop(0)
                else:
                    views[0] = views[0][n:]
                    n = 0
            if views:
                ev = self._wait(sock, select.POLLOUT | _POLL_IN)
                if ev & _POLL_IN:
                    self._recv_some(sock)  # keep responses flowing while we send

    def _drain_quietly(self, sock: socket.socket) -> None:
        """After a send failed: picks up a final response (e.g. seq 0) the server sent before closing."""
        try:
            for _ in range(64):
                if not self._recv_some(sock):
                    return
        except _ConnectionLost:
            return

    def _next_frame(self, sock: socket.socket) -> bytes | bytearray:
        while not self._frames:
            if not self._recv_some(sock):
                self._wait(sock, _POLL_IN)
        return self._frames.popleft()

    # ---- calls ------------------------------------------------------------------------------------

    def _pipeline(self, calls: Iterable[CallSpec],
                  on_result: Callable[[int, Message | XferError, float], None],
                  stop_on_error: bool) -> XferError | None:
        """Runs calls with up to `inflight` outstanding. Returns the first call error (if any)."""
        with self._lock:
            sock = self._connect()
            it = iter(calls)
            pending: dict[int, tuple[int, type[Message], float, str]] = {}
            index = 0
            exhausted = False
            first_error: XferError | None = None
            try:
                while True:
                    while (not exhausted and len(pending) < self.inflight
                           and not (stop_on_error and first_error is not None)):
                        spec = next(it, None)
                        if spec is None:
                            exhausted = True
                            break
                        method, body = spec[0], spec[1]
                        rtype = spec[2] if len(spec) > 2 else _response_type(method)
                        self._seq += 1
                        seq = self._seq
                        parts = body_parts(body)
                        size = sum(memoryview(p).nbytes for p in parts)
                        pending[seq] = (index, rtype, time.perf_counter(), method)
                        index += 1
                        self._send(sock, [frame_prefix(request_header(seq, method), size), *parts])
                    if not pending:
                        return first_error
                    frame = self._next_frame(sock)
                    try:
                        hdr, raw = decode_response(frame)
                    except ValueError as e:
                        raise self._lost("internal", f"from {self.address}: {e}") from e
                    if hdr.seq == 0:
                        raise _ConnectionLost(XferError.parse(hdr.error or "unknown: connection error "
                                                              "response without an error"))
                    entry = pending.pop(hdr.seq, None)
                    if entry is None:
                        raise self._lost("internal", f"response with unexpected seq {hdr.seq} "
                                                     f"({hdr.method!r}) from {self.address}")
                    idx, rtype, t0, method = entry
                    seconds = time.perf_counter() - t0
                    result: Message | XferError
                    if hdr.error:
                        result = XferError.parse(hdr.error)
                        if first_error is None:
                            first_error = result
                    else:
                        result = rtype()
                        try:
                            result.ParseFromString(raw)  # type: ignore[arg-type]  # protobuf parses any buffer
                        except DecodeError:
                            result = XferError("internal", f"malformed {rtype.__name__} body in the "
                                                           f"response to {method} from {self.address}")
                            if first_error is None:
                                first_error = result
                    on_result(idx, result, seconds)
            except _ConnectionLost as lost:
                self.close()
                raise lost.error from None
            except BaseException:
                if pending:  # the stream is out of step with us: start afresh next time
                    self.close()
                raise

    def call(self, method: str, request: Body, response_type: type[M] | None = None) -> M:
        """One call; raises XferError for a call error or a connection error."""
        rtype = response_type or _response_type(method)
        results = self.call_many([(method, request, rtype)])
        return cast(M, results[0])

    def call_many(self, calls: Iterable[CallSpec], *, raise_errors: bool = True
                  ) -> list[Message | XferError]:
        """Pipelines the calls; results in call order.

        raise_errors=True stops sending at the first call error, waits for the calls in flight and
        raises it. raise_errors=False sends every call and returns call errors in place of responses.
        A connection error (seq 0, EOF, timeout) always raises: it fails every call in flight.
        """
        results: list[Message | XferError] = []

        def put(idx: int, res: Message | XferError, _s: float) -> None:
            while len(results) <= idx:
                results.append(XferError("unknown", "no response"))
            results[idx] = res

        err = self._pipeline(calls, put, stop_on_error=raise_errors)
        if err is not None and raise_errors:
            raise err
        return results

    # ---- operations -------------------------------------------------------------------------------

    def echo(self, payload: bytes) -> bytes:
        resp = self.call("Xfer.Echo", file_transfer_pb2.EchoRequest(payload=payload),
                         file_transfer_pb2.EchoResponse)
        return resp.payload

    def stat(self, name: str) -> StatResult:
        resp = self.call("Xfer.Stat", file_transfer_pb2.StatRequest(name=name),
                         file_transfer_pb2.StatResponse)
        return StatResult(resp.name, resp.size, resp.crc32)

    def meta(self, entries: Entries | meta.Prepared, *, check: bool = True) -> list[tuple[str, str]]:
        """Xfer.Meta: the server's answer (entries sorted by key), checked against ours and its digest
        unless check=False (a load generator's --xfer-verify off)."""
        body = entries.body if isinstance(entries, meta.Prepared) else meta.request(entries)
        resp = self.call("Xfer.Meta", body, file_transfer_pb2.MetaResponse)
        return meta.check_response(entries, resp) if check else meta.entries_of(resp)

    def upload(self, name: str, data: Buffer | None = None, *, path: str | os.PathLike[str] | None = None,
               chunk_size: int = 1 << 20) -> TransferResult:
        if chunk_size <= 0:
            raise ValueError(f"chunk size {chunk_size} must be positive")
        with UploadSource(data, path) as src:
            t0 = time.perf_counter()
            begin = self.call("Xfer.UploadBegin",
                              frame_pb2.UploadBeginRequest(name=name, size=src.size, chunk_size=chunk_size),
                              frame_pb2.UploadBeginResponse)
            uid = begin.upload_id
            crc = 0
            chunk_seconds: list[float] = []

            def chunk_calls() -> Iterable[CallSpec]:
                nonlocal crc
                for off, chunk in src.chunks(chunk_size):
                    crc = zlib.crc32(chunk, crc)
                    yield ("Xfer.UploadChunk", [chunk_request_prefix(uid, off, len(chunk)), chunk],
                           frame_pb2.UploadChunkResponse)

            def record(idx: int, _res: Message | XferError, seconds: float) -> None:
                while len(chunk_seconds) <= idx:
                    chunk_seconds.append(0.0)
                chunk_seconds[idx] = seconds

            try:
                err = self._pipeline(chunk_calls(), record, stop_on_error=True)
                if err is not None:
                    raise err
            except BaseException:
                self._abort_quietly(uid)
                raise
            commit = self.call("Xfer.UploadCommit",
                               frame_pb2.UploadCommitRequest(upload_id=uid, crc32=crc),
                               frame_pb2.UploadCommitResponse)
            seconds = time.perf_counter() - t0
        if commit.size != src.size or commit.crc32 != crc:
            raise XferError("data_loss", f"upload {name!r}: server committed size {commit.size} crc32 "
                                         f"0x{commit.crc32:08x}, client sent size {src.size} crc32 "
                                         f"0x{crc:08x}")
        return TransferResult(src.size, crc, seconds, None, chunk_seconds)

    def _abort_quietly(self, upload_id: int) -> None:
        if not self.connected:
            return  # the connection died; the server aborts or expires the upload itself
        try:
            self.call("Xfer.UploadAbort", frame_pb2.UploadAbortRequest(upload_id=upload_id),
                      frame_pb2.UploadAbortResponse)
        except XferError:
            pass

    def download(self, name: str, *, chunk_size: int = 1 << 20, out: BinaryIO | None = None,
                 verify: bool = True) -> TransferResult:
        if chunk_size <= 0:
            raise ValueError(f"chunk size {chunk_size} must be positive")
        t0 = time.perf_counter()
        t_first = time.perf_counter()
        first = self.call("Xfer.Read", frame_pb2.ReadRequest(name=name, offset=0, length=chunk_size),
                          frame_pb2.ReadResponse)
        chunk_seconds = [time.perf_counter() - t_first]
        size, server_crc = first.size, first.crc32
        parts: list[bytes] = []
        crc = 0
        waiting: dict[int, bytes] = {}  # chunks that arrived ahead of their turn
        next_idx = 0

        def check(idx: int, resp: frame_pb2.ReadResponse) -> None:
            if resp.size != size or resp.crc32 != server_crc:
                raise XferError("aborted", f"file {name!r} changed during download: chunk {idx} is from "
                                           f"size {resp.size} crc32 0x{resp.crc32:08x}, the first from "
                                           f"size {size} crc32 0x{server_crc:08x}")
            want = min(chunk_size, size - idx * chunk_size)
            if len(resp.data) != want:
                raise XferError("data_loss", f"file {name!r}: chunk at offset {idx * chunk_size} has "
                                             f"{len(resp.data)} bytes, want {want}")

        def deliver(idx: int, data: bytes) -> None:
            nonlocal next_idx, crc
            waiting[idx] = data
            while next_idx in waiting:
                chunk = waiting.pop(next_idx)
                if verify:
                    crc = zlib.crc32(chunk, crc)
                if out is None:
                    parts.append(chunk)
                else:
                    out.write(chunk)
                next_idx += 1

        check(0, first)
        deliver(0, first.data)
        if size > chunk_size:
            offsets = range(chunk_size, size, chunk_size)
            chunk_seconds += [0.0] * len(offsets)

            def got(idx: int, res: Message | XferError, seconds: float) -> None:
                if isinstance(res, XferError):
                    return
                resp = cast(frame_pb2.ReadResponse, res)
                check(idx + 1, resp)
                chunk_seconds[idx + 1] = seconds
                deliver(idx + 1, resp.data)

            err = self._pipeline(
                (("Xfer.Read", frame_pb2.ReadRequest(name=name, offset=o, length=chunk_size),
                  frame_pb2.ReadResponse) for o in offsets), got, stop_on_error=True)
            if err is not None:
                raise err
        if verify and crc != server_crc:
            raise XferError("data_loss", f"crc32 mismatch downloading {name!r}: received 0x{crc:08x}, "
                                         f"server 0x{server_crc:08x}")
        seconds = time.perf_counter() - t0
        data = b"".join(parts) if out is None else None
        return TransferResult(size, server_crc, seconds, data, chunk_seconds)


_EMPTY = frame_pb2.UploadAbortResponse


def _response_type(method: str) -> type[Message]:
    """The method's response type; an empty message for a method PROTOCOL.md does not name."""
    return METHODS[method][1] if method in METHODS else _EMPTY
