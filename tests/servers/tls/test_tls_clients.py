"""The clients' side of TLS: xferload, grpcxfer and py_client (library and CLI) refuse an untrusted or expired
server certificate with an error naming the address and the reason; session resumption follows the server's
--tls-tickets; xferd-go refuses TLS settings it cannot use."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from py_client import FrameClient, TLSOptions, XferError, connect
from tests.servers.tls.conftest import IO_TIMEOUT_S, eventually, figure, tls_listeners, tls_target
from tests.support.servers import BIN, RunningServer, running_server
from tests.support.tls import SERVER_NAME, TLSFiles

RUN_TIMEOUT_S = 60.0
# What each client says for each refusal (Go's tlsx.ClientOptions.Explain, py_client.tls.TLSOptions.explain).
REASONS = {"untrusted": "the server's certificate is not trusted", "expired": "the server's certificate has expired"}


@pytest.fixture(scope="module")
def expired_server(tls_files: TLSFiles) -> Iterator[RunningServer]:
    with running_server("xferd-go", [*tls_files.server_args(expired=True), *tls_listeners()]) as s:
        yield s


@pytest.fixture(scope="module")
def no_tickets_server(tls_files: TLSFiles) -> Iterator[RunningServer]:
    with running_server("xferd-go", [*tls_files.server_args(), *tls_listeners(), "--tls-tickets=off"]) as s:
        yield s


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)


def refusal(
    case: str, tls_server: RunningServer, expired_server: RunningServer, files: TLSFiles
) -> tuple[RunningServer, Path]:
    """The server and the CA a client is given for a case."""
    return (tls_server, files.other_ca) if case == "untrusted" else (expired_server, files.ca)


@pytest.mark.parametrize("case", sorted(REASONS))
def test_go_clients_name_the_address_and_the_reason(
    tls_server: RunningServer, expired_server: RunningServer, tls_files: TLSFiles, case: str
) -> None:
    server, ca = refusal(case, tls_server, expired_server, tls_files)
    frame, grpc = server.ready["tls_frame"], server.ready["tls_grpc"]
    xl = run(str(BIN / "xferload"), "--addr", frame, "--method", "echo", "--duration", "1s", "--tls-ca", str(ca))
    gx = run(
        str(BIN / "grpcxfer"),
        "--addr",
        grpc,
        "--method",
        "download",
        "--name",
        "gen:1000:1",
        "--duration",
        "1s",
        "--tls-ca",
        str(ca),
    )
    for name, r, addr in (("xferload", xl, frame), ("grpcxfer", gx, grpc)):
        assert r.returncode == 1, f"{name}: status {r.returncode}\n{r.stdout}{r.stderr}"
        line = r.stderr.strip()
        assert line.startswith(f"{name}: error: cannot connect to {addr}: TLS handshake failed: {REASONS[case]}"), line


@pytest.mark.parametrize("case", sorted(REASONS))
@pytest.mark.parametrize("transport", ["frame", "grpc"])
def test_py_client_names_the_address_and_the_reason(
    tls_server: RunningServer, expired_server: RunningServer, tls_files: TLSFiles, case: str, transport: str
) -> None:
    server, ca = refusal(case, tls_server, expired_server, tls_files)
    with (
        connect(tls_target(server, transport), tls=TLSOptions(ca), timeout=IO_TIMEOUT_S) as c,
        pytest.raises(XferError) as err,
    ):
        c.echo(b"refused")
    address = server.ready[f"tls_{transport}"]
    assert err.value.code == "unavailable", err.value
    assert err.value.message.startswith(f"TLS handshake with {address} failed: {REASONS[case]}"), err.value


def test_py_client_cli(tls_server: RunningServer, tls_files: TLSFiles) -> None:
    cli = [sys.executable, "-m", "py_client", "echo", "--size", "1000", "--target", tls_target(tls_server, "frame")]
    ok = run(*cli, "--tls-ca", str(tls_files.ca), "--tls-server-name", SERVER_NAME, "--tls-resume", "off")
    assert ok.returncode == 0 and json.loads(ok.stdout)["ok"], ok.stdout + ok.stderr
    refused = run(*cli, "--tls-ca", str(tls_files.other_ca))
    line = json.loads(refused.stdout)
    assert refused.returncode == 1 and REASONS["untrusted"] in line["error"], refused.stdout
    wrong_name = run(*cli, "--tls-ca", str(tls_files.ca), "--tls-server-name", "other.test")
    assert "not valid for the name checked" in json.loads(wrong_name.stdout)["error"], wrong_name.stdout
    bad = run(*cli, "--tls-resume", "off")
    assert bad.returncode == 2 and "only with --tls-ca" in bad.stderr, bad.stderr


@pytest.mark.parametrize("tickets", ["on", "off"])
def test_resumption_follows_the_servers_tickets(
    tls_server: RunningServer, no_tickets_server: RunningServer, tls_files: TLSFiles, tickets: str
) -> None:
    """With tickets, a client's next connection resumes its session (the server counts it); without, none does."""
    server = tls_server if tickets == "on" else no_tickets_server
    assert server.ready["tls_tickets"] == tickets
    on = tickets == "on"

    def resumed(transport: str) -> float:
        return figure(server, "xfer_tls_resumed_handshakes_total", transport)

    frame0, grpc0 = resumed("frame"), resumed("grpc")
    with FrameClient(server.ready["tls_frame"], tls=TLSOptions(tls_files.ca), timeout=IO_TIMEOUT_S) as c:
        c.echo(b"first connection")
        assert c.tls_resumed is False
        c.close()
        c.echo(b"second connection")
        assert c.tls_resumed is on
    eventually("py_client's resumption counted", lambda: resumed("frame") == frame0 + on)

    xl = run(
        str(BIN / "xferload"),
        "--addr",
        server.ready["tls_frame"],
        "--method",
        "echo",
        "--conns",
        "3",
        "--duration",
        "200ms",
        "--tls-ca",
        str(tls_files.ca),
    )
    assert xl.returncode == 0, xl.stderr
    assert json.loads(xl.stdout)["tls_resumed"] == (2 if on else 0)
    eventually("xferload's resumptions counted", lambda: resumed("frame") == frame0 + on * 3)
    off = run(
        str(BIN / "xferload"),
        "--addr",
        server.ready["tls_frame"],
        "--method",
        "echo",
        "--conns",
        "2",
        "--duration",
        "200ms",
        "--tls-ca",
        str(tls_files.ca),
        "--tls-resume",
        "off",
    )
    assert off.returncode == 0 and json.loads(off.stdout)["tls_resumed"] == 0, off.stdout + off.stderr

    gx = run(
        str(BIN / "grpcxfer"),
        "--addr",
        server.ready["tls_grpc"],
        "--method",
        "download",
        "--name",
        "gen:100000:1",
        "--conns",
        "2",
        "--streams",
        "1",
        "--duration",
        "200ms",
        "--tls-ca",
        str(tls_files.ca),
    )
    assert gx.returncode == 0, gx.stderr
    eventually("grpcxfer's resumption counted", lambda: resumed("grpc") == grpc0 + on)
    assert resumed("frame") == frame0 + on * 3, "a client with resumption off resumed"


