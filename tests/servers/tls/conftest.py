"""TLS fixtures: throwaway certificates per module, an xferd-go with TLS listeners beside its plaintext ones, its
TLS figures, and a raw TLS client (an OpenSSL object over memory buffers) that can stop anywhere: after a partial
ClientHello, or halfway through a record."""

from __future__ import annotations

import os
import socket
import time
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from py_client import TLSOptions
from tests.support.servers import RunningServer, running_server
from tests.support.tls import TLSFiles, make_tls_files

HANDSHAKE_TIMEOUT_S = 1.0  # the servers' --tls-handshake-timeout in these tests
IO_TIMEOUT_S = 10.0
SETTLE_S = 10.0  # how long a figure or a descriptor count may take to come back
TCP_LISTEN = "0A"  # the state of a listening socket in /proc/net/tcp


def tls_listeners() -> list[str]:
    return [
        "--tls-frame-addr=127.0.0.1:0",
        "--tls-grpc-addr=127.0.0.1:0",
        f"--tls-handshake-timeout={HANDSHAKE_TIMEOUT_S:g}s",
    ]


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_server(tls_files: TLSFiles) -> Iterator[RunningServer]:
    """xferd-go serving both transports in plaintext and over TLS, with tickets."""
    with running_server("xferd-go", [*tls_files.server_args(), *tls_listeners()]) as s:
        yield s


@pytest.fixture(scope="module")
def tls(tls_files: TLSFiles) -> TLSOptions:
    return TLSOptions(tls_files.ca)


def tls_target(s: RunningServer, transport: str) -> str:
    return f"{transport}://{s.ready['tls_' + transport]}"


def tls_figures(s: RunningServer) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every xfer_tls_* sample: (name, labels) -> value."""
    with urllib.request.urlopen(s.metrics_url, timeout=IO_TIMEOUT_S) as r:
        text = r.read().decode()
    return {
        (sm.name, frozenset(sm.labels.items())): sm.value
        for fam in text_string_to_metric_families(text)
        if fam.name.startswith("xfer_tls_")
        for sm in fam.samples
    }


def figure(s: RunningServer, name: str, transport: str, **labels: str) -> float:
    return tls_figures(s)[(name, frozenset({"transport": transport, **labels}.items()))]


def failures(s: RunningServer, transport: str, reason: str) -> float:
    return figure(s, "xfer_tls_handshake_failures_total", transport, reason=reason)


def eventually(what: str, cond: Callable[[], bool], within: float = SETTLE_S) -> None:
    """Polls cond() until it is true; fails naming what did not happen."""
    deadline = time.monotonic() + within
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {within:g}s")
        time.sleep(0.05)  # poll interval


def open_fds(s: RunningServer) -> int:
    return len(os.listdir(f"/proc/{s.proc.pid}/fd"))


def held_connections(s: RunningServer, address: str) -> int:
    """The connections the server holds on the listener at address (its side of them), from /proc: exact, where
    a descriptor count also moves with the test's own scrapes."""
    port, pid = int(address.rsplit(":", 1)[1]), s.proc.pid
    sockets = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            sockets.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:
            continue  # closed meanwhile
    held = 0
    with open(f"/proc/{pid}/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local_port, state, inode = int(fields[1].rsplit(":", 1)[1], 16), fields[3], fields[9]
            held += local_port == port and state != TCP_LISTEN and f"socket:[{inode}]" in sockets
    return held


def quiet_fds(s: RunningServer) -> int:
    """The server's descriptors once no client connection is open (those of clients just gone take a moment to
    close on the server's side)."""

    def idle() -> bool:
        with urllib.request.urlopen(s.metrics_url, timeout=IO_TIMEOUT_S) as r:
            text = r.read().decode()
        return any(
            sm.name == "xfer_connections" and sm.value == 0
            for fam in text_string_to_metric_families(text)
            for sm in fam.samples
        )

    eventually("no client connection open", idle)
    return open_fds(s)


def wait_closed(sock: socket.socket, within: float) -> bytes:
    """Reads until the peer closes the connection (EOF or reset); returns what arrived. Raises TimeoutError if
    it stays open."""
    got = bytearray()
    deadline = time.monotonic() + within
    while True:
        sock.settimeout(max(deadline - time.monotonic(), 1e-3))
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            return bytes(got)
        except TimeoutError:
            raise TimeoutError(f"the server kept the connection open for {within:g}s") from None
        if not data:
            return bytes(got)
        got += data

