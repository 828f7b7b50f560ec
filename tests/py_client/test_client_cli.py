"""`python -m py_client`: argument errors, JSON lines and exit codes, against a real xferd-go.

Argument errors go through the command's own parser in this process (`py_client.cli.main`: argparse exits with
status 2); one of them runs as a process too, for the exit status and the message the shell sees."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from py_client import cli as py_cli
from py_client import connect, meta
from py_client.content import crc32, gen_bytes, gen_crc32
from tests.support.servers import RunningServer, running_server

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"op", "ok", "bytes", "crc32", "seconds", "error"}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "py_client", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def one_line(out: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    lines = out.stdout.splitlines()
    assert len(lines) == 1, out.stdout + out.stderr
    obj = json.loads(lines[0])
    assert set(obj) == KEYS
    return obj  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def xferd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    store = tmp_path_factory.mktemp("cli-store")
    with running_server("xferd-go", [f"--store=disk:{store}"]) as s:
        yield s


# ---- argument errors: exit 2 with an argparse message ----------------------------------------------

@pytest.mark.parametrize(("args", "needle"), [
    ((), "required"),
    (("upload", "--target", "frame://127.0.0.1:1", "--name", "a"), "--file"),
    (("echo", "--target", "http://127.0.0.1:1", "--size", "1"), "unknown scheme 'http'"),
    (("echo", "--target", "frame://127.0.0.1", "--size", "1"), "no port"),
    (("echo", "--target", "frame://127.0.0.1:1", "--size", "-1"), "size '-1' is not a size: want plain bytes"),
    (("echo", "--target", "frame://127.0.0.1:1", "--size", "lots"), "size 'lots' is not a size"),
    (("stat", "--target", "grpc://127.0.0.1:1"), "--name"),
    (("download", "--name", "x"), "--target"),
    (("upload", "--target", "frame://127.0.0.1:1", "--name", "a", "--file", "/no/such/file"),
     "/no/such/file"),
    (("upload", "--target", "frame://127.0.0.1:1", "--name", "a", "--file", __file__, "--chunk", "0"),
     "size '0' = 0 bytes is below the minimum, 1"),
    (("frobnicate",), "invalid choice"),
])
def test_bad_arguments(args: tuple[str, ...], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    out, err = refused(capsys, *args)
    assert out == ""
    assert needle in err and "usage:" in err


def refused(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[str, str]:
    """`main(args)` in this process, which must exit 2 (argparse's error); its stdout and stderr."""
    with pytest.raises(SystemExit) as e:
        py_cli.main(list(args))
    assert e.value.code == 2, e.value
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_bad_arguments_as_a_process() -> None:
    out = cli("echo", "--target", "http://127.0.0.1:1", "--size", "1")
    assert out.returncode == 2, out
    assert out.stdout == ""
    assert "unknown scheme 'http'" in out.stderr and "usage:" in out.stderr


def test_out_is_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, err = refused(capsys, "download", "--target", "frame://127.0.0.1:1", "--name", "x", "--out", str(tmp_path))
    assert "is a directory" in err


# ---- round trips against xferd-go -------------------------------------------------------------------

@pytest.mark.parametrize("transport", ["grpc", "frame"])
def test_round_trip(xferd: RunningServer, transport: str, tmp_path: Path) -> None:
    target = xferd.target(transport)
    data = os.urandom(300_001)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    name = f"cli-{transport}.bin"

    up = one_line(cli("upload", "--target", target, "--name", name, "--file", str(src), "--chunk", "65536"))
    assert up["op"] == "upload" and up["ok"] is True and up["error"] is None
    assert (up["bytes"], up["crc32"]) == (len(data), crc32(data)) and up["seconds"] > 0

    st = one_line(cli("stat", "--target", target, "--name", name))
    assert (st["op"], st["ok"], st["bytes"], st["crc32"]) == ("stat", True, len(data), crc32(data))

    dest = tmp_path / "out" / "copy.bin"
    dest.parent.mkdir()
    down = cli("download", "--target", target, "--name", name, "--out", str(dest))
    assert down.returncode == 0, down.stderr
    line = one_line(down)
    assert (line["op"], line["ok"]) == ("download", True)
    assert (line["bytes"], line["crc32"]) == (len(data), crc32(data))
    assert dest.read_bytes() == data
    assert os.listdir(dest.parent) == ["copy.bin"], "a temp file was left behind"

    gen = one_line(cli("download", "--target", target, "--name", "gen:1000000:4"))
    assert (gen["ok"], gen["bytes"], gen["crc32"]) == (True, 1000000, gen_crc32(1000000, 4))

    echo = one_line(cli("echo", "--target", target, "--size", "1000"))
    assert (echo["op"], echo["ok"], echo["bytes"]) == ("echo", True, 1000)
    zero = one_line(cli("echo", "--target", target, "--size", "0"))
    assert (zero["ok"], zero["bytes"], zero["crc32"]) == (True, 0, 0)


@pytest.mark.parametrize("transport", ["grpc", "frame"])
def test_failures_exit_non_zero(xferd: RunningServer, transport: str, tmp_path: Path) -> None:
    target = xferd.target(transport)
    dest = tmp_path / "never.bin"
    out = cli("download", "--target", target, "--name", "missing.bin", "--out", str(dest))
    assert out.returncode == 1
    line = one_line(out)
    assert line["ok"] is False and line["error"].startswith("not_found: ")
    assert '"missing.bin"' in line["error"]
    assert not dest.exists() and os.listdir(tmp_path) == []

    src = tmp_path / "x.bin"
    src.write_bytes(b"x")
    bad = cli("upload", "--target", target, "--name", "a/b", "--file", str(src))
    assert bad.returncode == 1 and one_line(bad)["error"].startswith("invalid_argument: ")

    st = cli("stat", "--target", target, "--name", "missing.bin")
    assert st.returncode == 1 and one_line(st)["error"].startswith("not_found: ")


def test_existing_out_file_untouched_when_the_download_fails(xferd: RunningServer, tmp_path: Path) -> None:
    dest = tmp_path / "keep.bin"
    dest.write_bytes(b"old content")
    out = cli("download", "--target", xferd.target("frame"), "--name", "missing.bin", "--out", str(dest))
    assert out.returncode == 1
    assert dest.read_bytes() == b"old content"
    assert os.listdir(tmp_path) == ["keep.bin"]


def test_no_partial_file_when_a_download_fails_midway(tmp_path: Path) -> None:
    """Bytes were written to the temp file before the server died: it must vanish, not be renamed."""
    dest_dir = tmp_path / "out"
    dest_dir.mkdir()
    with running_server("xferd-go", ["--store=mem"]) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "py_client", "download", "--target", server.target("frame"),
             "--name", "gen:1000000000:1", "--chunk", "65536", "--out", str(dest_dir / "big.bin")],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Wait (bounded) until the client has written part of its temp file, then kill the server.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(p.stat().st_size for p in dest_dir.iterdir()):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.01)  # polling the file system for progress, not waiting for readiness
        assert any(p.stat().st_size for p in dest_dir.iterdir()), "the download never started writing"
        server.proc.kill()
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1, stderr
    line = json.loads(stdout)
    assert line["ok"] is False and line["error"].startswith("unavailable: ")
    assert os.listdir(dest_dir) == []