def test_the_server_refuses_tls_settings_it_cannot_use(tls_files: TLSFiles, tmp_path: Path) -> None:
    xferd = str(BIN / "xferd-go")
    ports = ["--grpc-addr=127.0.0.1:0", "--frame-addr=127.0.0.1:0", "--metrics-addr=127.0.0.1:0"]
    no_key = run(xferd, *ports, "--tls-frame-addr=127.0.0.1:0", f"--tls-cert={tls_files.cert}")
    assert no_key.returncode == 2 and "needs --tls-cert and --tls-key" in no_key.stderr, no_key.stderr
    alone = run(xferd, *ports, f"--tls-cert={tls_files.cert}", f"--tls-key={tls_files.key}")
    assert alone.returncode == 2 and "only with --tls-grpc-addr or --tls-frame-addr" in alone.stderr, alone.stderr
    missing = tmp_path / "missing.pem"
    unreadable = run(xferd, *ports, "--tls-grpc-addr=127.0.0.1:0", f"--tls-cert={missing}", f"--tls-key={tls_files.key}")
    assert unreadable.returncode == 1, unreadable.stderr
    assert unreadable.stderr.startswith(f"xferd-go: error: --tls-cert {missing}, --tls-key {tls_files.key}:"), (
        unreadable.stderr
    )
