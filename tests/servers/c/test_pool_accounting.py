"""`--alloc pool` means pool: every allocation a call makes on the request path (its job, its answer, its
request's block, the store's bookkeeping) goes through xferd-c's allocator layer, so the pool's counters on
/metrics account for every call, and every byte a call took is handed back once it is answered.

The real server runs with one event loop and one worker; a fresh connection makes N calls of one method,
one at a time, then closes; the counters are read before and after, once the server has closed its side."""

from __future__ import annotations

import os
import time
import zlib

import pytest

from tests.servers.c.test_xferd_c import NAME, FrameConn, metric_value, scrape
from tests.support.servers import running_server
from xfer.v1 import file_transfer_pb2 as ft
from xfer.v1 import frame_pb2 as fr

CALLS = 200
SETTLE_S = 10.0
# Per call: the job that carries it from loop to worker and back, and its answer's buffer.
GETS_PER_CALL = 2
# Per connection: its state, its read buffer, the acceptor's hand-over record.
GETS_PER_CONN = 3


def counters(server) -> tuple[float, float]:
    text = scrape(server)
    return metric_value(text, "xfer_buffer_pool_gets_total"), metric_value(text, "xfer_allocator_allocated_bytes")


def settle(server) -> None:
    """Polls until the server has closed every connection and answered every call."""
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        text = scrape(server)
        if metric_value(text, "xfer_connections") == 0 and metric_value(text, "xfer_inflight_requests") == 0:
            return
        time.sleep(0.02)
    raise AssertionError("the server did not close the connection within 10 s")


def run_calls(server, make_call, calls: int = CALLS) -> tuple[float, float]:
    """Counters moved by one connection's calls: (gets, allocated bytes still held)."""
    settle(server)
    gets0, alloc0 = counters(server)
    conn = FrameConn(server.addr("frame"))
    for seq in range(1, calls + 1):
        make_call(conn, seq)
    conn.close()
    settle(server)
    gets1, alloc1 = counters(server)
    return gets1 - gets0, alloc1 - alloc0


@pytest.fixture
def pool_server(tmp_path):
    args = ["--alloc=pool", f"--store=disk:{tmp_path}", "--io-threads=1", "--workers=1"]
    with running_server(NAME, args) as s:
        yield s


def echo(conn: FrameConn, seq: int) -> None:
    r = conn.call("Echo", ft.EchoRequest(payload=b"x" * 100), ft.EchoResponse, seq=seq)
    assert r.payload == b"x" * 100


def test_every_echo_call_allocates_through_the_pool(pool_server) -> None:
    run_calls(pool_server, echo)  # warm-up: the pool's free lists fill
    gets, held = run_calls(pool_server, echo)
    want = GETS_PER_CALL * CALLS + GETS_PER_CONN
    assert want <= gets <= want + 4, f"{gets} pool gets for {CALLS} Echo calls, want {want} (+ at most 4)"
    assert held == 0, f"{held} bytes still held by the pool after every call was answered"


def test_every_upload_and_read_call_allocates_through_the_pool(pool_server) -> None:
    data = os.urandom(96 * 1024)  # a chunk larger than the read buffer: a block of its own per request
    crc = zlib.crc32(data)
    names = iter(range(10**6))
    open_upload = {"id": 0}

    def upload(conn: FrameConn, seq: int) -> None:
        # three calls per file: begin, one chunk, commit
        if seq % 3 == 1:
            begin = fr.UploadBeginRequest(name=f"f{next(names)}", size=len(data), chunk_size=len(data))
            open_upload["id"] = conn.call("UploadBegin", begin, fr.UploadBeginResponse, seq=seq).upload_id
        elif seq % 3 == 2:
            chunk = fr.UploadChunkRequest(upload_id=open_upload["id"], offset=0, data=data)
            assert conn.call("UploadChunk", chunk, fr.UploadChunkResponse, seq=seq).received == len(data)
        else:
            commit = fr.UploadCommitRequest(upload_id=open_upload["id"], crc32=crc)
            assert conn.call("UploadCommit", commit, fr.UploadCommitResponse, seq=seq).crc32 == crc

    def read(conn: FrameConn, seq: int) -> None:
        r = conn.call("Read", fr.ReadRequest(name="f0", offset=0, length=len(data)), fr.ReadResponse, seq=seq)
        assert r.data == data

    files = 66
    run_calls(pool_server, upload, 3 * files)
    gets, _ = run_calls(pool_server, upload, 3 * files)
    # every call: job + answer. Beyond that, per file: a begin's upload record, its two slot arrays and its
    # entries in the uploads and per-connection tables (5); the chunk's own block (1); the commit's file record
    # and its name's entry (2): the store's bookkeeping goes through the pool too. The slack: table growth.
    want = GETS_PER_CALL * 3 * files + files * (5 + 1 + 2) + GETS_PER_CONN
    assert want <= gets <= want + 8, f"{gets} pool gets for {files} uploads, want {want} (+ at most 8)"

    run_calls(pool_server, read)
    gets, held = run_calls(pool_server, read)
    # a Read of a stored file also opens it: the handle's record is the store's, through the pool too
    want = (GETS_PER_CALL + 1) * CALLS + GETS_PER_CONN
    assert want <= gets <= want + 4, f"{gets} pool gets for {CALLS} Read calls, want {want} (+ at most 4)"
    assert held == 0, f"{held} bytes still held by the pool after every Read was answered"
