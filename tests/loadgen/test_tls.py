"""--xfer-tls-*: the Locust users over TLS against the servers' TLS listeners (PROTOCOL.md "TLS").

Transfers with every answer checked, a handshake per operation under `--xfer-connections call` (the client's count
and the server's xfer_tls_handshakes_total), resumption on and off as the server counts it, and a certificate the
client must refuse, failing every call with the address and the reason. Every run has a server of its own and goes
through the module's `runs` (tests/loadgen/harness.py): two Locust processes at a time. Refusals are in-process.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loadgen import command_line
from loadgen._tls import caveat
from tests.loadgen.harness import Runs, in_background, runs_for
from tests.loadgen.inprocess import accepted, refusal
from tests.loadgen.support import Sample, parse_prom, run_locust, settled_metrics, total
from tests.support.servers import running_server
from tests.support.tls import SERVER_NAME, TLSFiles, make_tls_files

RUN_S = 1
USERS = 3
GRPC_INFLIGHT = 2
# (server, transport): the transports each server serves over TLS
SETUPS = [("xferd-go", "frame"), ("xferd-c", "frame"), ("xferd-go", "grpc")]
LISTENERS = {
    "xferd-go": ["--store=mem", "--tls-frame-addr=127.0.0.1:0", "--tls-grpc-addr=127.0.0.1:0"],
    "xferd-c": ["--tls-frame-addr=127.0.0.1:0"],
}
_FILES: dict[str, TLSFiles] = {}  # the module's certificates, made before its runs are submitted


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    _FILES["tls"] = make_tls_files(tmp_path_factory.mktemp("tls"))
    return runs_for(request, tmp_path_factory)


@dataclass
class Run:
    """One Locust run against a server of its own: its output, the client's metrics dumped at exit and the
    server's metrics once it settled."""

    proc: subprocess.CompletedProcess[str]
    client: list[Sample]
    server: list[Sample]
    target: str

    def stats(self) -> dict[str, dict[str, Any]]:
        return {e["name"]: e for e in json.loads(self.proc.stdout)}


def _run(tmp: Path, setup: tuple[str, str], options: list[str], *, expired: bool = False, mix: str = "echo:1") -> Run:
    name, transport = setup
    files = _FILES["tls"]
    with running_server(name, [*LISTENERS[name], *files.server_args(expired=expired)]) as server:
        target = f"{transport}://{server.ready['tls_' + transport]}"
        r = run_locust(
            [
                "--headless",
                "--json",
                "-t",
                f"{RUN_S}s",
                "-u",
                str(USERS),
                "-r",
                str(USERS),
                "--host",
                target,
                "--xfer-mix",
                mix,
                "--xfer-sizes",
                "64KiB",
                "--xfer-chunk",
                "16KiB",
                "--xfer-connections",
                "call",
                "--xfer-grpc-inflight",
                str(GRPC_INFLIGHT),
                "--xfer-metrics-port",
                "0",
                "--xfer-metrics-dump",
                str(tmp),
                *options,
            ],
            timeout=RUN_S + 60,
        )
        server_samples = settled_metrics(server.metrics_url)
    dumps = [parse_prom(p.read_text()) for p in tmp.glob("local-*.prom")]
    assert len(dumps) == 1, f"one local Locust, one dump: {r.stderr[-3000:]}"
    return Run(r, dumps[0], server_samples, target)


def _trusted(tmp: Path, setup: tuple[str, str], resume: str, mix: str) -> Run:
    ca = str(_FILES["tls"].ca)
    return _run(
        tmp, setup, ["--xfer-tls-ca", ca, "--xfer-tls-server-name", SERVER_NAME, "--xfer-tls-resume", resume], mix=mix
    )


def _ids(setup: tuple[str, str]) -> str:
    return "-".join(setup)


def _server(run: Run, name: str, transport: str) -> float:
    return total(run.server, name, transport=transport)


def _handshakes(run: Run, transport: str, resumed: str | None = None) -> float:
    labels = {"transport": transport} if resumed is None else {"transport": transport, "resumed": resumed}
    return total(run.client, "xfer_client_tls_handshakes_total", **labels)


@pytest.mark.parametrize("setup", SETUPS, ids=_ids)
@in_background(lambda tmp, setup: _trusted(tmp, setup, "on", "upload:1,download:1,echo:1"))
def test_transfers_over_tls_take_a_handshake_per_call(
    runs: Runs, request: pytest.FixtureRequest, setup: tuple[str, str]
) -> None:
    transport = setup[1]
    run = runs[request.node]
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    stats = run.stats()
    for method in ("Upload", "Download", "Echo"):
        assert stats[method]["num_requests"] > 0 and stats[method]["num_failures"] == 0, run.proc.stderr[-3000:]
        assert total(run.client, "xfer_client_verifications_total", method=method, result="ok") > 0
    assert total(run.client, "xfer_client_verifications_total", result="mismatch") == 0
    done = sum(s["num_requests"] for s in stats.values())
    # One connection, so one handshake, per operation; an operation the stop cut off has its handshake but no
    # report (one per user on frame, GRPC_INFLIGHT per user on gRPC).
    in_flight = USERS * (GRPC_INFLIGHT if transport == "grpc" else 1)
    server = _server(run, "xfer_tls_handshakes_total", transport)
    assert done <= server <= done + in_flight
    client = _handshakes(run, transport)
    assert client == total(run.client, "xfer_client_connections_opened_total", transport=transport)
    assert server - in_flight <= client <= server
    resumed = _server(run, "xfer_tls_resumed_handshakes_total", transport)
    assert resumed > done / 2, "the connections after the first ones resume a session"
    if transport == "frame":
        told = _handshakes(run, transport, "true")
        assert told <= resumed <= told + in_flight
        assert _handshakes(run, transport, "false") >= 1
    else:
        assert _handshakes(run, transport, "unknown") == client  # grpcio does not tell its client


