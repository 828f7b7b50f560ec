"""The disk store trusts nothing it finds in its directory (PROTOCOL.md "The disk store's directory").

Symlinks and FIFOs planted in files/ are never served and never block; a tmp/ or files/ that is a symlink
stops the server before it touches anything; start-up cleans only regular files directly in tmp/; the
store holds no descriptor per committed file; an internal error names no server path. Every test starts
its own server on a fresh store directory, over both servers.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from py_client import FrameClient
from tests.support.raw_frame import RawConn, Response, begin
from tests.support.servers import SERVERS, RunningServer, running_server, selected_servers
from xfer.v1 import file_transfer_pb2 as ft
from xfer.v1 import frame_pb2 as fr
from xferbench.run.process import Server

FRAME_SERVERS = [s for s in selected_servers() if "frame" in SERVERS[s].transports]
PROMPT_S = 5.0  # a Stat or Read that looks at a FIFO must answer well within this
START_EXIT_S = 30.0  # a server refusing its store exits long before this (ASan builds start slowly)
SECRET = b"outside the store\n"
CHUNK = 1024


@pytest.fixture(params=FRAME_SERVERS)
def name(request: pytest.FixtureRequest) -> str:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A file outside the store that a planted link points to."""
    outside = tmp_path / "outside"
    outside.mkdir()
    p = outside / "secret.txt"
    p.write_bytes(SECRET)
    return p


def store_dir(tmp_path: Path) -> Path:
    d = tmp_path / "store"
    d.mkdir(exist_ok=True)
    return d


def assert_not_found(conn: RawConn, name: str) -> None:
    """Stat and Read of name answer not_found (promptly: the connection's timeout bounds each call)."""
    for r in (conn.call("Xfer.Stat", ft.StatRequest(name=name)),
              conn.call("Xfer.Read", fr.ReadRequest(name=name, offset=0, length=100))):
        assert r.code == "not_found", f"{name}: want not_found, got {r.error!r}"
        assert SECRET.decode().strip() not in r.error


def upload(s: RunningServer, name: str, data: bytes) -> None:
    with FrameClient(s.addr("frame"), timeout=30) as c:
        assert c.upload(name, data, chunk_size=CHUNK).crc32 == zlib.crc32(data)


