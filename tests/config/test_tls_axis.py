"""The `tls` axis ([load] tls, xferbench/config/tls.py) as the schema reads it: its values and cell names, the TLS flags
a registry server is started with, what a run's configuration records, and the refusals that name the cell: a kind
or transport without a TLS listener, a command server without {cert} and {key}, and what the run's certificate
cannot reach (containers, another host's server, your own Locust users)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from xferbench import config as xe
from xferbench.config import tls
from xferbench.config.tls import TLSFiles

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "build" / "bin"
FILES = TLSFiles(ca=Path("/run/tls/ca.pem"), cert=Path("/run/tls/server.pem"), key=Path("/run/tls/server.key"))


def parse(text: str) -> xe.Experiment:
    return xe.parse(tomllib.loads(text), "t.toml", "t")


def refused(text: str, *needles: str) -> str:
    with pytest.raises(xe.ExperimentError) as info:
        parse(text)
    msg = str(info.value)
    for n in needles:
        assert n in msg, msg
    return msg


def test_the_axis_names_its_cells_and_starts_the_listener_of_their_transport() -> None:
    exp = parse(
        '[[servers]]\nserver = "xferd-go"\n[servers.load]\ntransport = ["grpc", "frame"]\ntls = ["off", "on", "on-resume"]\n'
    )
    names = [c.name for c in exp.cells]
    assert names == [
        "go/grpc/tls=off",
        "go/grpc/tls=on",
        "go/grpc/tls=on-resume",
        "go/frame/tls=off",
        "go/frame/tls=on",
        "go/frame/tls=on-resume",
    ]
    off, on, resume = (exp.cell(f"go/frame/tls={m}") for m in tls.TLS_MODES)
    assert not [a for a in off.server_argv() if a.startswith("--tls")]
    assert "--tls-frame-addr=127.0.0.1:0" in on.server_argv(tls_files=FILES)
    assert {"--tls-cert=/run/tls/server.pem", "--tls-key=/run/tls/server.key", "--tls-tickets=off"} <= set(
        on.server_argv(tls_files=FILES)
    )
    assert "--tls-tickets=on" in resume.server_argv(tls_files=FILES)  # resumption needs the server's tickets
    assert "--tls-grpc-addr=127.0.0.1:0" in exp.cell("go/grpc/tls=on").server_argv(tls_files=FILES)
    with pytest.raises(ValueError, match="needs the run's certificate"):
        on.server_argv()
    # Recorded only when on: a plaintext run's configuration reads as it always did.
    assert "tls" not in off.config()["load"] and on.config()["load"]["tls"] == "on"


def test_a_load_over_tls_says_so_in_its_name_even_when_it_does_not_vary() -> None:
    exp = parse(
        '[load]\ntls = "on"\ntransport = "frame"\n[[servers]]\nserver = "xferd-c"\n[servers.flags]\n'
        'alloc = ["glibc", "jemalloc"]\n'
    )
    assert [c.name for c in exp.cells] == ["c/frame/alloc=glibc/tls=on", "c/frame/alloc=jemalloc/tls=on"]


def test_an_unknown_mode_is_refused_with_the_modes() -> None:
    refused('[load]\ntls = "yes"\n[[servers]]\nserver = "xferd-c"\n', "load.tls = 'yes'", '"off" | "on" | "on-resume"')
    refused('[[servers]]\nserver = "xferd-c"\n[servers.load]\ntls = [true]\n', "servers[0].load.tls = True")


def test_a_kind_without_tls_listeners_is_refused_naming_the_cell() -> None:
    refused(
        '[[servers]]\nserver = "bare-echo"\n[servers.load]\nmix = "echo:1"\ntls = ["off", "on"]\n',
        "servers[0]: load.tls = 'on' (cell 'bare/grpc/tls=on'): bare-echo has no TLS listener",
    )


def test_a_transport_without_a_tls_listener_is_refused() -> None:
    # No registry kind today serves a transport without its TLS listener (xferd-c has no gRPC at all, which the
    # transport check refuses first); the refusal is the one function the schema asks.
    said = tls.refusal("on", "xferd-c", False, ("frame",), "grpc", "locust", None)
    assert said == "xferd-c has no TLS listener for grpc (it serves TLS on frame)"
    refused(
        '[[servers]]\nserver = "xferd-c"\n[servers.load]\ntransport = "grpc"\ntls = "on"\n',
        "servers[0].load.transport = 'grpc': xferd-c serves frame",
    )


def test_the_load_must_have_a_tls_client(tmp_path: Path) -> None:
    users = tmp_path / "users.py"
    users.write_text("from locust import User\n\n\nclass Idle(User):\n    pass\n")
    refused(
        f'[load]\ntransport = "frame"\nlocustfile = "{users}"\n[[servers]]\nserver = "xferd-c"\n'
        '[servers.load]\ntls = "on"\n',
        "(cell 'c/frame/tls=on')",
        "your own Locust users",
        "are given no CA",
    )


def test_what_the_runs_certificate_cannot_reach_is_refused() -> None:
    refused(
        '[experiment]\nbackend = "docker"\n[[servers]]\nserver = "xferd-c"\n[servers.load]\ntls = "on"\n',
        "cell 'c/frame/tls=on'",
        'experiment.backend = "docker"',
        "given to servers here only",
    )
    refused(
        '[hosts.app]\nssh = "root@10.77.0.2"\n[[servers]]\nserver = "xferd-c"\nhost = "app"\n[servers.load]\ntls = "on"\n',
        "cell 'c/frame/tls=on'",
        "[[servers]] host = 'app'",
    )


COMMAND = (
    f'[[servers]]\nserver = "command"\nlabel = "cmd"\ncommand = ["{BIN}/xferd-c", "--frame-addr", "127.0.0.1:0", '
    '"--tls-frame-addr", "127.0.0.1:{port}", ARGS]\n[servers.load]\ntransport = "frame"\ntls = ["off", "on"]\n'
)


def test_a_command_server_speaks_tls_only_with_cert_and_key() -> None:
    exp = parse(COMMAND.replace("ARGS", '"--tls-cert", "{cert}", "--tls-key", "{key}"'))
    assert [c.name for c in exp.cells] == ["cmd/frame/tls=off", "cmd/frame/tls=on"]
    assert exp.cells[0].kind.tls_transports == ("grpc", "frame") and exp.cells[0].config()["command"]["tls"]
    refused(
        COMMAND.replace("ARGS", '"--tls-cert", "/etc/my.pem"'),
        "load.tls = 'on' (cell 'cmd/frame/tls=on')",
        "put {cert} and {key} in its command",
    )


def test_cert_and_key_are_paths_not_addresses_nor_an_images() -> None:
    metrics = COMMAND.replace("ARGS", '"--tls-cert", "{cert}"').replace(
        "[servers.load]", 'metrics = "http://{cert}/metrics"\n[servers.load]'
    )
    refused(metrics, "servers[0].metrics = 'http://{cert}/metrics': unknown placeholder {cert}")
    image = (
        '[experiment]\nbackend = "docker"\n[[servers]]\nserver = "command"\nimage = "localhost/mine:dev"\n'
        'command = ["/srv/server", "--port", "{port}", "--cert", "{cert}"]\n'
    )
    refused(image, "servers[0]: {cert} is not for a command server in a container")
