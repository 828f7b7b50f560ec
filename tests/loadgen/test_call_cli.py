"""--xfer-call's bad input is refused before any user starts: one line saying what was wrong, exit 2, no traceback.

Checked in-process (tests/loadgen/inprocess.py: Locust's parser with loadgen's options and the start-up checks,
which look the method up by reflection against a real xferd-go), and twice through the real `locust` command.
Reflection that is not served is shown with bare-echo, the same gRPC service without reflection.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadgen._methods import resolve
from tests.loadgen.inprocess import accepted, refusal
from tests.loadgen.support import run_locust
from tests.support.servers import BIN, RunningServer, running_server
from xferbench.run.process import Server

BASE = ["--headless", "-u", "1", "-r", "1", "-t", "1s", "--xfer-metrics-port", "0", "--only-summary"]
ECHO = "xfer.v1.FileTransfer/Echo"
META = "xfer.v1.FileTransfer/Meta"
MIX = f"{ECHO}:3,{META}:1"
PROTO = ["--xfer-proto", "proto/xfer/v1/file_transfer.proto", "--xfer-import-path", "proto"]


def _keyed(*methods: str) -> str:
    """A mix's --xfer-data with an empty request for each of `methods`."""
    return json.dumps({m: {} for m in methods})


@pytest.fixture(scope="module")
def xferd() -> Iterator[RunningServer]:
    with running_server("xferd-go", ["--store=mem"]) as s:
        yield s


@pytest.fixture(scope="module")
def bare_echo() -> Iterator[str]:
    """bare-echo's gRPC target: FileTransfer served, reflection not."""
    server = Server("bare-echo", [str(BIN / "bare-echo")], dict(os.environ))
    try:
        yield f"grpc://{server.ready['grpc']}"
    finally:
        server.stop()


