"""Hostile clients of xferd-c's TLS listener, each bounded in time, descriptors and memory like the plaintext
ones (tests/servers/badinput): bytes that are not TLS, handshakes that stall, many half-open at once, a record cut
short, clients that refuse the certificate, more handshakes than --max-conns. After every test the server still
serves a TLS client and a plaintext one."""

from __future__ import annotations

import socket
import ssl
import zlib
from collections.abc import Iterator

import pytest

from py_client.frame import encode_request
from tests.servers.tls_c.conftest import HANDSHAKE_TIMEOUT, READ_TIMEOUT
from tests.servers.tls_c.tlsframe import (
    TlsConn,
    client_context,
    client_hello,
    failures,
    open_fds,
    start_tls_server,
    tls_addr,
    value,
    wait_closed,
    wait_until,
)
from tests.servers.tls_c.transfers import download, upload
from tests.support.raw_frame import RawConn
from tests.support.servers import RunningServer
from tests.support.tls import RawTLS, TLSFiles
from xfer.v1 import file_transfer_pb2 as ft

TIMEOUT_S = float(HANDSHAKE_TIMEOUT.removesuffix("s"))
READ_TIMEOUT_S = float(READ_TIMEOUT.removesuffix("s"))
# The server checks its deadlines every 100 ms; a busy machine (the suite runs two files at once) adds more.
LATE_S = 1.5
HALF_OPEN = 100
HALF_OPEN_TIMEOUT_S = 3.0


def echo(conn: RawConn, payload: bytes = b"still here") -> None:
    r = conn.call("Xfer.Echo", ft.EchoRequest(payload=payload))
    assert not r.error and r.parse(ft.EchoResponse).payload == payload  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def still_serving(tls_server: RunningServer, ctx: ssl.SSLContext) -> Iterator[None]:
    yield
    assert tls_server.alive(), "\n".join(tls_server.stderr_lines[-40:])
    with TlsConn(tls_addr(tls_server), ctx) as t, RawConn(tls_server.addr("frame")) as p:
        echo(t)
        echo(p)


def settled_fds(s: RunningServer) -> int:
    """The server's descriptors once it holds no connection (a scrape's own may still be closing: later counts
    are held to at most this)."""
    wait_until("every connection closed", lambda: value(s, "xfer_connections") == 0)
    return open_fds(s)


def connect(s: RunningServer) -> socket.socket:
    """A plain TCP connection to the TLS listener, for bytes made by hand."""
    host, port = tls_addr(s).rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


# ------------------------------------------------------------------------------------------ not TLS


def test_plaintext_frames_get_a_clear_connection_error(tls_server: RunningServer) -> None:
    before = failures(tls_server, "not_tls")
    with RawConn(tls_addr(tls_server)) as c:
        c.request("Xfer.Echo", ft.EchoRequest(payload=b"plain"))
        err = c.connection_error(timeout=TIMEOUT_S / 2)  # at once, not at the handshake's deadline
    assert err.error == "invalid_argument: not a TLS handshake: this listener serves the frame protocol over TLS"
    assert failures(tls_server, "not_tls") == before + 1


def test_garbage_before_the_client_hello_is_refused_at_once(tls_server: RunningServer, ctx: ssl.SSLContext) -> None:
    before = failures(tls_server, "not_tls")
    with connect(tls_server) as s:
        s.sendall(b"GET / HTTP/1.1\r\n\r\n" + client_hello(ctx))
        assert wait_closed(s, TIMEOUT_S) < TIMEOUT_S / 2
    assert failures(tls_server, "not_tls") == before + 1


def test_a_malformed_handshake_record_is_refused_at_once(tls_server: RunningServer) -> None:
    before = failures(tls_server, "protocol")
    with connect(tls_server) as s:
        s.sendall(b"\x16\x03\x01\x00\x08" + b"notahelo")  # a handshake record whose message is nonsense
        assert wait_closed(s, TIMEOUT_S) < TIMEOUT_S / 2
    wait_until("the refusal counted", lambda: failures(tls_server, "protocol") == before + 1)


# ------------------------------------------------------------------------------------------ stalls


