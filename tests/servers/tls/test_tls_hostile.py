"""Hostile clients against xferd-go's TLS listeners (PROTOCOL.md "TLS"): each is dropped within its bound and
counted by reason, costs bounded memory and descriptors that come back, and everyone else is served meanwhile,
over TLS and in plaintext.

After every test the server's descriptors return to what they were before it, and a fresh client on each
listener (TLS and plaintext, both transports) is served.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from py_client import FrameClient, GrpcClient, TLSOptions, XferError, connect
from py_client.frame import decode_response, encode_request, parse_frame
from tests.servers.badinput.test_resource_bounds import live_bytes
from tests.servers.tls.conftest import (
    HANDSHAKE_TIMEOUT_S,
    IO_TIMEOUT_S,
    eventually,
    failures,
    figure,
    held_connections,
    open_fds,
    quiet_fds,
    tls_listeners,
    tls_target,
    wait_closed,
)
from tests.support.raw_frame import RawConn
from tests.support.servers import RunningServer, running_server
from tests.support.tls import RawTLS, TLSFiles, trusting
from xfer.v1 import file_transfer_pb2 as ft

TRANSPORTS = ("frame", "grpc")
HALF_OPEN = 24  # stalled handshakes per TLS listener
HALF_OPEN_SLACK = 6 << 20  # what they may hold together, goroutines and TLS state included
DROP_BOUND_S = HANDSHAKE_TIMEOUT_S * 8  # generous: a stalled handshake is dropped well before this
MAX_CONNS = 4


def serve_everyone(s: RunningServer, tls: TLSOptions) -> None:
    """A fresh client of every listener is served: TLS and plaintext, both transports."""
    for transport in TRANSPORTS:
        for target, opts in ((tls_target(s, transport), tls), (s.target(transport), None)):
            with connect(target, tls=opts, timeout=IO_TIMEOUT_S) as c:
                assert c.echo(b"still serving") == b"still serving", target
                assert c.download("gen:300000:5", chunk_size=65536).bytes == 300_000, target


@pytest.fixture(autouse=True)
def bounded(tls_server: RunningServer, tls: TLSOptions) -> Iterator[None]:
    baseline = quiet_fds(tls_server)
    yield
    assert tls_server.alive(), "xferd-go died:\n" + "\n".join(tls_server.stderr_lines[-20:])
    eventually(f"descriptors back to {baseline}", lambda: open_fds(tls_server) <= baseline)
    serve_everyone(tls_server, tls)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_garbage_before_the_client_hello(tls_server: RunningServer, tls_files: TLSFiles, transport: str) -> None:
    before = failures(tls_server, transport, "not_tls")
    with RawTLS(tls_server.ready[f"tls_{transport}"], trusting(tls_files.ca)) as raw:
        raw.sock.sendall(b"\x00garbage\r\n" + raw.client_hello())
        answer = wait_closed(raw.sock, IO_TIMEOUT_S)
    if transport == "frame":  # the frame listener says why, in a plaintext seq-0 frame
        r = parse_frame(answer, 1 << 20)
        assert r.outcome == "frame", f"answer {answer!r}"
        hdr, _ = decode_response(answer[: r.size])
        assert hdr.seq == 0 and hdr.error.startswith("invalid_argument: not a TLS handshake"), hdr
    eventually("not_tls counted", lambda: failures(tls_server, transport, "not_tls") == before + 1)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_stalled_handshake_is_dropped_at_its_timeout(tls_server: RunningServer, tls_files: TLSFiles, transport: str) -> None:
    before = failures(tls_server, transport, "timeout")
    with RawTLS(tls_server.ready[f"tls_{transport}"], trusting(tls_files.ca)) as raw:
        hello = raw.client_hello()
        raw.sock.sendall(hello[: len(hello) // 2])
        t0 = time.monotonic()
        assert wait_closed(raw.sock, DROP_BOUND_S) == b"", "the server answered half a ClientHello"
        elapsed = time.monotonic() - t0
    assert elapsed >= HANDSHAKE_TIMEOUT_S * 0.5, f"dropped after {elapsed:.2f}s, before the handshake timeout"
    eventually("the timeout counted", lambda: failures(tls_server, transport, "timeout") == before + 1)


def test_many_half_open_handshakes(tls_server: RunningServer, tls_files: TLSFiles, tls: TLSOptions) -> None:
    """Stalled handshakes on both TLS listeners hold a descriptor each until their timeout and little memory;
    every listener serves meanwhile."""
    fds0, heap0 = quiet_fds(tls_server), live_bytes(tls_server)
    timeouts0 = {t: failures(tls_server, t, "timeout") for t in TRANSPORTS}
    stalled: list[RawTLS] = []
    try:
        for transport in TRANSPORTS:
            for _ in range(HALF_OPEN):
                raw = RawTLS(tls_server.ready[f"tls_{transport}"], trusting(tls_files.ca))
                stalled.append(raw)
                hello = raw.client_hello()
                raw.sock.sendall(hello[: len(hello) // 2])
        t0 = time.monotonic()

        def held_conns() -> int:
            return sum(held_connections(tls_server, tls_server.ready[f"tls_{t}"]) for t in TRANSPORTS)

        eventually(
            "the server holds the half-open connections", lambda: held_conns() == len(stalled), within=HANDSHAKE_TIMEOUT_S
        )
        held = live_bytes(tls_server) - heap0
        serve_everyone(tls_server, tls)
        if time.monotonic() - t0 < HANDSHAKE_TIMEOUT_S * 0.5:  # else the timeout may have dropped some already
            assert held_conns() == len(stalled), "serving others dropped a half-open handshake early"
        assert held <= HALF_OPEN_SLACK, f"{len(stalled)} stalled handshakes hold {held / 2**20:.1f} MiB"
        for raw in stalled:
            assert wait_closed(raw.sock, DROP_BOUND_S) == b""
    finally:
        for raw in stalled:
            raw.close()
    eventually(f"descriptors back to {fds0}", lambda: open_fds(tls_server) <= fds0)
    timeouts = {t: failures(tls_server, t, "timeout") - timeouts0[t] for t in TRANSPORTS}
    assert timeouts == dict.fromkeys(TRANSPORTS, HALF_OPEN), timeouts


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_client_that_closes_mid_record(tls_server: RunningServer, tls_files: TLSFiles, transport: str) -> None:
    """Half a record after the handshake, and half a ClientHello: the connection goes, nothing stays open."""
    open0 = figure(tls_server, "xfer_tls_connections", transport)
    eof0 = failures(tls_server, transport, "eof")
    first = (
        encode_request(1, "Xfer.Echo", ft.EchoRequest(payload=b"x" * 5000).SerializeToString())
        if transport == "frame"
        else b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00" * 5000
    )
    with RawTLS(tls_server.ready[f"tls_{transport}"], trusting(tls_files.ca)) as raw:
        raw.handshake()
        record = raw.record(first)
        raw.sock.sendall(record[: len(record) // 2])
    eventually("the TLS connection closed", lambda: figure(tls_server, "xfer_tls_connections", transport) == open0)
    with RawTLS(tls_server.ready[f"tls_{transport}"], trusting(tls_files.ca)) as raw:
        hello = raw.client_hello()
        raw.sock.sendall(hello[: len(hello) // 2])
    eventually("eof counted", lambda: failures(tls_server, transport, "eof") == eof0 + 1)


def test_plaintext_clients_at_the_tls_ports(tls_server: RunningServer) -> None:
    """A plaintext frame client is told what is wrong; a plaintext gRPC client sees the server unavailable;
    both are counted as not TLS."""
    before = {t: failures(tls_server, t, "not_tls") for t in TRANSPORTS}
    address = tls_server.ready["tls_frame"]
    with FrameClient(address, timeout=IO_TIMEOUT_S) as c, pytest.raises(XferError) as err:
        c.echo(b"plaintext")
    assert err.value.code == "invalid_argument" and "not a TLS handshake" in err.value.message, err.value
    with RawConn(address) as raw:
        raw.request("Xfer.Echo", ft.EchoRequest(payload=b"plaintext"))
        assert "this listener serves the frame protocol over TLS" in raw.connection_error().error
    with GrpcClient(tls_server.ready["tls_grpc"], timeout=IO_TIMEOUT_S) as g, pytest.raises(XferError) as gerr:
        g.echo(b"plaintext")
    assert gerr.value.code == "unavailable", gerr.value
    eventually("frame: not_tls counted twice", lambda: failures(tls_server, "frame", "not_tls") == before["frame"] + 2)
    eventually("grpc: not_tls counted", lambda: failures(tls_server, "grpc", "not_tls") > before["grpc"])


def test_handshakes_count_towards_max_conns(tls_files: TLSFiles, tls: TLSOptions) -> None:
    """--max-conns stalled handshakes fill their TLS listener's budget: one more TLS connection is closed before
    its handshake (a good client, which would otherwise be served), while the plaintext listener, with a budget
    of its own, serves; once the stalled ones time out, TLS serves again."""
    args = [*tls_files.server_args(), *tls_listeners(), f"--max-conns={MAX_CONNS}", "--store=mem"]
    with running_server("xferd-go", args) as s:
        address = s.ready["tls_frame"]
        stalled = [RawTLS(address, trusting(tls_files.ca)) for _ in range(MAX_CONNS)]
        try:
            for raw in stalled:
                raw.sock.sendall(raw.client_hello()[:10])
            eventually(
                "the stalled handshakes held", lambda: held_connections(s, address) == MAX_CONNS, within=HANDSHAKE_TIMEOUT_S
            )
            with FrameClient(address, tls=tls, timeout=IO_TIMEOUT_S) as over, pytest.raises(XferError) as err:
                over.echo(b"one too many")
            assert err.value.code == "unavailable" and "TLS handshake" in err.value.message, err.value
            with FrameClient(s.addr("frame"), timeout=IO_TIMEOUT_S) as plain:
                assert plain.echo(b"plaintext budget") == b"plaintext budget"
            for raw in stalled:
                wait_closed(raw.sock, DROP_BOUND_S)
        finally:
            for raw in stalled:
                raw.close()
        eventually("TLS serves again", lambda: _echo_ok(address, tls))
        # The refused connection never began a handshake: only the stalled ones count, as timeouts.
        assert failures(s, "frame", "timeout") == MAX_CONNS
        assert sum(failures(s, "frame", r) for r in ("not_tls", "eof", "client_alert", "protocol")) == 0


def _echo_ok(address: str, tls: TLSOptions) -> bool:
    try:
        with FrameClient(address, tls=tls, timeout=IO_TIMEOUT_S) as c:
            return c.echo(b"again") == b"again"
    except XferError:
        return False


def test_shutdown_ends_handshakes_in_progress(tls_files: TLSFiles, tls: TLSOptions) -> None:
    """SIGTERM with handshakes stalled (under a long timeout) and TLS connections open on both transports: the
    server exits 0 within --drain-timeout and a second, as it does without TLS (PROTOCOL.md "Shutdown")."""
    drain_s = 1.0
    args = [*tls_files.server_args(), *tls_listeners(), "--tls-handshake-timeout=60s", f"--drain-timeout={drain_s:g}s"]
    with running_server("xferd-go", args) as s:
        stalled = [RawTLS(s.ready[f"tls_{t}"], trusting(tls_files.ca)) for t in TRANSPORTS]
        clients = [connect(tls_target(s, t), tls=tls, timeout=IO_TIMEOUT_S) for t in TRANSPORTS]
        try:
            for raw in stalled:
                raw.sock.sendall(raw.client_hello()[:10])
            for c in clients:
                assert c.echo(b"open") == b"open"
            t0 = time.monotonic()
            assert s.stop() == 0, "\n".join(s.stderr_lines[-20:])
            elapsed = time.monotonic() - t0
        finally:
            for raw in stalled:
                raw.close()
            for c in clients:
                c.close()
    assert elapsed < drain_s + 1.0, f"exited {elapsed:.2f}s after SIGTERM"
