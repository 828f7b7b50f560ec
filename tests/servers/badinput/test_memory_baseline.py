"""After hostile input the server's live memory returns to baseline (docs/DESIGN.md, "Bad input").

Live memory, not RSS: allocators keep freed pages, so RSS proves little either way. Each server's own
exact figure is used instead: xferd-c's allocator statistics (glibc `mallinfo2`, or the sanitizer's count
under ASan) and xferd-go's heap after a GC forced through pprof (`/debug/pprof/heap?gc=1`).
"""

from __future__ import annotations

import socket
import struct
import time
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from py_client import FrameClient
from py_client.content import gen_bytes
from tests.support.raw_frame import RawConn, begin
from tests.support.servers import SERVERS, RunningServer, running_server, selected_servers
from xfer.v1 import frame_pb2

ABANDONED = 64              # uploads begun, given one chunk, then abandoned: their connections close
CHUNK = 256 << 10           # so ABANDONED * CHUNK = 16 MiB staged by hostile clients
DECLARED = 1 << 30          # each declares the maximum file size
IDLE_TIMEOUT_S = 4          # --upload-idle-timeout: none expires before the peak is measured (closing their
                            # connections aborts them; expiry on an open one: test_upload_idle_expiry.py)
SLACK = 4 << 20             # what may stay behind: caches, connection buffers, runtime bookkeeping
RETURN_DEADLINE_S = 30.0

FRAME_SERVERS = [n for n in selected_servers() if "frame" in SERVERS[n].transports]


@pytest.fixture(params=FRAME_SERVERS)
def server(request: pytest.FixtureRequest) -> Iterator[RunningServer]:
    # --max-staged-bytes lets every hostile client declare its 1 GiB: memory is what is measured here.
    args = ["--store=mem", f"--upload-idle-timeout={IDLE_TIMEOUT_S}s", f"--max-staged-bytes={ABANDONED * DECLARED}"]
    with running_server(request.param, args) as s:
        yield s


def _metric(s: RunningServer, name: str) -> float:
    with urllib.request.urlopen(s.metrics_url, timeout=10) as r:
        text = r.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    raise AssertionError(f"{s.kind.name} exports no {name}")


def live_bytes(s: RunningServer) -> float:
    if s.kind.name == "xferd-go":
        # Twice: sync.Pool's victim cache keeps pooled buffers through one GC.
        for _ in range(2):
            with urllib.request.urlopen(f"http://{s.addr('metrics')}/debug/pprof/heap?gc=1", timeout=10) as r:
                r.read()
        return _metric(s, "go_memstats_heap_alloc_bytes")
    return _metric(s, "xfer_allocator_allocated_bytes")


def _abandon_uploads(addr: str) -> list[RawConn]:
    """Each hostile client declares 1 GiB, sends one chunk and goes quiet without commit or abort. The
    connections stay open until the peak is measured: closing one aborts its upload at once."""
    chunk = gen_bytes(CHUNK, 1)
    conns = []
    for i in range(ABANDONED):
        c = RawConn(addr)
        upload_id = begin(c, f"abandoned-{i}", DECLARED, CHUNK)
        r = c.call("Xfer.UploadChunk", frame_pb2.UploadChunkRequest(upload_id=upload_id, offset=0, data=chunk))
        assert r.error == "", r.error
        conns.append(c)
    return conns


def _send_garbage(addr: str) -> None:
    """Connection-level faults: an oversized length prefix, a header that is not protobuf, half a frame."""
    host, port = addr.rsplit(":", 1)
    for payload in (struct.pack(">I", 1 << 30), struct.pack(">II", 8, 4) + b"\xff\xff\xff\xff",
                    struct.pack(">I", 1 << 20) + b"\x00" * 1000):
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(payload)


def test_live_memory_returns_to_baseline(server: RunningServer) -> None:
    addr = server.addr("frame")
    with FrameClient(addr) as c:  # warm up: lazily built structures exist before the baseline
        c.upload("warm.bin", gen_bytes(CHUNK * 2, 2), chunk_size=CHUNK)
        assert c.download("warm.bin").bytes == CHUNK * 2
    baseline = live_bytes(server)

    quiet = _abandon_uploads(addr)
    _send_garbage(addr)
    peak = live_bytes(server)
    staged = ABANDONED * CHUNK
    # The measurement must see the hostile clients' data, or its return to baseline proves nothing.
    assert peak >= baseline + staged * 0.75, f"baseline {baseline:.0f} B, peak {peak:.0f} B"

    for c in quiet:  # the clients leave: their uploads go (aborted with their connections)
        c.close()
    deadline = time.monotonic() + RETURN_DEADLINE_S
    now = peak
    while now > baseline + SLACK and time.monotonic() < deadline:
        time.sleep(0.25)  # poll interval while the server frees the uploads their connections' close aborted
        now = live_bytes(server)
    assert now <= baseline + SLACK, (
        f"{server.kind.name}: live memory {now:.0f} B, baseline {baseline:.0f} B, peak {peak:.0f} B "
        f"{RETURN_DEADLINE_S:.0f} s after the hostile clients left")

    with FrameClient(addr) as c:  # and the server still works, the warm file intact
        assert c.download("warm.bin").data == gen_bytes(CHUNK * 2, 2)