@pytest.mark.parametrize("sent", ["nothing", "half a ClientHello", "a ClientHello only"])
def test_a_stalled_handshake_is_closed_at_its_deadline(tls_server: RunningServer, ctx: ssl.SSLContext, sent: str) -> None:
    hello = client_hello(ctx)
    before = failures(tls_server, "timeout")
    with connect(tls_server) as s:
        s.sendall({"nothing": b"", "half a ClientHello": hello[: len(hello) // 2], "a ClientHello only": hello}[sent])
        took = wait_closed(s, TIMEOUT_S + LATE_S)  # a whole ClientHello is answered: those bytes are dropped
    assert took >= TIMEOUT_S * 0.9, f"closed after {took:.2f} s, before the handshake's deadline"
    wait_until("the timeout counted", lambda: failures(tls_server, "timeout") == before + 1)


def test_many_half_open_handshakes_neither_block_others_nor_keep_descriptors(
    tls_files: TLSFiles, ctx: ssl.SSLContext
) -> None:
    # A server of its own, whose handshakes wait long enough that a good client on a busy machine is surely
    # served while every hostile one is still held.
    s = start_tls_server(tls_files, [f"--tls-handshake-timeout={HALF_OPEN_TIMEOUT_S:g}s"])
    hostile: list[socket.socket] = []
    try:
        fds = settled_fds(s)
        hello = client_hello(ctx)
        hostile = [connect(s) for _ in range(HALF_OPEN)]
        for h in hostile:
            h.sendall(hello[:40])
        wait_until("the half-open handshakes held", lambda: value(s, "xfer_connections") >= HALF_OPEN)
        with TlsConn(tls_addr(s), ctx) as good:  # a whole transfer meanwhile
            data = bytes(range(256)) * 4096
            assert upload(good, "beside-half-open.bin", data) == (len(data), zlib.crc32(data))
            assert download(good, "beside-half-open.bin", len(data))[0] == data
        assert failures(s, "timeout") == 0 and value(s, "xfer_connections") >= HALF_OPEN, (
            "the good client was not served while the half-open handshakes were held"
        )
        wait_until(
            "every half-open handshake cut",
            lambda: failures(s, "timeout") == HALF_OPEN,
            HALF_OPEN_TIMEOUT_S + LATE_S + 5,
        )
        wait_until(f"the server's descriptors back to {fds}", lambda: open_fds(s) <= fds)
    finally:
        for h in hostile:
            h.close()
        s.stop_cleanly()


# ------------------------------------------------------------------------------------------ records cut


def test_a_client_closing_mid_record_costs_nothing(tls_server: RunningServer, ctx: ssl.SSLContext) -> None:
    fds = settled_fds(tls_server)
    rc = RawTLS(tls_addr(tls_server), ctx).handshake()
    wait_until("the connection established", lambda: value(tls_server, "xfer_tls_connections", transport="frame") == 1)
    records = rc.record(encode_request(1, "Xfer.Echo", ft.EchoRequest(payload=b"z" * 100_000).SerializeToString()))
    rc.sock.sendall(records[: len(records) // 2 + 7])
    rc.close()
    wait_until("the connection closed", lambda: value(tls_server, "xfer_tls_connections", transport="frame") == 0)
    wait_until(f"the server's descriptors back to {fds}", lambda: open_fds(tls_server) <= fds)


def test_a_record_left_unfinished_is_cut_at_the_read_timeout(tls_server: RunningServer, ctx: ssl.SSLContext) -> None:
    rc = RawTLS(tls_addr(tls_server), ctx).handshake()
    try:
        records = rc.record(encode_request(1, "Xfer.Echo", ft.EchoRequest(payload=b"q" * 1000).SerializeToString()))
        rc.sock.sendall(records[:20])  # a record header and a little: nothing the frame code can see yet
        took = wait_closed(rc.sock, READ_TIMEOUT_S + LATE_S)
        assert took >= READ_TIMEOUT_S * 0.9, f"closed after {took:.2f} s, before --read-timeout"
    finally:
        rc.close()


# ------------------------------------------------------------------------------------------ certificates


def test_a_client_that_does_not_trust_the_ca_is_refused_and_counted(tls_server: RunningServer, tls_files: TLSFiles) -> None:
    before = failures(tls_server, "client_alert")
    with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer certificate"):
        TlsConn(tls_addr(tls_server), client_context(tls_files.other_ca))
    wait_until("the client's alert counted", lambda: failures(tls_server, "client_alert") == before + 1)


def test_an_expired_certificate_is_refused_by_the_client_and_counted(tls_files: TLSFiles, ctx: ssl.SSLContext) -> None:
    s = start_tls_server(tls_files, expired=True)
    try:
        with pytest.raises(ssl.SSLCertVerificationError, match="certificate has expired"):
            TlsConn(tls_addr(s), ctx)
        wait_until("the client's alert counted", lambda: failures(s, "client_alert") == 1)
        assert value(s, "xfer_tls_handshakes_total", transport="frame") == 0
    finally:
        s.stop_cleanly()


# ------------------------------------------------------------------------------------------ limits


def test_handshakes_count_towards_max_conns_per_listener(tls_files: TLSFiles, ctx: ssl.SSLContext) -> None:
    s = start_tls_server(tls_files, ["--max-conns=3", "--tls-handshake-timeout=30s"])
    try:
        silent = [connect(s) for _ in range(3)]  # handshakes that never begin
        wait_until("three handshakes held", lambda: value(s, "xfer_connections") == 3)
        with pytest.raises((ssl.SSLError, ConnectionError)):
            TlsConn(tls_addr(s), ctx)  # the fourth is closed at accept: its listener is full
        plain = [RawConn(s.addr("frame")) for _ in range(3)]  # the plaintext listener has its own three
        for p in plain:
            echo(p)
            p.close()
        for c in silent:
            c.close()
        wait_until("the silent ones closed", lambda: value(s, "xfer_connections") == 0)
        with TlsConn(tls_addr(s), ctx) as t:
            echo(t)
    finally:
        s.stop_cleanly()
