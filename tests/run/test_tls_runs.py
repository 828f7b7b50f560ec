"""The `tls` axis run for real (xferbench/run/tlsfiles.py, serverstart.py, phase.py): the run's CA and certificate made
once under the run folder; xferd-c's TLS frame listener and xferd-go's TLS gRPC listener driven by Locust with a
connection per call, whose rows carry the handshake figures (and a plaintext cell's none); a command server given
{cert} and {key}, driven by xferload over TLS. Each run is 1 s of warm-up and 2 s measured."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.runs import experiment_file
from xferbench.analysis.row import RunRow
from xferbench.run import sweep, tlsfiles

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "build" / "bin"


def _openssl(*args: str) -> str:
    r = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_runs_ca_and_certificate_are_made_once_under_the_run_folder(tmp_path: Path) -> None:
    files = tlsfiles.ensure(tmp_path, "10.77.0.1")
    assert (files.ca, files.cert, files.key) == (
        tmp_path / "tls" / "ca.pem",
        tmp_path / "tls" / "server.pem",
        tmp_path / "tls" / "server.key",
    )
    assert sorted(p.name for p in (tmp_path / "tls").iterdir()) == ["ca.pem", "server.key", "server.pem"]  # no CA key
    assert "server.pem: OK" in _openssl("verify", "-CAfile", str(files.ca), str(files.cert))
    names = _openssl("x509", "-in", str(files.cert), "-noout", "-ext", "subjectAltName")
    assert "IP Address:127.0.0.1" in names and "IP Address:10.77.0.1" in names, names
    made = files.cert.stat().st_mtime_ns
    assert tlsfiles.ensure(tmp_path) == files and files.cert.stat().st_mtime_ns == made


HEAD = (
    '[experiment]\nname = "tls-runs"\nrepeats = 1\nduet = false\nwarmup_s = 1\n'
    '[load]\nusers = 2\nspawn_rate = 2\nduration_s = 2\nmix = "echo:1"\nrate = "40"\nconnections = "call"\n'
)


def _rows(tmp_path: Path, text: str) -> dict[str, RunRow]:
    exp = experiment_file(tmp_path / "exp.toml", text)
    result = sweep.sweep(exp, tmp_path / "run")
    rows = {r.cell: r for r in result.rows}
    for r in rows.values():
        assert r.ok, (r.cell, r.error, r.stderr_tail)
    return rows


def _handshaken(row: RunRow) -> None:
    """A connection per call over TLS without resumption: about one full handshake per call, each costing CPU."""
    assert row.tls_handshakes_per_s and row.client_qps, row
    assert 0.5 < row.tls_handshakes_per_s / row.client_qps < 1.5, (row.tls_handshakes_per_s, row.client_qps)
    assert row.tls_resumed_share == 0.0
    assert row.server_cpu_per_handshake_s is not None and 0 < row.server_cpu_per_handshake_s < 0.1
    assert row.config["load"]["tls"] == "on"


def test_tls_cells_of_both_servers_carry_handshake_figures_and_plaintext_none(tmp_path: Path) -> None:
    text = HEAD + (
        '[[servers]]\nserver = "xferd-c"\n[servers.load]\ntransport = "frame"\ntls = ["off", "on"]\n'
        '[[servers]]\nserver = "xferd-go"\n[servers.load]\ntransport = "grpc"\ntls = ["on", "on-resume"]\n'
        # A server whose handshakes the runner cannot read (no `metrics` given): the client's count stands in.
        f'[[servers]]\nserver = "command"\nlabel = "quiet"\ncommand = ["{BIN}/xferd-go", "--grpc-addr", "127.0.0.1:0", '
        '"--frame-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--tls-frame-addr", "127.0.0.1:{port}", '
        '"--tls-cert", "{cert}", "--tls-key", "{key}"]\n[servers.load]\ntransport = "frame"\ntls = "on"\n'
    )
    rows = _rows(tmp_path, text)
    assert set(rows) == {"c/frame/tls=off", "c/frame/tls=on", "go/grpc/tls=on", "go/grpc/tls=on-resume",
                         "quiet/frame/tls=on"}
    assert [rows[n].tls_counted_by for n in ("c/frame/tls=on", "go/grpc/tls=on")] == ["server", "server"]
    assert rows["quiet/frame/tls=on"].tls_counted_by == "client"
    _handshaken(rows["quiet/frame/tls=on"])
    on, go, off = rows["c/frame/tls=on"], rows["go/grpc/tls=on"], rows["c/frame/tls=off"]
    assert on.ready and on.ready["tls_frame"] and on.ready["tls_tickets"] == "off"
    assert go.ready and go.ready["tls_grpc"] and "tls_frame" not in go.ready
    _handshaken(on)
    _handshaken(go)
    assert off.ready and "tls_frame" not in off.ready
    figures = (off.tls_handshakes_per_s, off.tls_resumed_share, off.server_cpu_per_handshake_s, off.tls_bytes_per_conn)
    assert figures == (None, None, None, None)
    assert (tmp_path / "run" / "tls" / "ca.pem").is_file()
    # With tickets and a name to key grpcio's session cache by, gRPC's connections after the first resume.
    resumed = rows["go/grpc/tls=on-resume"]
    assert resumed.tls_resumed_share is not None and resumed.tls_resumed_share > 0.5, resumed.tls_resumed_share


def test_a_command_server_is_given_the_runs_certificate(tmp_path: Path) -> None:
    text = (
        HEAD.replace('connections = "call"\n', 'driver = "xferload"\ntransport = "frame"\ntls = "on"\n')
        + f'[[servers]]\nserver = "command"\nlabel = "cmd"\ncommand = ["{BIN}/xferd-c", "--frame-addr", '
        '"127.0.0.1:0", "--tls-frame-addr", "127.0.0.1:{port}", "--tls-cert", "{cert}", "--tls-key", "{key}", '
        '"--metrics-addr", "127.0.0.1:{metrics_port}"]\nmetrics = "http://127.0.0.1:{metrics_port}/metrics"\n'
    )
    row = _rows(tmp_path, text)["cmd/frame/tls=on"]
    # Its {port} serves TLS only: xferload's calls succeed there because it trusts the run's CA.
    assert row.client_qps and row.client_failures == 0
    assert row.config["command"]["tls"] and row.config["command"]["argv"][-3:-2] == ["{key}"]
    log = (tmp_path / "run" / "logs").glob("*.server.log")
    assert any("tls_frame=127.0.0.1:" in p.read_text() for p in log)
    assert (tmp_path / "run" / "tls" / "server.pem").is_file()
