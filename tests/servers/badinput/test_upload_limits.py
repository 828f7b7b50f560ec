"""Upload limits a hostile client runs into (PROTOCOL.md limits table, "Connections and uploads").

--max-uploads-per-conn keeps one connection from taking every upload slot, and closing a connection
aborts the uploads it began at once (not after --upload-idle-timeout); --max-staged-bytes caps the
declared sizes of open uploads; --min-chunk refuses tiny chunks unless one chunk holds the whole file.
Every test starts its own server with the limits under test, over both servers.
"""

from __future__ import annotations

import threading
import time
import urllib.request
import zlib
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.raw_frame import RawConn, Response, begin
from tests.support.servers import SERVERS, RunningServer, running_server, selected_servers
from xfer.v1 import file_transfer_pb2 as pb
from xfer.v1 import file_transfer_pb2_grpc as pb_grpc
from xfer.v1 import frame_pb2 as fr

FRAME_SERVERS = [s for s in selected_servers() if "frame" in SERVERS[s].transports]
GRPC_SERVERS = [s for s in selected_servers() if "grpc" in SERVERS[s].transports]
PER_CONN = 3
STAGED = 10_000
MIN_CHUNK = 1024
# Far below the idle timeout (60 s): an upload freed within this was freed by the close, not by expiry.
# The server reaps a closed connection asynchronously, so the test polls up to this long.
FREED_WITHIN_S = 10.0  # a sixth of it: polling on a loaded 2-core machine
TIMEOUT_S = 30.0  # above FREED_WITHIN_S, so held streams outlive every poll


@pytest.fixture(params=FRAME_SERVERS)
def name(request: pytest.FixtureRequest) -> str:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def limited(name: str) -> Iterator[RunningServer]:
    args = ["--store=mem", f"--max-uploads-per-conn={PER_CONN}", f"--max-uploads={PER_CONN}",
            f"--max-staged-bytes={STAGED}", "--upload-idle-timeout=60s"]
    with running_server(name, args) as s:
        yield s


def begin_call(conn: RawConn, size: int, chunk: int, upload: str = "u.bin") -> Response:
    return conn.call("Xfer.UploadBegin", fr.UploadBeginRequest(name=upload, size=size, chunk_size=chunk))


def assert_error(r: Response, code: str, *subjects: str) -> None:
    assert r.code == code, f"want {code}, got {r.error!r}"
    for s in subjects:
        assert s in r.error, f"{s!r} not named in {r.error!r}"


def begin_eventually(addr: str, size: int, chunk: int) -> float:
    """Begins an upload on fresh connections until one succeeds; returns how long that took."""
    t0 = time.monotonic()
    while True:
        with RawConn(addr) as conn:
            r = begin_call(conn, size, chunk)
        if not r.error:
            return time.monotonic() - t0
        assert r.code == "resource_exhausted", r.error
        assert time.monotonic() - t0 < FREED_WITHIN_S, f"still refused after {FREED_WITHIN_S}s: {r.error}"
        time.sleep(0.02)  # poll interval while the server reaps the closed connection


def served(s: RunningServer) -> None:
    """One round trip, so a test stops a server that is past start-up: xferd-go installs its SIGTERM
    handler only after printing the ready line."""
    with RawConn(s.addr("frame")) as conn:
        assert not conn.call("Xfer.Echo", pb.EchoRequest(payload=b"up")).error


def test_ready_line_shows_the_limits(limited: RunningServer) -> None:
    served(limited)
    assert limited.ready["max_uploads_per_conn"] == str(PER_CONN)
    assert limited.ready["max_staged_bytes"] == str(STAGED)
    assert limited.ready["min_chunk"] == str(MIN_CHUNK)


def test_limits_from_the_environment(name: str) -> None:
    env = {"XFERD_MAX_UPLOADS_PER_CONN": "7", "XFERD_MAX_STAGED_BYTES": "123456", "XFERD_MIN_CHUNK": "2048"}
    with running_server(name, ["--store=mem"], env) as s:
        served(s)
        assert (s.ready["max_uploads_per_conn"], s.ready["max_staged_bytes"], s.ready["min_chunk"]) == \
            ("7", "123456", "2048")


