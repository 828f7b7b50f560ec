"""xferd-c's frames over TLS are the same frames: Echo, Upload and Download through the TLS listener give the bytes
the plaintext listener gives, with calls pipelined; sessions resume with tickets on and never with them off; the
handshake figures count what happened; the TLS flags are checked (PROTOCOL.md, "xferd-c over TLS")."""

from __future__ import annotations

import os
import ssl
import subprocess
from pathlib import Path

import pytest

from py_client.content import crc32, gen_bytes
from tests.servers.tls_c.tlsframe import (
    NAME,
    TlsConn,
    samples,
    start_tls_server,
    tls_addr,
    value,
    wait_until,
)
from tests.servers.tls_c.transfers import download, upload
from tests.support.raw_frame import RawConn
from tests.support.servers import SERVERS, RunningServer, running_server
from tests.support.tls import TLSFiles
from xfer.v1 import file_transfer_pb2 as ft

RUN_TIMEOUT_S = 10.0


def both(s: RunningServer, ctx: ssl.SSLContext) -> tuple[RawConn, TlsConn]:
    return RawConn(s.addr("frame")), TlsConn(tls_addr(s), ctx)


@pytest.mark.parametrize("size", [0, 1, 100_000, 3 << 20])
def test_echo_over_tls_answers_the_bytes_plaintext_does(tls_server: RunningServer, ctx: ssl.SSLContext, size: int) -> None:
    payload = os.urandom(size)
    plain, tls = both(tls_server, ctx)
    with plain, tls:
        a = plain.call("Xfer.Echo", ft.EchoRequest(payload=payload))
        b = tls.call("Xfer.Echo", ft.EchoRequest(payload=payload))
    assert not b.error, b.error
    assert b.body == a.body and b.parse(ft.EchoResponse).payload == payload  # type: ignore[attr-defined]


