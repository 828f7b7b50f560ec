"""The TLS files (a CA, a server certificate, an expired one, another CA) made once per worker, and xferd-c with
a TLS listener per module."""

from __future__ import annotations

import ssl
from collections.abc import Iterator

import pytest

from tests.servers.tls_c.tlsframe import client_context, start_tls_server
from tests.support.servers import RunningServer
from tests.support.tls import TLSFiles, make_tls_files

# A hostile client's handshake is cut after this; the tests wait for it, so it is short.
HANDSHAKE_TIMEOUT = "1s"
READ_TIMEOUT = "2s"


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls-c"))


@pytest.fixture(scope="session")
def ctx(tls_files: TLSFiles) -> ssl.SSLContext:
    """A client context trusting the test CA."""
    return client_context(tls_files.ca)


@pytest.fixture(scope="module")
def tls_server(tls_files: TLSFiles, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """xferd-c with a disk store, its plaintext listener and its TLS one, short handshake and read timeouts; it
    must stop cleanly after the module (status 0: no crash, no hang, no LeakSanitizer report)."""
    store = tmp_path_factory.mktemp("store")
    s = start_tls_server(
        tls_files,
        [f"--store=disk:{store}", f"--tls-handshake-timeout={HANDSHAKE_TIMEOUT}", f"--read-timeout={READ_TIMEOUT}"],
    )
    yield s
    s.stop_cleanly()