def test_per_connection_limit_leaves_room_for_others(name: str) -> None:
    with running_server(name, ["--store=mem", f"--max-uploads-per-conn={PER_CONN}"]) as s, \
            RawConn(s.addr("frame")) as hog, RawConn(s.addr("frame")) as other:
        for _ in range(PER_CONN):
            begin(hog, "u.bin", 10, 10)
        assert_error(begin_call(hog, 10, 10), "resource_exhausted", str(PER_CONN), "per-conn")
        assert not begin_call(other, 10, 10).error


def test_closing_a_connection_frees_its_uploads_at_once(limited: RunningServer) -> None:
    addr = limited.addr("frame")
    with RawConn(addr) as hog:
        for _ in range(PER_CONN):
            begin(hog, "u.bin", 10, 10)
        with RawConn(addr) as other:  # every server-wide slot is taken
            assert_error(begin_call(other, 10, 10), "resource_exhausted", str(PER_CONN))
    begin_eventually(addr, 10, 10)


def test_staged_bytes_limit(limited: RunningServer) -> None:
    with RawConn(limited.addr("frame")) as conn:
        first = begin(conn, "a.bin", 6000, MIN_CHUNK)
        assert_error(begin_call(conn, 5000, MIN_CHUNK), "resource_exhausted", str(STAGED))
        r = conn.call("Xfer.UploadAbort", fr.UploadAbortRequest(upload_id=first))
        assert not r.error, r.error
        assert not begin_call(conn, 5000, MIN_CHUNK).error  # the abort released its bytes


def test_staged_bytes_released_on_commit(limited: RunningServer) -> None:
    data = b"x" * 6000
    with RawConn(limited.addr("frame")) as conn:
        uid = begin(conn, "c.bin", len(data), len(data))
        assert not conn.call("Xfer.UploadChunk", fr.UploadChunkRequest(upload_id=uid, offset=0, data=data)).error
        r = conn.call("Xfer.UploadCommit", fr.UploadCommitRequest(upload_id=uid, crc32=zlib.crc32(data)))
        assert not r.error, r.error
        assert not begin_call(conn, STAGED, MIN_CHUNK).error


def test_staged_bytes_released_when_the_connection_closes(limited: RunningServer) -> None:
    with RawConn(limited.addr("frame")) as conn:
        begin(conn, "a.bin", STAGED, MIN_CHUNK)
    begin_eventually(limited.addr("frame"), STAGED, MIN_CHUNK)


@pytest.mark.parametrize(("size", "chunk"), [(1 << 20, 1), (1 << 20, MIN_CHUNK - 1), (MIN_CHUNK + 1, 512)])
def test_chunk_below_min_chunk(limited: RunningServer, size: int, chunk: int) -> None:
    with RawConn(limited.addr("frame")) as conn:
        assert_error(begin_call(conn, size, chunk), "invalid_argument", str(chunk), str(MIN_CHUNK))


def test_one_small_chunk_holding_the_file_is_fine(limited: RunningServer) -> None:
    data = b"tiny"
    with RawConn(limited.addr("frame")) as conn:
        uid = begin(conn, "tiny.bin", len(data), 16)  # 16 < --min-chunk, but one chunk holds the file
        assert not conn.call("Xfer.UploadChunk", fr.UploadChunkRequest(upload_id=uid, offset=0, data=data)).error
        r = conn.call("Xfer.UploadCommit", fr.UploadCommitRequest(upload_id=uid, crc32=zlib.crc32(data)))
        assert not r.error, r.error


def test_min_chunk_flag(name: str) -> None:
    with running_server(name, ["--store=mem", "--min-chunk=4096"]) as s, RawConn(s.addr("frame")) as conn:
        assert_error(begin_call(conn, 10_000, 2048), "invalid_argument", "4096")
        assert not begin_call(conn, 10_000, 4096).error


# ---- gRPC: the same checks on the Upload header ---------------------------------------------------

@pytest.fixture(params=GRPC_SERVERS)
def stub(request: pytest.FixtureRequest) -> Iterator[pb_grpc.FileTransferStub]:
    args = ["--store=mem", f"--max-staged-bytes={STAGED}"]
    with running_server(request.param, args) as s, grpc.insecure_channel(s.addr("grpc")) as ch:
        yield pb_grpc.FileTransferStub(ch)


