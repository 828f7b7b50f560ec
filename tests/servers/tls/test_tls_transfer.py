"""Echo, Upload and Download over TLS give the same bytes as over plaintext, on both transports of xferd-go: the
conformance suite's own transfer checks run again through TLS listeners, and files cross between the two."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from py_client import FrameClient, GrpcClient, TLSOptions, connect
from py_client.content import crc32, gen_bytes
from tests.servers.conformance.test_transfer import (  # noqa: F401  (collected here, over TLS)
    test_download_into_a_stream,
    test_gen_files,
    test_round_trip_edge_sizes,
)
from tests.servers.tls.conftest import figure, tls_target
from tests.support.servers import RunningServer

TRANSPORTS = ("frame", "grpc")
PAIRS = [("xferd-go", t) for t in TRANSPORTS]


@pytest.fixture(params=PAIRS, ids=[f"{s}-{t}-tls" for s, t in PAIRS])
def pair(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def client(tls_server: RunningServer, tls: TLSOptions, pair: tuple[str, str]) -> Iterator[GrpcClient | FrameClient]:
    """The conformance checks' client, over the TLS listener of the transport."""
    with connect(tls_target(tls_server, pair[1]), tls=tls, timeout=60) as c:
        yield c


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_tls_and_plaintext_move_the_same_bytes(tls_server: RunningServer, tls: TLSOptions, transport: str) -> None:
    before = figure(tls_server, "xfer_tls_handshakes_total", transport)
    data = os.urandom(3_000_017)
    with (
        connect(tls_target(tls_server, transport), tls=tls, timeout=60) as secure,
        connect(tls_server.target(transport), timeout=60) as plain,
    ):
        payload = os.urandom(100_000)
        assert secure.echo(payload) == plain.echo(payload) == payload
        # A file uploaded over TLS reads back the same over plaintext, and the other way round.
        up = secure.upload(f"tls-up-{transport}.bin", data, chunk_size=256 << 10)
        assert (up.bytes, up.crc32) == (len(data), crc32(data))
        assert plain.download(f"tls-up-{transport}.bin", chunk_size=1 << 20).data == data
        plain.upload(f"plain-up-{transport}.bin", data, chunk_size=1 << 20)
        assert secure.download(f"plain-up-{transport}.bin", chunk_size=64 << 10).data == data
        gen = secure.download("gen:5000000:3", chunk_size=1 << 20)
        assert gen.data == plain.download("gen:5000000:3").data == gen_bytes(5_000_000, 3)
    assert figure(tls_server, "xfer_tls_handshakes_total", transport) > before, "the TLS calls made no handshake"
