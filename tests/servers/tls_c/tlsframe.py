"""What the xferd-c TLS tests share: the server with its TLS listener, a frame connection over TLS (the raw-frame
test client of tests/support/raw_frame.py on an `ssl` socket), TLS records made by hand for hostile clients, and
the server's figures (its /metrics, its descriptors).

Every wait polls a figure against a deadline; nothing sleeps in place of a condition.
"""

from __future__ import annotations

import os
import select
import socket
import ssl
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.support.raw_frame import IO_TIMEOUT_S, RawConn
from tests.support.servers import SERVERS, RunningServer, start_server
from tests.support.tls import TLSFiles

NAME = "xferd-c"
POLL_S = 0.02


def is_sanitizer_build() -> bool:
    """The ASan build serves malloc itself and refuses a preloaded allocator."""
    return "asan" in SERVERS[NAME].binary.name


def start_tls_server(
    files: TLSFiles, args: Sequence[str] = (), *, expired: bool = False, env: dict[str, str] | None = None
) -> RunningServer:
    """xferd-c with its plaintext listener and a TLS one beside it, every port free."""
    return start_server(NAME, ["--tls-frame-addr=127.0.0.1:0", *files.server_args(expired=expired), *args], env)


def tls_addr(s: RunningServer) -> str:
    return s.ready["tls_frame"]


def client_context(ca: Path) -> ssl.SSLContext:
    """A client that trusts ca only and checks the server's certificate against the address it dials."""
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


class TlsConn(RawConn):
    """RawConn's frames over TLS: the same requests, responses and connection-error checks, inside a session."""

    def __init__(
        self, address: str, ctx: ssl.SSLContext, *, session: ssl.SSLSession | None = None, timeout: float = IO_TIMEOUT_S
    ) -> None:
        host, port = address.rsplit(":", 1)
        raw = socket.create_connection((host, int(port)), timeout=timeout)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self.tls = ctx.wrap_socket(raw, server_hostname=host, session=session)
        except BaseException:
            raw.close()
            raise
        self.sock = self.tls  # what RawConn sends and receives through
        self.timeout = timeout
        self.buf = bytearray()
        self.seq = 0

    def __enter__(self) -> TlsConn:
        return self

    def _read_more(self, deadline: float) -> bool:
        """RawConn's, except that decrypted bytes OpenSSL already holds are read without waiting for the socket."""
        if not self.tls.pending():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.sock], [], [], remaining)[0]:
                raise TimeoutError("no data from the server in time")
        try:
            data = self.sock.recv(1 << 20)
        except (ConnectionResetError, ssl.SSLEOFError, ssl.SSLZeroReturnError):
            return False
        if not data:
            return False
        self.buf += data
        return True


def client_hello(ctx: ssl.SSLContext, host: str = "127.0.0.1") -> bytes:
    """The bytes a real client's handshake starts with (its ClientHello record), made without a socket."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname=host)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    hello = outgoing.read()
    assert hello[:1] == b"\x16", "a ClientHello is a handshake record"
    return hello


def open_fds(s: RunningServer) -> int:
    return len(os.listdir(f"/proc/{s.proc.pid}/fd"))


def samples(s: RunningServer) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of the server's /metrics, by name and labels."""
    with urllib.request.urlopen(s.metrics_url, timeout=IO_TIMEOUT_S) as r:
        text = r.read().decode()
    return {
        (sm.name, frozenset(sm.labels.items())): float(sm.value)
        for fam in text_string_to_metric_families(text)
        for sm in fam.samples
    }


def value(s: RunningServer, name: str, **labels: str) -> float:
    key = (name, frozenset(labels.items()))
    got = samples(s)
    assert key in got, f"{name}{labels} is not on /metrics"
    return got[key]


def failures(s: RunningServer, reason: str) -> float:
    return value(s, "xfer_tls_handshake_failures_total", transport="frame", reason=reason)


def wait_until(what: str, cond: Callable[[], bool], timeout: float = 10.0) -> float:
    """Polls cond until it holds; returns the seconds it took. Fails naming what did not happen."""
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(POLL_S)
    return time.monotonic() - t0


def wait_closed(sock: socket.socket, timeout: float) -> float:
    """Reads (and drops) what the server sends until it closes the connection; returns the seconds it took."""
    t0 = time.monotonic()
    while True:
        left = timeout - (time.monotonic() - t0)
        if left <= 0 or not select.select([sock], [], [], left)[0]:
            raise AssertionError(f"the server kept the connection open past {timeout:g} s")
        try:
            if not sock.recv(1 << 16):
                return time.monotonic() - t0
        except ConnectionResetError:
            return time.monotonic() - t0