def upload_status(stub: pb_grpc.FileTransferStub, size: int, chunk: int) -> grpc.RpcError:
    msgs = [pb.UploadRequest(header=pb.UploadHeader(name="g.bin", size=size, chunk_size=chunk))]
    with pytest.raises(grpc.RpcError) as info:
        stub.Upload(iter(msgs), timeout=TIMEOUT_S)
    return info.value


def test_grpc_min_chunk(stub: pb_grpc.FileTransferStub) -> None:
    err = upload_status(stub, 1 << 20, 1)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and str(MIN_CHUNK) in (err.details() or "")


def test_grpc_staged_bytes(stub: pb_grpc.FileTransferStub) -> None:
    err = upload_status(stub, STAGED + 1, MIN_CHUNK)
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and str(STAGED) in (err.details() or "")


def probe_begin(stub: pb_grpc.FileTransferStub) -> grpc.StatusCode:
    """An Upload of a header alone: RESOURCE_EXHAUSTED if the begin is refused, else INVALID_ARGUMENT
    (the stream ends before its trailer, which aborts the probe's upload at once)."""
    msgs = [pb.UploadRequest(header=pb.UploadHeader(name="probe.bin", size=10, chunk_size=10))]
    with pytest.raises(grpc.RpcError) as info:
        stub.Upload(iter(msgs), timeout=TIMEOUT_S)
    code = info.value.code()
    assert code in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INVALID_ARGUMENT), info.value
    return code  # type: ignore[no-any-return]


def probe_until(stub: pb_grpc.FileTransferStub, want: grpc.StatusCode) -> None:
    t0 = time.monotonic()
    while probe_begin(stub) != want:
        assert time.monotonic() - t0 < FREED_WITHIN_S, f"no {want} within {FREED_WITHIN_S}s"
        time.sleep(0.02)  # poll interval: the held streams' headers reach the server asynchronously


def inflight(s: RunningServer) -> float:
    with urllib.request.urlopen(s.metrics_url, timeout=TIMEOUT_S) as r:
        text = r.read().decode()
    return next(x.value for fam in text_string_to_metric_families(text) for x in fam.samples
                if x.name == "xfer_inflight_requests")


def hold_uploads(s: RunningServer, stub: pb_grpc.FileTransferStub, n: int, release: threading.Event) -> list[Any]:
    """n Upload streams on the stub's connection that send a header each and wait for `release`. They must be
    in flight on the server (its gauge) before a probe begins: a probe overlapping a held stream's header takes
    that slot for a moment, and the held stream is refused."""

    def held() -> Iterator[pb.UploadRequest]:
        yield pb.UploadRequest(header=pb.UploadHeader(name="held.bin", size=10, chunk_size=10))
        release.wait(TIMEOUT_S)

    streams = [stub.Upload.future(held(), timeout=TIMEOUT_S) for _ in range(n)]
    t0 = time.monotonic()
    while inflight(s) < n:
        assert time.monotonic() - t0 < FREED_WITHIN_S, f"{n} held uploads not in flight within {FREED_WITHIN_S}s"
        time.sleep(0.02)  # poll interval: the streams reach the server asynchronously
    return streams


@pytest.mark.parametrize("server", GRPC_SERVERS)
def test_grpc_per_connection_limit(server: str) -> None:
    """Streams of one gRPC connection share its --max-uploads-per-conn; another connection is not affected."""
    own = [("grpc.use_local_subchannel_pool", 1)]  # a channel of its own: its own TCP connection
    release = threading.Event()
    with running_server(server, ["--store=mem", "--max-uploads-per-conn=2"]) as s, \
            grpc.insecure_channel(s.addr("grpc"), options=own) as hog_ch, \
            grpc.insecure_channel(s.addr("grpc"), options=own) as other_ch:
        hog, other = pb_grpc.FileTransferStub(hog_ch), pb_grpc.FileTransferStub(other_ch)
        try:
            streams = hold_uploads(s, hog, 2, release)
            probe_until(hog, grpc.StatusCode.RESOURCE_EXHAUSTED)
            assert not any(f.done() for f in streams), [f.exception() for f in streams if f.done()]
            assert probe_begin(other) == grpc.StatusCode.INVALID_ARGUMENT
        finally:
            release.set()
        for f in streams:
            with pytest.raises(grpc.RpcError):
                f.result(timeout=TIMEOUT_S)
        probe_until(hog, grpc.StatusCode.INVALID_ARGUMENT)  # the ended streams left nothing behind
