"""OpenSSL's memory is the configuration's: xferd-c hands OpenSSL its allocator layer (CRYPTO_set_mem_functions),
so under --alloc pool the pool serves and counts every OpenSSL allocation, a preloaded allocator still serves them
all with TLS on, and the sanitizer build runs TLS end to end with no report (it fails at exit on a leak)."""

from __future__ import annotations

import os
import ssl
import zlib

import pytest

from tests.servers.tls_c.tlsframe import (
    NAME,
    TlsConn,
    is_sanitizer_build,
    samples,
    start_tls_server,
    tls_addr,
    value,
    wait_until,
)
from tests.servers.tls_c.transfers import download, upload
from tests.support.raw_frame import RawConn
from tests.support.servers import BIN, SERVERS, RunningServer
from tests.support.tls import TLSFiles
from xfer.v1 import file_transfer_pb2 as ft

CONNS = 20
# A TLS 1.3 handshake made about 750 allocations through the layer and each open connection held about 47 KiB of
# OpenSSL's (OpenSSL 3.0, P-256 certificate); the bounds below are a fraction of that, a plaintext connection
# far under them (a few allocations, no OpenSSL byte).
MIN_ALLOCS_PER_HANDSHAKE = 100
MIN_TLS_BYTES_PER_CONN = 16 << 10
MAX_PLAIN_GETS_PER_CONN = 10
LEFT_OVER = 64 << 10  # OpenSSL's per-thread state made by the first handshake on a loop, kept until exit
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
ASAN_BIN = BIN / "xferd-c-asan"

FIGURES = (
    "xfer_tls_allocations_total",
    "xfer_tls_allocated_bytes",
    "xfer_buffer_pool_gets_total",
    "xfer_allocator_allocated_bytes",
)


def figures(s: RunningServer) -> dict[str, float]:
    return {name: v for (name, labels), v in samples(s).items() if name in FIGURES and not labels}


def idle(s: RunningServer) -> dict[str, float]:
    wait_until("every connection closed", lambda: value(s, "xfer_connections") == 0)
    return figures(s)


def echo(c: RawConn) -> None:
    assert c.call("Xfer.Echo", ft.EchoRequest(payload=b"a")).error == ""


def open_tls(s: RunningServer, ctx: ssl.SSLContext) -> tuple[list[TlsConn], dict[str, float]]:
    """CONNS TLS connections, each through its handshake and one call, and the figures while they are open."""
    conns = [TlsConn(tls_addr(s), ctx) for _ in range(CONNS)]
    for c in conns:
        echo(c)
    return conns, figures(s)


def test_the_pool_serves_and_counts_openssls_allocations(tls_files: TLSFiles, ctx: ssl.SSLContext) -> None:
    s = start_tls_server(tls_files, ["--alloc=pool"])
    try:
        with TlsConn(tls_addr(s), ctx) as warm:  # OpenSSL's lazily made state, and the pool's free lists
            echo(warm)
        base = idle(s)
        plain = [RawConn(s.addr("frame")) for _ in range(CONNS)]
        for c in plain:
            echo(c)
            c.close()
        after_plain = idle(s)
        conns, held = open_tls(s, ctx)
        for c in conns:
            c.close()
        end = idle(s)
    finally:
        s.stop_cleanly()
    plain_gets = after_plain["xfer_buffer_pool_gets_total"] - base["xfer_buffer_pool_gets_total"]
    assert plain_gets <= CONNS * MAX_PLAIN_GETS_PER_CONN, plain_gets
    assert after_plain["xfer_tls_allocations_total"] == base["xfer_tls_allocations_total"], "no OpenSSL in plaintext"
    tls_allocs = held["xfer_tls_allocations_total"] - after_plain["xfer_tls_allocations_total"]
    gets = held["xfer_buffer_pool_gets_total"] - after_plain["xfer_buffer_pool_gets_total"]
    assert tls_allocs >= CONNS * MIN_ALLOCS_PER_HANDSHAKE, f"{tls_allocs} OpenSSL allocations for {CONNS} handshakes"
    assert gets >= tls_allocs, f"the pool served {gets} allocations, fewer than OpenSSL's {tls_allocs}"
    tls_bytes = held["xfer_tls_allocated_bytes"] - after_plain["xfer_tls_allocated_bytes"]
    pool_bytes = held["xfer_allocator_allocated_bytes"] - after_plain["xfer_allocator_allocated_bytes"]
    assert tls_bytes >= CONNS * MIN_TLS_BYTES_PER_CONN, f"{tls_bytes} bytes held by OpenSSL for {CONNS} sessions"
    assert pool_bytes >= tls_bytes, f"the pool's figure ({pool_bytes}) leaves out OpenSSL's {tls_bytes} bytes"
    for name in ("xfer_tls_allocated_bytes", "xfer_allocator_allocated_bytes"):
        assert end[name] - base[name] <= LEFT_OVER, f"{name} stayed {end[name] - base[name]:.0f} above its idle figure"