def run_to_exit(server: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    kind = SERVERS[server]
    return subprocess.run([str(kind.binary), *kind.port0_flags, *args], capture_output=True, text=True,
                          timeout=START_EXIT_S, check=False)


# ---- planted symlinks and FIFOs -------------------------------------------------------------------

def test_symlink_planted_while_running_is_not_served(name: str, tmp_path: Path, secret: Path) -> None:
    d = store_dir(tmp_path)
    with running_server(name, [f"--store=disk:{d}"]) as s:
        (d / "files" / "link.txt").symlink_to(secret)
        with RawConn(s.addr("frame"), timeout=PROMPT_S) as conn:
            assert_not_found(conn, "link.txt")


def test_symlink_found_at_start_is_not_served(name: str, tmp_path: Path, secret: Path) -> None:
    d = store_dir(tmp_path)
    (d / "files").mkdir()
    (d / "files" / "link.txt").symlink_to(secret)
    (d / "files" / "real.txt").write_bytes(b"a regular file left by an earlier run")
    with running_server(name, [f"--store=disk:{d}"]) as s, RawConn(s.addr("frame"), timeout=PROMPT_S) as conn:
        assert_not_found(conn, "link.txt")
        st = conn.call("Xfer.Stat", ft.StatRequest(name="real.txt")).parse(ft.StatResponse)
        assert st.size == len(b"a regular file left by an earlier run")  # type: ignore[attr-defined]


def test_committed_file_replaced_by_symlink_is_not_served(name: str, tmp_path: Path, secret: Path) -> None:
    d = store_dir(tmp_path)
    with running_server(name, [f"--store=disk:{d}"]) as s:
        upload(s, "victim.bin", os.urandom(3000))
        victim = d / "files" / "victim.bin"
        victim.unlink()
        victim.symlink_to(secret)
        with RawConn(s.addr("frame"), timeout=PROMPT_S) as conn:
            r = conn.call("Xfer.Read", fr.ReadRequest(name="victim.bin", offset=0, length=100))
            assert r.code == "not_found", r.error


def test_fifo_is_not_found_promptly_and_start_does_not_hang(name: str, tmp_path: Path) -> None:
    d = store_dir(tmp_path)
    (d / "files").mkdir()
    os.mkfifo(d / "files" / "at-start.fifo")
    with running_server(name, [f"--store=disk:{d}"]) as s:  # the ready line comes: start-up did not block
        os.mkfifo(d / "files" / "while-running.fifo")
        with RawConn(s.addr("frame"), timeout=PROMPT_S) as conn:
            assert_not_found(conn, "at-start.fifo")
            assert_not_found(conn, "while-running.fifo")


# ---- the directory itself ------------------------------------------------------------------------

@pytest.mark.parametrize("sub", ["tmp", "files"])
def test_symlinked_subdir_refuses_to_start(name: str, tmp_path: Path, sub: str) -> None:
    d = store_dir(tmp_path)
    target = tmp_path / "target"
    target.mkdir()
    (target / "precious.part").write_bytes(b"keep me")
    (d / sub).symlink_to(target)
    r = run_to_exit(name, [f"--store=disk:{d}"])
    assert r.returncode == 1, r.stderr
    assert f"{name}: error: store: " in r.stderr and "symlink" in r.stderr, r.stderr
    assert sorted(p.name for p in target.iterdir()) == ["precious.part"]
    assert (target / "precious.part").read_bytes() == b"keep me"


def test_subdir_that_is_a_file_refuses_to_start(name: str, tmp_path: Path) -> None:
    d = store_dir(tmp_path)
    (d / "files").write_bytes(b"not a directory")
    r = run_to_exit(name, [f"--store=disk:{d}"])
    assert r.returncode == 1, r.stderr
    assert f"{name}: error: store: " in r.stderr and "not a directory" in r.stderr, r.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a directory to another user")
def test_subdir_owned_by_another_user_refuses_to_start(name: str, tmp_path: Path) -> None:
    d = store_dir(tmp_path)
    (d / "tmp").mkdir()
    os.chown(d / "tmp", 65534, 65534)
    r = run_to_exit(name, [f"--store=disk:{d}"])
    assert r.returncode == 1, r.stderr
    assert f"{name}: error: store: " in r.stderr and "owned by uid 65534" in r.stderr, r.stderr


def test_start_removes_only_regular_files_directly_in_tmp(name: str, tmp_path: Path, secret: Path) -> None:
    d = store_dir(tmp_path)
    tmp = d / "tmp"
    (tmp / "sub").mkdir(parents=True)
    (tmp / "stale.part").write_bytes(b"an upload that never committed")
    (tmp / "sub" / "inner.part").write_bytes(b"not directly in tmp/")
    (tmp / "link.part").symlink_to(secret)
    with running_server(name, [f"--store=disk:{d}"]) as s, FrameClient(s.addr("frame"), timeout=30) as c:
        assert c.echo(b"up") == b"up"  # past start-up (see test_upload_limits.served)
        assert not (tmp / "stale.part").exists()
        assert (tmp / "sub" / "inner.part").read_bytes() == b"not directly in tmp/"
        assert (tmp / "link.part").is_symlink()
        assert secret.read_bytes() == SECRET


# ---- descriptors ---------------------------------------------------------------------------------

NOFILE = 256
FILES = 300  # more committed files than the process may open descriptors
FD_BOUND = 64  # PROTOCOL.md's headroom for the store, the listeners and the metrics endpoint

# Runs in the child before exec: both limits, so the server cannot raise its soft limit back.
_LIMITED = ("import os, resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, ({n}, {n})); "
            "os.execv(sys.argv[1], sys.argv[1:])")


@pytest.fixture
def limited(name: str, tmp_path: Path) -> Iterator[RunningServer]:
    """The server under RLIMIT_NOFILE 256 (set in the child before it execs the server)."""
    kind = SERVERS[name]
    argv = [sys.executable, "-c", _LIMITED.format(n=NOFILE), str(kind.binary), *kind.port0_flags,
            f"--store=disk:{store_dir(tmp_path)}"]
    s = RunningServer(kind, Server(name, argv, dict(os.environ), tail_lines=None))
    try:
        yield s
    except BaseException:
        s.stop()
        raise
    s.stop_cleanly()


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc")
def test_committed_files_hold_no_descriptors(limited: RunningServer) -> None:
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= NOFILE  # the test itself is not limited
    with FrameClient(limited.addr("frame"), timeout=30) as c:
        for i in range(FILES):
            data = f"file {i}".encode()
            assert c.upload(f"f{i}.txt", data, chunk_size=CHUNK).crc32 == zlib.crc32(data)
        assert open_fds(limited.proc.pid) < FD_BOUND
        assert c.download("f0.txt").data == b"file 0"
        assert c.download(f"f{FILES - 1}.txt").data == f"file {FILES - 1}".encode()
        data = os.urandom(5 * CHUNK)
        assert c.upload("after.bin", data, chunk_size=CHUNK).crc32 == zlib.crc32(data)
    assert open_fds(limited.proc.pid) < FD_BOUND


# ---- internal errors -----------------------------------------------------------------------------

def test_internal_error_names_no_path(name: str, tmp_path: Path) -> None:
    """A staged file removed under the server makes the commit fail inside the server: internal, and the
    message names the upload but no path of the server's."""
    d = store_dir(tmp_path)
    data = os.urandom(2 * CHUNK)
    with running_server(name, [f"--store=disk:{d}"]) as s, RawConn(s.addr("frame")) as conn:
        uid = begin(conn, "gone.bin", len(data), CHUNK)
        for off in (0, CHUNK):
            r = conn.call("Xfer.UploadChunk", fr.UploadChunkRequest(upload_id=uid, offset=off,
                                                                    data=data[off:off + CHUNK]))
            assert not r.error, r.error
        staged = list((d / "tmp").iterdir())
        assert len(staged) == 1
        staged[0].unlink()
        r: Response = conn.call("Xfer.UploadCommit", fr.UploadCommitRequest(upload_id=uid, crc32=zlib.crc32(data)))
        assert r.code == "internal", r.error
        assert "gone.bin" in r.error
        assert "/" not in r.error and str(d) not in r.error, r.error
