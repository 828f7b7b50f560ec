"""Frames cut across TLS records and TCP segments anywhere: xferd-c's TLS read path (SSL_read into the frame
parser, want-read mid-record) must answer a stream of pipelined Echo calls the same whatever the boundaries.

A seeded search in place of a fuzz target (servers/c/README.md, "No TLS fuzz target": bytes libFuzzer writes
would die in OpenSSL's record checks): each case draws frames of random sizes, cuts their plaintext into records of
random lengths (1 byte to several frames, a frame header split across two records among them) and the ciphertext
into TCP writes of random lengths, and checks every answer in order."""

from __future__ import annotations

import random
import socket
import ssl

import pytest

from py_client.frame import decode_response, encode_request, parse_frame
from tests.servers.tls_c.tlsframe import tls_addr
from tests.support.servers import RunningServer
from tests.support.tls import RawTLS
from xfer.v1 import file_transfer_pb2 as ft

SEEDS = range(12)  # each a different set of boundaries; about 0.1 s each
CALLS = 24


def _cuts(rng: random.Random, data: bytes, most: int) -> list[bytes]:
    """data in pieces of 1..most bytes, a third of them a single byte (headers split everywhere)."""
    out, i = [], 0
    while i < len(data):
        n = 1 if rng.random() < 1 / 3 else rng.randint(1, most)
        out.append(data[i:i + n])
        i += n
    return out


def _answers(conn: RawTLS, want: int) -> list[bytes]:
    """The Echo payloads of the next `want` response frames, in order."""
    buf = bytearray()
    payloads: list[bytes] = []
    while len(payloads) < want:
        try:
            buf += conn.tls.read(1 << 20)
        except ssl.SSLWantReadError:
            data = conn.sock.recv(1 << 16)
            assert data, f"the server closed the connection after {len(payloads)} of {want} answers"
            conn.incoming.write(data)
            continue
        while (r := parse_frame(buf)).outcome == "frame":
            header, body = decode_response(bytes(buf[: r.size]))
            assert not header.error, header.error
            payloads.append(ft.EchoResponse.FromString(bytes(body)).payload)
            del buf[: r.size]
        assert r.outcome != "error", r
    return payloads


@pytest.mark.parametrize("seed", SEEDS)
def test_frames_cut_across_records_and_segments_are_answered_alike(
    tls_server: RunningServer, ctx: ssl.SSLContext, seed: int
) -> None:
    rng = random.Random(seed)
    payloads = [rng.randbytes(rng.choice((0, 1, 7, 300, 5000, 40_000))) for _ in range(CALLS)]
    plaintext = b"".join(encode_request(i + 1, "Xfer.Echo", ft.EchoRequest(payload=p).SerializeToString())
                         for i, p in enumerate(payloads))
    with RawTLS(tls_addr(tls_server), ctx) as conn:
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # each write its own segment
        conn.handshake()
        ciphertext = b"".join(conn.record(piece) for piece in _cuts(rng, plaintext, 20_000))
        for segment in _cuts(rng, ciphertext, 3000):
            conn.sock.sendall(segment)
        assert _answers(conn, CALLS) == payloads