@pytest.mark.skipif(is_sanitizer_build(), reason="the sanitizer build serves malloc itself and refuses a preload")
def test_a_preloaded_allocator_serves_openssl_with_tls_on(tls_files: TLSFiles, ctx: ssl.SSLContext) -> None:
    s = start_tls_server(tls_files, ["--alloc=jemalloc"])
    try:
        assert (s.ready["alloc"], s.ready["malloc_lib"]) == ("jemalloc", JEMALLOC)
        with open(f"/proc/{s.proc.pid}/maps") as f:
            maps = f.read()
        assert JEMALLOC in maps and "libssl.so" in maps
        base = idle(s)
        conns, held = open_tls(s, ctx)
        for c in conns:
            c.close()
    finally:
        s.stop_cleanly()
    tls_bytes = held["xfer_tls_allocated_bytes"] - base["xfer_tls_allocated_bytes"]
    jemalloc_bytes = held["xfer_allocator_allocated_bytes"] - base["xfer_allocator_allocated_bytes"]
    assert held["xfer_tls_allocations_total"] - base["xfer_tls_allocations_total"] >= CONNS * MIN_ALLOCS_PER_HANDSHAKE
    assert tls_bytes >= CONNS * MIN_TLS_BYTES_PER_CONN
    assert jemalloc_bytes >= tls_bytes, f"jemalloc's stats.allocated rose {jemalloc_bytes}, OpenSSL holds {tls_bytes}"


@pytest.mark.parametrize("alloc", ["glibc", "pool"])
def test_the_sanitizer_build_serves_tls_with_no_report(
    tls_files: TLSFiles, ctx: ssl.SSLContext, alloc: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handshake, a resumed one, a transfer each way and a connection the server closes on a bad record, under
    ASan+UBSan; then a graceful stop, where LeakSanitizer would fail the exit status on anything left."""
    binary = SERVERS[NAME].binary if is_sanitizer_build() else ASAN_BIN
    assert binary.exists(), f"{binary} is not built: make -C servers/c asan (make test builds it before pytest)"
    monkeypatch.setenv(SERVERS[NAME].binary_env, str(binary))
    s = start_tls_server(tls_files, [f"--alloc={alloc}"])
    try:
        assert s.ready["alloc"] == ("asan" if alloc == "glibc" else "pool")
        data = os.urandom(1 << 20)
        with TlsConn(tls_addr(s), ctx) as c:
            assert upload(c, "asan.bin", data) == (len(data), zlib.crc32(data))
            assert download(c, "asan.bin", len(data))[0] == data
            session = c.tls.session
        with TlsConn(tls_addr(s), ctx, session=session) as again:
            assert again.tls.session_reused
            echo(again)
        with RawConn(tls_addr(s)) as plain:  # not TLS: answered with a frame error, then closed
            plain.request("Xfer.Echo", ft.EchoRequest(payload=b"x"))
            assert plain.connection_error().code == "invalid_argument"
    finally:
        s.stop_cleanly()
    report = [line for line in s.stderr_lines if "Sanitizer" in line or "runtime error" in line]
    assert not report, "\n".join(s.stderr_lines[-60:])
