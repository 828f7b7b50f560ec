"""An upload left idle on a connection that stays open expires (proto/PROTOCOL.md: "an upload with no call
for `--upload-idle-timeout` is aborted, its data discarded").

tests/servers/badinput/test_memory_baseline.py abandons uploads by closing their connections, which aborts them at
once ("an upload belongs to its connection"): it never waits for the idle timeout. Here the client begins
an upload, sends half of it, and then stays connected and silent. The server must, while that connection
is still open:

- keep the upload (and its slot) for the idle timeout, and expire it after, not before;
- release its slot and staged bytes (`--max-uploads=1 --max-uploads-per-conn=1 --max-staged-bytes=` the
  declared size: a new upload, on another connection and on the same one, is refused until then and
  accepted after; neither server exports a gauge of open uploads, so the limits are the visible slot);
- free its memory (the mem store: the server's own live-memory figure, as test_memory_baseline.py reads
  it) or its staged file (the disk store: `tmp/` empty again);
- never show the partial file: Stat and Read say not_found before and after, `files/` never has it, and a
  chunk or commit for the expired upload gets `not_found: no open upload with id N`;
- leave the connection open and working (the server's xfer_connections gauge still counts it; an Echo on
  it is answered), having sent nothing on it unasked.

Every wait polls (a probe UploadBegin, the live-memory figure, the directory) with a deadline; between polls
the test waits on the idle connection itself, so a close or an unasked frame is seen at once."""

from __future__ import annotations

import select
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from py_client import FrameClient
from py_client.content import crc32, gen_bytes
from tests.servers.badinput.test_memory_baseline import FRAME_SERVERS, _metric, live_bytes
from tests.support.raw_frame import RawConn, begin
from tests.support.servers import RunningServer, running_server
from xfer.v1 import file_transfer_pb2 as ft
from xfer.v1 import frame_pb2

IDLE_TIMEOUT_S = 2.0        # --upload-idle-timeout
CHUNK = 256 << 10           # 256 KiB chunks: heap allocations in both servers' mem stores
SENT_CHUNKS = 64            # 16 MiB sent ...
DECLARED = 2 * SENT_CHUNKS * CHUNK  # ... of 32 MiB declared: half an upload
SLACK = 4 << 20             # what live memory may keep after the upload goes (as test_memory_baseline.py)
EXPIRY_DEADLINE_S = IDLE_TIMEOUT_S + 20.0  # the janitors run at least every second; a loaded machine is slow
POLL_S = 0.1                # how long each poll waits on the idle connection
CLOCK_SLACK_S = 0.05        # the servers count idle time in whole milliseconds
NAME = "partial.bin"


@pytest.fixture(params=[(s, st) for s in FRAME_SERVERS for st in ("mem", "disk")],
                ids=lambda p: f"{p[0]}-{p[1]}")
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[RunningServer, Path | None]]:
    name, store = request.param
    store_dir = tmp_path / "store" if store == "disk" else None
    args = [
        f"--store=disk:{store_dir}" if store_dir else "--store=mem",
        f"--upload-idle-timeout={int(IDLE_TIMEOUT_S * 1000)}ms",
        "--max-uploads=1",
        "--max-uploads-per-conn=1",
        f"--max-staged-bytes={DECLARED}",
    ]
    with running_server(name, args) as s:
        yield s, store_dir


def _stays_open_and_silent(conn: RawConn, seconds: float) -> None:
    """Waits on the idle connection: the server must neither close it nor send anything unasked."""
    ready, _, _ = select.select([conn.sock], [], [], seconds)
    if ready:
        data = conn.sock.recv(65536)
        raise AssertionError("the server closed the idle connection" if not data
                             else f"the server sent {len(data)} bytes unasked on the idle connection")


def _begin_error(conn: RawConn) -> str:
    """UploadBegin of the same declared size: '' when it opens (and it is aborted at once), else the error."""
    r = conn.call("Xfer.UploadBegin", frame_pb2.UploadBeginRequest(name="probe.bin", size=DECLARED, chunk_size=CHUNK))
    if r.error:
        return r.error
    upload_id = r.parse(frame_pb2.UploadBeginResponse).upload_id
    a = conn.call("Xfer.UploadAbort", frame_pb2.UploadAbortRequest(upload_id=upload_id))
    assert a.error == "", a.error
    return ""