def test_upload_over_tls_reads_back_alike_over_both(tls_server: RunningServer, ctx: ssl.SSLContext) -> None:
    data = os.urandom((5 << 20) // 2 + 12345)  # 2.5 MiB and a tail: 40 pipelined chunks, a short last one
    plain, tls = both(tls_server, ctx)
    with plain, tls:
        assert upload(tls, "over-tls.bin", data) == (len(data), crc32(data))
        got_tls, bodies_tls = download(tls, "over-tls.bin", len(data))
        got_plain, bodies_plain = download(plain, "over-tls.bin", len(data))
        # and the other way: uploaded in plaintext, read over TLS
        assert upload(plain, "over-plain.bin", data[::-1]) == (len(data), crc32(data[::-1]))
        back, _ = download(tls, "over-plain.bin", len(data))
    assert got_tls == data and got_plain == data and back == data[::-1]
    assert bodies_tls == bodies_plain, "a Read answers the same bytes over both listeners"


def test_generated_content_downloads_alike_over_both(tls_server: RunningServer, ctx: ssl.SSLContext) -> None:
    size, name = (3 << 20) + 7, f"gen:{(3 << 20) + 7}:42"
    plain, tls = both(tls_server, ctx)
    with plain, tls:
        got_tls, bodies_tls = download(tls, name, size)
        _, bodies_plain = download(plain, name, size)
    assert got_tls == gen_bytes(size, 42)
    assert bodies_tls == bodies_plain


def test_a_session_resumes_with_tickets_on(tls_server: RunningServer, ctx: ssl.SSLContext) -> None:
    before = value(tls_server, "xfer_tls_resumed_handshakes_total", transport="frame")
    with TlsConn(tls_addr(tls_server), ctx) as first:
        assert first.call("Xfer.Echo", ft.EchoRequest(payload=b"1")).error == ""  # reads TLS 1.3's ticket too
        session = first.tls.session
    with TlsConn(tls_addr(tls_server), ctx, session=session) as second:
        assert second.tls.session_reused
        assert second.call("Xfer.Echo", ft.EchoRequest(payload=b"2")).error == ""
    assert value(tls_server, "xfer_tls_resumed_handshakes_total", transport="frame") == before + 1


def test_no_session_resumes_with_tickets_off(tls_files: TLSFiles, ctx: ssl.SSLContext) -> None:
    s = start_tls_server(tls_files, ["--tls-tickets=off"])
    try:
        assert s.ready["tls_tickets"] == "off"
        with TlsConn(tls_addr(s), ctx) as first:
            assert first.call("Xfer.Echo", ft.EchoRequest(payload=b"1")).error == ""
            session = first.tls.session
        with TlsConn(tls_addr(s), ctx, session=session) as second:
            assert not second.tls.session_reused
            assert second.call("Xfer.Echo", ft.EchoRequest(payload=b"2")).error == ""
        assert value(s, "xfer_tls_handshakes_total", transport="frame") == 2
        assert value(s, "xfer_tls_resumed_handshakes_total", transport="frame") == 0
    finally:
        s.stop_cleanly()


def test_handshakes_and_open_connections_are_counted(tls_server: RunningServer, ctx: ssl.SSLContext) -> None:
    def hs() -> float:
        return value(tls_server, "xfer_tls_handshakes_total", transport="frame")

    def hist_count() -> float:
        return value(tls_server, "xfer_tls_handshake_duration_seconds_count", transport="frame")

    wait_until("no TLS connection open", lambda: value(tls_server, "xfer_tls_connections", transport="frame") == 0)
    before, hist_before = hs(), hist_count()
    conns = [TlsConn(tls_addr(tls_server), ctx) for _ in range(3)]
    try:
        for c in conns:  # an answer: the server's side of the handshake is over too
            assert c.call("Xfer.Echo", ft.EchoRequest(payload=b"c")).error == ""
        assert value(tls_server, "xfer_tls_connections", transport="frame") == 3
        assert value(tls_server, "xfer_connections") >= 3
    finally:
        for c in conns:
            c.close()
    assert hs() == before + 3 and hist_count() == hist_before + 3
    slowest = value(tls_server, "xfer_tls_handshake_duration_seconds_bucket", transport="frame", le="1")
    assert slowest >= hist_before + 3, "a loopback handshake takes well under a second"
    wait_until("the TLS connections closed", lambda: value(tls_server, "xfer_tls_connections", transport="frame") == 0)


def test_ready_line_names_the_tls_listener_and_its_settings(tls_server: RunningServer) -> None:
    r = tls_server.ready
    assert r["tls_frame"].startswith("127.0.0.1:") and r["tls_frame"] != r["frame"]
    assert (r["tls_tickets"], r["tls_handshake_timeout"]) == ("on", "1s")
    assert r["openssl"].startswith("3.")
    keys = list(r)
    assert keys[keys.index("metrics") + 1 :][:3] == ["tls_frame", "tls_tickets", "tls_handshake_timeout"], keys


def test_a_plaintext_server_exports_no_tls_figures() -> None:
    with running_server(NAME) as s:
        assert "tls_frame" not in s.ready
        with RawConn(s.addr("frame")) as c:
            assert c.call("Xfer.Echo", ft.EchoRequest(payload=b"x")).error == ""
        assert not [name for name, _ in samples(s) if name.startswith("xfer_tls_")]


def test_tls_works_with_metrics_off_and_keeps_only_the_gauge(tls_files: TLSFiles, ctx: ssl.SSLContext) -> None:
    s = start_tls_server(tls_files, ["--metrics=off"])
    try:
        with TlsConn(tls_addr(s), ctx) as c:
            assert c.call("Xfer.Echo", ft.EchoRequest(payload=b"off")).error == ""
            assert value(s, "xfer_tls_connections", transport="frame") == 1
        names = {name for name, _ in samples(s) if name.startswith("xfer_tls_")}
        assert names == {"xfer_tls_connections"}, names
    finally:
        s.stop_cleanly()


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SERVERS[NAME].binary), "--frame-addr=127.0.0.1:0", "--metrics-addr=127.0.0.1:0", *args],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--tls-frame-addr=127.0.0.1:0"], "--tls-frame-addr 127.0.0.1:0 needs --tls-cert and --tls-key"),
        (["--tls-cert=/x.pem", "--tls-key=/x.key"], "--tls-cert given without --tls-frame-addr"),
        (["--tls-tickets=off"], "--tls-tickets given without --tls-frame-addr"),
        (["--tls-handshake-timeout=5s"], "--tls-handshake-timeout given without --tls-frame-addr"),
        (["--tls-frame-addr=7443", "--tls-cert=/x.pem", "--tls-key=/x.key"], "want HOST:PORT"),
        (["--tls-tickets=maybe"], "--tls-tickets maybe (XFERD_TLS_TICKETS): want on or off"),
        (["--tls-handshake-timeout=1us"], "tls-handshake-timeout"),
    ],
)
def test_tls_flags_that_cannot_work_are_refused(args: list[str], says: str) -> None:
    r = run(*args)
    assert r.returncode == 2, r.stderr
    assert says in r.stderr and "xferd-c: error:" in r.stderr, r.stderr


def test_files_that_cannot_be_used_stop_the_start_naming_them(tls_files: TLSFiles, tmp_path: Path) -> None:
    missing = tmp_path / "missing.pem"
    cases = [
        ([f"--tls-cert={missing}", f"--tls-key={tls_files.key}"], f"--tls-cert {missing}"),
        ([f"--tls-cert={tls_files.key}", f"--tls-key={tls_files.key}"], f"--tls-cert {tls_files.key}"),
        ([f"--tls-cert={tls_files.ca}", f"--tls-key={tls_files.key}"], "does not match the certificate"),
    ]
    for args, says in cases:
        r = run("--tls-frame-addr=127.0.0.1:0", *args)
        assert r.returncode == 1, r.stderr
        assert r.stderr.startswith("xferd-c: error: tls: ") and says in r.stderr, r.stderr
        assert "ready" not in r.stderr
