"""A frame-protocol TCP proxy that corrupts data: it flips one byte inside the data of Read responses.

Toxiproxy delays, throttles, slices and cuts bytes but never changes them, so it cannot show that a client
notices corrupted content. This proxy forwards client → server bytes untouched and parses the server →
client stream into frames (PROTOCOL.md "Frames"); in up to `limit` successful `Xfer.Read` responses with
non-empty data it inverts the middle byte of the data, re-encodes the body and fixes the frame length, so the
frame stays well formed and only the content is wrong: exactly what the CRC-32 check of the assembled file
is there to catch.

    with CorruptProxy(server.addr("frame"), limit=1) as proxy:
        connect(proxy.target).download(name)   # raises XferError data_loss
        assert proxy.flipped == 1
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType

from py_client.frame import PREFIX_LEN, decode_response, frame_prefix, split_frame
from py_client.target import split_host_port
from xfer.v1 import frame_pb2

_RECV = 256 << 10
_IO_TIMEOUT_S = 30.0  # a stuck peer ends its connection's threads instead of hanging them forever


class CorruptProxy:
    """Listens on a free loopback port; one pair of threads per accepted connection."""

    def __init__(self, upstream: str, *, limit: int | None = None) -> None:
        self.upstream = split_host_port(upstream)
        self.limit = limit
        self.flipped = 0  # Read responses corrupted so far
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.listen = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, name="corrupt-proxy-accept", daemon=True)
        self._acceptor.start()

    @property
    def target(self) -> str:
        return f"frame://{self.listen}"

    def __enter__(self) -> CorruptProxy:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            socks = list(self._socks)
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()
        self._acceptor.join(timeout=5)
        for t in list(self._threads):
            t.join(timeout=5)

    # ---- plumbing ---------------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=_IO_TIMEOUT_S)
            except OSError:
                client.close()
                continue
            for s in (client, server):
                s.settimeout(_IO_TIMEOUT_S)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._socks += [client, server]
            for fn, a, b in ((self._copy, client, server), (self._corrupt, server, client)):
                t = threading.Thread(target=fn, args=(a, b), daemon=True)
                self._threads.append(t)
                t.start()

    @staticmethod
    def _close_both(a: socket.socket, b: socket.socket) -> None:
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def _copy(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(_RECV):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            self._close_both(src, dst)

    def _corrupt(self, src: socket.socket, dst: socket.socket) -> None:
        """Server → client: whole frames only, each passed through _maybe_flip."""
        buf = bytearray()
        try:
            while data := src.recv(_RECV):
                buf += data
                while len(buf) >= PREFIX_LEN:
                    total = 4 + int.from_bytes(buf[:4], "big")
                    if len(buf) < total:
                        break
                    frame = bytes(buf[:total])
                    del buf[:total]
                    dst.sendall(self._maybe_flip(frame))
            if buf:
                dst.sendall(bytes(buf))  # a trailing partial frame: as the server sent it
        except OSError:
            pass
        finally:
            self._close_both(src, dst)

    def _maybe_flip(self, frame: bytes) -> bytes:
        try:
            hdr, body = decode_response(frame)
        except ValueError:
            return frame
        if hdr.method != "Xfer.Read" or hdr.error:
            return frame
        with self._lock:
            if self.limit is not None and self.flipped >= self.limit:
                return frame
            resp = frame_pb2.ReadResponse()
            resp.ParseFromString(body)
            if not resp.data:
                return frame
            data = bytearray(resp.data)
            data[len(data) // 2] ^= 0xFF
            resp.data = bytes(data)
            self.flipped += 1
        header, _ = split_frame(frame)
        new_body = resp.SerializeToString()
        return frame_prefix(bytes(header), len(new_body)) + new_body
