"""xferd-c: clients that vanish with calls in flight, then SIGTERM, must end in a clean exit (status 0).

Regression test for a use after free in the event loop (servers/c/src/loop.c, loop_main): the loop took
completed calls (loop_take_incoming) on the eventfd's event in the middle of an epoll batch. A completion
for a connection whose peer had just reset it failed to write, closed the connection and dropped its last
reference, freeing it, while a later entry of the same batch (the reset's EPOLLHUP|EPOLLERR) still pointed
at it. The loop then read the freed conn and, once glibc had merged the chunk into a larger free block
(which zeroes its `closed` flag), closed it a second time: "double free or corruption (out)", SIGABRT. The
benchmark runner saw it as a crash at shutdown, because Locust is stopped (its connections reset mid-call)
right before the server gets SIGTERM.

Each wave opens connections, begins an upload on each, pipelines upload chunks, echoes and reads without
reading the answers, then resets every connection (SO_LINGER 0) while those calls are still in flight; the
last wave is followed at once by SIGTERM. Waves repeat on fresh servers within a time budget.

Most sensitive with the ASan build (`XFERD_C_BIN=build/bin/xferd-c-asan`), which reports the stale read
itself (before the fix, within the first ten to twenty waves); the release build is run with glibc's tcache and fastbins
turned off (GLIBC_TUNABLES), so a freed conn is merged at once and the stale pointer ends in the double free
rather than being skipped by luck. Either way the failure is a non-zero exit status and, under ASan, its
report on stderr.
"""

from __future__ import annotations

import socket
import struct
import time

from py_client.frame import encode_request
from tests.support.raw_frame import ConnectionClosed, RawConn, begin
from tests.support.servers import start_server
from xfer.v1 import file_transfer_pb2 as ft
from xfer.v1 import frame_pb2 as fr

NAME = "xferd-c"
# The benchmark's configuration (two event loops, two workers) with glibc's allocator.
SERVER_ARGS = ["--alloc=glibc", "--io-threads=2", "--workers=2"]
# No per-thread caches, no fastbins: every free goes straight into glibc's bins and merges with its
# neighbours. Ignored by the ASan build, which has its own allocator.
SERVER_ENV = {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=0:glibc.malloc.mxfast=0"}
BUDGET_S = 25.0        # whole test, servers started and stopped included
MAX_SERVERS = 24
WAVES_PER_SERVER = 8
CONNS = 24             # connections per wave
DEPTH = 6              # (chunk, echo, read) triples pipelined per connection
CHUNK = 32 << 10
PAYLOAD = bytes(range(256)) * (CHUNK // 256)
SANITIZER_MARKS = ("AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer", "runtime error:",
                   "double free", "corrupted", "free(): ")


def wave(addr: str, tag: str) -> None:
    """One wave of connections that reset with calls in flight."""
    conns = [RawConn(addr) for _ in range(CONNS)]
    try:
        ids = [begin(c, f"race-{tag}-{i}", DEPTH * CHUNK, CHUNK) for i, c in enumerate(conns)]
        for k in range(DEPTH):
            echo = ft.EchoRequest(payload=PAYLOAD[: 512 * (k + 1)]).SerializeToString()
            read = fr.ReadRequest(name="gen:1048576:1", offset=k * CHUNK, length=CHUNK).SerializeToString()
            for c, uid in zip(conns, ids, strict=True):
                chunk = fr.UploadChunkRequest(upload_id=uid, offset=k * CHUNK, data=PAYLOAD).SerializeToString()
                frames = (encode_request(3 * k + 10, "Xfer.UploadChunk", chunk)
                          + encode_request(3 * k + 11, "Xfer.Echo", echo)
                          + encode_request(3 * k + 12, "Xfer.Read", read))
                try:  # whatever fits in the socket buffer now; the rest is never sent
                    c.sock.send(frames, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    pass
    finally:
        for c in conns:  # a reset, not a FIN: the peer is gone, answers in flight can't be written
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            c.close()


def test_connections_reset_with_calls_in_flight_then_sigterm() -> None:
    deadline = time.monotonic() + BUDGET_S
    servers = waves = 0
    while servers < MAX_SERVERS and time.monotonic() < deadline:
        s = start_server(NAME, SERVER_ARGS, env=SERVER_ENV)
        servers += 1
        died = ""
        try:
            for w in range(WAVES_PER_SERVER):
                try:
                    wave(s.addr("frame"), f"{servers}-{w}")
                except (OSError, ConnectionClosed) as e:  # the server died under this wave or the one before
                    died = f"its wave {w + 1} failed: {e!r}"
                    break
                waves += 1
        finally:
            status = s.stop()  # SIGTERM right after the last wave's resets
        out = "\n".join(s.stderr_lines[-60:])
        assert status == 0, (f"server {servers} exited with status {status} after {waves} waves in all "
                             f"({died or 'SIGTERM after the last wave'}):\n{out}")
        marks = [m for m in SANITIZER_MARKS if m in out]
        assert not marks, f"server {servers} reported {marks}:\n{out}"
    assert waves >= WAVES_PER_SERVER, "the time budget did not cover one server's waves"