def _refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    err = refusal([*BASE, *args], capsys)
    lines = err.strip().splitlines()
    assert len(lines[-1]) > 0 and "Traceback" not in err, err
    return lines[-1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--xfer-call", "xfer.v1.FileTransfer/Nope"],
            "service xfer.v1.FileTransfer has no method 'Nope'; it has: Download, Echo, Meta, Stat, Upload",
        ),
        (["--xfer-call", "xfer.v9.Files/Echo"], "has no service 'xfer.v9.Files'; it serves: "),
        (["--xfer-call", ECHO, "--xfer-data", '{"payload": '], "--xfer-data '{\"payload\": ': not JSON: Expecting value"),
        (
            ["--xfer-call", ECHO, "--xfer-data", '{"size": 3}'],
            '--xfer-data does not fit xfer.v1.EchoRequest (/xfer.v1.FileTransfer/Echo): Message type "xfer.v1.EchoRequest" '
            'has no field named "size"',
        ),
        (["--xfer-call", ECHO, "--xfer-data", '{"payload": "{{nonce}}"}'], "unknown placeholder '{{nonce}}'"),
        (["--xfer-call", ECHO, "--xfer-data", "@/nonexistent/req.json"], "cannot read '/nonexistent/req.json'"),
        (["--xfer-call", "Echo"], "--xfer-call 'Echo': want SERVICE/METHOD"),
        (["--xfer-data", "{}"], "--xfer-data without --xfer-call"),
        (["--xfer-call", "xfer.v1.FileTransfer/Download", "--xfer-data", "[]"], "it takes one message, not an empty list"),
        (["--xfer-call", "xfer.v1.FileTransfer/Nope", *PROTO], "service xfer.v1.FileTransfer has no method 'Nope'"),
        (["--xfer-call", ECHO, "--xfer-proto", "README.md"], "--xfer-proto 'README.md' (import path .): "),
        # a mix of methods (ECHO:3,META:1): each method known, each weight > 0, --xfer-data keyed by each one
        (
            [
                "--xfer-call",
                f"{ECHO}:3,xfer.v1.FileTransfer/Nope:1",
                "--xfer-data",
                _keyed(ECHO, "xfer.v1.FileTransfer/Nope"),
            ],
            "service xfer.v1.FileTransfer has no method 'Nope'; it has: ",
        ),
        (["--xfer-call", f"{ECHO}:3,{META}:0"], f"weight '0' of '{META}:0'; want a number > 0"),
        (["--xfer-call", f"{ECHO}:-1,{META}:1"], f"weight '-1' of '{ECHO}:-1'; want a number > 0"),
        (["--xfer-call", f"{ECHO}:3,{META}:nan"], "weight 'nan'"),
        (["--xfer-call", f"{ECHO}:3,{META}"], f"'{META}' has no weight; in a mix each is SERVICE/METHOD:WEIGHT"),
        (["--xfer-call", f"{ECHO}:3,{ECHO}:1"], f"{ECHO} given twice"),
        (["--xfer-call", f"{ECHO}:1,other.Service/Echo:1"], "would share the client metrics' method label 'Echo'"),
        (
            ["--xfer-call", MIX],
            f"--xfer-data (none): a mix of --xfer-call methods wants a JSON object keyed by each of {ECHO}, {META}",
        ),
        (["--xfer-call", MIX, "--xfer-data", _keyed(ECHO)], f"--xfer-data: no request for {META}"),
        (
            ["--xfer-call", MIX, "--xfer-data", _keyed(ECHO, META, "xfer.v1.FileTransfer/Stat")],
            "--xfer-data: key 'xfer.v1.FileTransfer/Stat' is not a method of the --xfer-call mix",
        ),
        (["--xfer-call", MIX, "--xfer-data", '[{"payload": ""}]'], "a JSON object keyed by each of"),
        (
            ["--xfer-call", MIX, "--xfer-data", json.dumps({ECHO: {"size": 3}, META: {}})],
            'does not fit xfer.v1.EchoRequest (/xfer.v1.FileTransfer/Echo): Message type "xfer.v1.EchoRequest" has no',
        ),
        (["--xfer-call", MIX, "--xfer-data", json.dumps({ECHO: {}, META: 7})], "want a JSON object (a message)"),
    ],
)
def test_bad_call_is_one_line(
    args: list[str], message: str, xferd: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _refused(["--host", xferd.target("grpc"), *args], capsys)
    assert message in line, line


def test_reflection_not_served(bare_echo: str, capsys: pytest.CaptureFixture[str]) -> None:
    line = _refused(["--host", bare_echo, "--xfer-call", ECHO], capsys)
    assert "does not serve gRPC reflection" in line and "--xfer-proto" in line, line
    # the same server answers once the method comes from the .proto file
    assert accepted([*BASE, "--host", bare_echo, "--xfer-call", ECHO, *PROTO])[1] == "grpc"


def test_call_needs_a_grpc_host(xferd: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    line = _refused(["--host", xferd.target("frame"), "--xfer-call", ECHO], capsys)
    assert "--xfer-call calls gRPC methods on grpc.aio: it needs a grpc:// host" in line, line


def test_protoset_names_the_same_method(xferd: RunningServer, tmp_path: Path) -> None:
    """A protoset (what protoc --descriptor_set_out writes) gives the method reflection gives."""
    out = str(tmp_path / "xfer.protoset")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-Iproto",
            f"--descriptor_set_out={out}",
            "--include_imports",
            "proto/xfer/v1/file_transfer.proto",
        ],
        check=True,
        timeout=60,
    )
    from_set = resolve("xfer.v1.FileTransfer/Upload", "", protoset=out)
    by_reflection = resolve("xfer.v1.FileTransfer/Upload", xferd.addr("grpc"))
    assert (
        (from_set.path, from_set.kind)
        == (by_reflection.path, by_reflection.kind)
        == ("/xfer.v1.FileTransfer/Upload", "client-streaming")
    )


def test_a_mix_is_accepted_however_its_methods_are_spelt(xferd: RunningServer) -> None:
    """--xfer-data's keys name the methods as --xfer-call may (pkg.Service.Method, a leading /); a single method
    keeps its plain --xfer-data, with or without a weight."""
    data = json.dumps({"/xfer.v1.FileTransfer/Echo": {"payload": "{{bytes:8}}"}, "xfer.v1.FileTransfer.Meta": {}})
    host = ["--host", xferd.target("grpc")]
    cfg, transport = accepted(
        [*BASE, *host, "--xfer-call", "xfer.v1.FileTransfer.Echo:2.5,/" + META + ":1", "--xfer-data", data]
    )
    assert transport == "grpc" and cfg.data is not None
    assert accepted([*BASE, *host, "--xfer-call", f"{ECHO}:2", "--xfer-data", '{"payload": ""}'])[1] == "grpc"


def test_the_locust_command_refuses_in_one_line(xferd: RunningServer) -> None:
    """The start-up check of the real command (its argparse refusals are test_cli.py's): one line, exit 2."""
    r = run_locust([*BASE, "--host", xferd.target("grpc"), "--xfer-call", "xfer.v1.FileTransfer/Nope"], timeout=60)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("locust: error:")]
    assert "service xfer.v1.FileTransfer has no method 'Nope'" in line, r.stderr[-2000:]