def test_download_verifies_without_out(xferd: RunningServer) -> None:
    data = gen_bytes(100_000, 2)
    with connect(xferd.target("frame")) as c:
        c.upload("verify.bin", data, chunk_size=65536)
    line = one_line(cli("download", "--target", xferd.target("frame"), "--name", "verify.bin"))
    assert (line["ok"], line["bytes"], line["crc32"]) == (True, len(data), crc32(data))


def test_unreachable_server() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        port = s.getsockname()[1]
        out = cli("echo", "--target", f"frame://127.0.0.1:{port}", "--size", "1")
        assert out.returncode == 1 and one_line(out)["error"].startswith("unavailable: ")
        out = cli("stat", "--target", f"grpc://127.0.0.1:{port}", "--name", "x", "--timeout", "3")
        assert out.returncode == 1 and one_line(out)["error"].startswith("unavailable: ")


# ---- meta ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", ["grpc", "frame"])
def test_meta_sends_entries_and_checks_the_answer(xferd: RunningServer, transport: str) -> None:
    out = cli("meta", "--target", xferd.target(transport), "--entries", "50", "--entry-size", "4-16", "--seed", "3")
    assert out.returncode == 0, out.stderr
    line = one_line(out)
    entries = meta.random_entries(50, 4, 16, random.Random(3))
    assert line["ok"] and line["crc32"] == meta.digest(meta.sorted_entries(entries))
    assert line["bytes"] == sum(len(k) + len(v) for k, v in entries)


def test_meta_refusal_is_the_servers_error(xferd: RunningServer) -> None:
    out = cli("meta", "--target", xferd.target("frame"), "--entries", "1025", "--entry-size", "8-8")
    assert out.returncode != 0
    assert "invalid_argument: 1025 entries exceed limit 1024" in out.stdout + out.stderr


def test_meta_bad_entry_size_is_an_argument_error(capsys: pytest.CaptureFixture[str]) -> None:
    _, err = refused(capsys, "meta", "--target", "frame://127.0.0.1:1", "--entry-size", "9-3")
    assert "want 0 <= MIN <= MAX <= 4096" in err