RESUME_OFF = [("xferd-go", "frame"), ("xferd-go", "grpc")]


@pytest.mark.parametrize("setup", RESUME_OFF, ids=_ids)
@in_background(lambda tmp, setup: _trusted(tmp, setup, "off", "echo:1"))
def test_resumption_off_resumes_nothing(runs: Runs, request: pytest.FixtureRequest, setup: tuple[str, str]) -> None:
    transport = setup[1]
    run = runs[request.node]
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    assert run.stats()["Echo"]["num_requests"] > 10
    assert _server(run, "xfer_tls_handshakes_total", transport) > 10
    assert _server(run, "xfer_tls_resumed_handshakes_total", transport) == 0
    assert _handshakes(run, transport, "true") == 0
    assert _handshakes(run, transport, "false") == _handshakes(run, transport) > 10


# (setup, expired certificate?, the reason the error must give)
REFUSED = [
    (("xferd-go", "frame"), False, "the server's certificate is not trusted: it is not signed by a CA in"),
    (("xferd-go", "grpc"), False, "the server's certificate is not trusted: it is not signed by a CA in"),
    (("xferd-c", "frame"), True, "the server's certificate has expired or is not yet valid"),
]


def _refused_run(tmp: Path, case: tuple[tuple[str, str], bool, str]) -> Run:
    setup, expired, _reason = case
    files = _FILES["tls"]
    return _run(tmp, setup, ["--xfer-tls-ca", str(files.ca if expired else files.other_ca)], expired=expired)


@pytest.mark.parametrize("case", REFUSED, ids=lambda c: f"{_ids(c[0])}-{'expired' if c[1] else 'untrusted'}")
@in_background(_refused_run)
def test_a_refused_certificate_fails_every_call_saying_why(
    runs: Runs, request: pytest.FixtureRequest, case: tuple[tuple[str, str], bool, str]
) -> None:
    (_name, transport), _expired, reason = case
    run = runs[request.node]
    echo = run.stats()["Echo"]
    assert echo["num_failures"] == echo["num_requests"] > 0
    address = run.target.split("://", 1)[1]
    assert f"unavailable: TLS handshake with {address} failed: {reason}" in run.proc.stderr, run.proc.stderr[-3000:]
    assert total(run.client, "xfer_client_errors_total", transport=transport, code="unavailable") == echo["num_failures"]
    assert _handshakes(run, transport) == 0
    assert _server(run, "xfer_tls_handshakes_total", transport) == 0


# ---- options: no server needed ------------------------------------------------------------------------------

BASE = ["--headless", "-t", "1s", "-u", "1", "--xfer-metrics-port", "off", "--host", "frame://127.0.0.1:1"]


@pytest.mark.parametrize("given", [["--xfer-tls-resume", "off"], ["--xfer-tls-server-name", SERVER_NAME]])
def test_a_tls_option_without_a_ca_is_refused(given: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    err = refusal([*BASE, *given], capsys)
    assert f"{given[0]} only with --xfer-tls-ca (the CA file that turns TLS on)" in err, err


def test_a_ca_file_that_is_none_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.pem"
    err = refusal([*BASE, "--xfer-tls-ca", str(missing)], capsys)
    assert f"--xfer-tls-ca: TLS CA file {str(missing)!r}" in err and "No such file" in err, err
    not_pem = tmp_path / "notes.txt"
    not_pem.write_text("not a certificate\n")
    err = refusal([*BASE, "--xfer-tls-ca", str(not_pem)], capsys)
    assert f"--xfer-tls-ca: TLS CA file {str(not_pem)!r}" in err and "want a readable PEM file" in err, err


def test_bad_tls_values_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert "--xfer-tls-resume 'maybe': want on or off" in refusal([*BASE, "--xfer-tls-resume", "maybe"], capsys)
    err = refusal([*BASE, "--xfer-tls-server-name", "a b"], capsys)
    assert "--xfer-tls-server-name 'a b': want the name the server's certificate carries" in err, err


def test_the_runner_names_map_to_the_options(tmp_path: Path) -> None:
    files = make_tls_files(tmp_path)
    argv = command_line({"tls_ca": str(files.ca), "tls_server_name": SERVER_NAME, "tls_resume": False})
    assert argv == ["--xfer-tls-ca", str(files.ca), "--xfer-tls-server-name", SERVER_NAME, "--xfer-tls-resume", "off"]
    cfg, transport = accepted([*BASE, *argv])
    assert (cfg.tls_ca, cfg.tls_server_name, cfg.tls_resume, transport) == (str(files.ca), SERVER_NAME, False, "frame")
    plain, _ = accepted(BASE)
    assert (plain.tls_ca, plain.tls_server_name, plain.tls_resume) == ("", "", None)
    # grpcio resumes only with a server name it sends (SNI), never for an IP address: said before the run
    cfg, _ = accepted([*BASE, "--xfer-tls-ca", str(files.ca)])
    assert "grpcio keys its session cache by the server name" in (caveat(cfg, "grpc://127.0.0.1:1", "grpc") or "")
    assert caveat(cfg, "grpc://localhost:1", "grpc") is None
    assert caveat(cfg, "frame://127.0.0.1:1", "frame") is None