def _not_visible(conn: RawConn, store_dir: Path | None) -> None:
    st = conn.call("Xfer.Stat", ft.StatRequest(name=NAME))
    assert st.code == "not_found", f"Stat of the partial upload: {st.error or 'found'}"
    rd = conn.call("Xfer.Read", frame_pb2.ReadRequest(name=NAME, offset=0, length=CHUNK))
    assert rd.code == "not_found", f"Read of the partial upload: {rd.error or 'data'}"
    if store_dir is not None:
        assert sorted(p.name for p in (store_dir / "files").iterdir()) == ["warm.bin"]


def test_idle_upload_expires_while_its_connection_stays_open(server: tuple[RunningServer, Path | None]) -> None:
    s, store_dir = server
    addr = s.addr("frame")
    warm = gen_bytes(2 * CHUNK, 2)
    with FrameClient(addr) as c:  # lazily built structures exist before the baseline
        c.upload("warm.bin", warm, chunk_size=CHUNK)
        assert c.download("warm.bin").data == warm
    baseline = live_bytes(s) if store_dir is None else None

    with RawConn(addr) as conn, RawConn(addr) as probe:
        upload_id = begin(conn, NAME, DECLARED, CHUNK)
        for k in range(SENT_CHUNKS):
            if k == SENT_CHUNKS - 1:
                t_last = time.monotonic()  # the upload's last call starts after this
            r = conn.call("Xfer.UploadChunk", frame_pb2.UploadChunkRequest(
                upload_id=upload_id, offset=k * CHUNK, data=gen_bytes(CHUNK, 100 + k)))
            assert r.error == "", r.error
        assert r.parse(frame_pb2.UploadChunkResponse).received == SENT_CHUNKS * CHUNK

        # Held: the slot, the staged bytes, the data; and nothing visible.
        assert _begin_error(conn).startswith("resource_exhausted: "), "a second upload on the same connection"
        assert _begin_error(probe).startswith("resource_exhausted: "), "a second upload on another connection"
        _not_visible(probe, store_dir)
        if baseline is not None:
            peak = live_bytes(s)
            assert peak >= baseline + 0.75 * SENT_CHUNKS * CHUNK, f"baseline {baseline:.0f} B, peak {peak:.0f} B"
        else:
            assert store_dir is not None and len(list((store_dir / "tmp").iterdir())) == 1, "no staged file"

        # The client stays connected and silent; the upload must go by the idle timeout, no sooner.
        while (err := _begin_error(probe)) != "":
            assert err.startswith("resource_exhausted: "), err
            now = time.monotonic()
            assert now - t_last < EXPIRY_DEADLINE_S, (
                f"{s.kind.name}: the idle upload still holds its slot {now - t_last:.1f} s after its last call")
            _stays_open_and_silent(conn, POLL_S)
        freed_after = time.monotonic() - t_last
        assert freed_after >= IDLE_TIMEOUT_S - CLOCK_SLACK_S, f"expired {freed_after:.2f} s after its last call"

        # The connection that began it is still open: counted by the server, and served.
        assert _metric(s, "xfer_connections") == 2, "the server closed a connection"
        assert conn.call("Xfer.Echo", ft.EchoRequest(payload=b"still here")).parse(
            ft.EchoResponse).payload == b"still here"
        # The upload is gone for good: its chunks and its commit are refused, nothing became visible.
        gone = f"not_found: no open upload with id {upload_id}"
        r = conn.call("Xfer.UploadChunk", frame_pb2.UploadChunkRequest(
            upload_id=upload_id, offset=SENT_CHUNKS * CHUNK, data=gen_bytes(CHUNK, 100 + SENT_CHUNKS)))
        assert r.error == gone, r.error
        r = conn.call("Xfer.UploadCommit", frame_pb2.UploadCommitRequest(upload_id=upload_id, crc32=crc32(b"")))
        assert r.error == gone, r.error
        _not_visible(conn, store_dir)
        # Its slot is free on its own connection too (--max-uploads-per-conn=1), and its staged bytes.
        assert _begin_error(conn) == ""

        if baseline is not None:  # its memory is freed (polled: the server frees it just after the slot)
            deadline = time.monotonic() + 10
            while (now_b := live_bytes(s)) > baseline + SLACK and time.monotonic() < deadline:
                _stays_open_and_silent(conn, POLL_S)
            assert now_b <= baseline + SLACK, (
                f"{s.kind.name}: live memory {now_b:.0f} B, baseline {baseline:.0f} B after the upload expired")
        else:
            assert store_dir is not None and list((store_dir / "tmp").iterdir()) == [], "a staged file stayed"
        _stays_open_and_silent(conn, 0)
