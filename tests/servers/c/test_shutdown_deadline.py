"""xferd-c: the shutdown bound of PROTOCOL.md "Shutdown" holds whatever the calls in flight are doing.

After SIGTERM the process exits 0 no later than `--drain-timeout` + 1 s, whatever its clients do. A drain of
1 s keeps the tests short; each one puts a different kind of work in flight at the signal and measures how
long the process takes to exit (and, where the clients may read, when the last connection closes):

- CPU-bound calls: `Read`s of fresh `gen:` names, whose first `Read` needs the whole file's CRC-32, one pass
  over the seed's stream (about 1 s per GiB here). The workers were busy with those passes at the deadline,
  and the stop joined them, waiting for each pass to end: 16 fresh 1 GiB seeds exited 1.2-2.2 s after the
  signal with a 1 s drain (5.3-6.2 s with the default 5 s, as the benchmark saw), and a fresh 64 GiB seed
  (`--max-file-size=64GiB`) only after its whole pass, about a minute. Now the pass looks at a cancel flag
  before every 1 MiB block, and the connections are closed at the deadline without waiting for the workers.
- calls blocked on the network: answers already built (from the disk store and from cached `gen:` blocks)
  that readers who read nothing leave in full socket buffers, plus an upload whose chunk frame is half
  sent.

Each test waits for its calls to be in flight by polling /metrics, never by sleeping.
"""

from __future__ import annotations

import re
import select
import signal
import socket
import time
import urllib.request
from pathlib import Path

import pytest

from py_client import FrameClient
from py_client.content import gen_bytes
from py_client.frame import encode_request
from tests.support.raw_frame import RawConn, begin
from tests.support.servers import RunningServer, running_server
from xfer.v1 import frame_pb2

NAME = "xferd-c"
DRAIN_S = 1.0
BOUND_S = DRAIN_S + 1.0  # the documented bound
GIB = 1 << 30
MIB = 1 << 20
CONNS = 16
SETTLE_TIMEOUT_S = 20.0  # for the calls to be in flight before the signal
SMALL_RCVBUF = 64 << 10


def _metric(s: RunningServer, pattern: str) -> float:
    with urllib.request.urlopen(s.metrics_url, timeout=5) as r:
        text = r.read().decode()
    total = 0.0
    for m in re.finditer(pattern, text, re.MULTILINE):
        total += float(m.group(1))
    return total


def _wait_metric(s: RunningServer, pattern: str, want: float, what: str) -> None:
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while (got := _metric(s, pattern)) < want:
        assert s.alive(), "the server died:\n" + "\n".join(s.stderr_lines[-40:])
        assert time.monotonic() < deadline, f"{what}: {got:g} of {want:g} after {SETTLE_TIMEOUT_S} s"
        time.sleep(0.02)  # poll interval


INFLIGHT = r"^xfer_inflight_requests (\S+)$"
READS_DONE = r'^xfer_request_duration_seconds_count\{transport="frame",method="Read"\} (\S+)$'


def _slow_reader(addr: str) -> socket.socket:
    host, port = addr.rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_RCVBUF)  # before connect: a small window
    sock.settimeout(10)
    sock.connect((host, int(port)))
    return sock


def _read_req(seq: int, name: str, offset: int, length: int) -> bytes:
    return encode_request(seq, "Xfer.Read",
                          frame_pb2.ReadRequest(name=name, offset=offset, length=length).SerializeToString())


def _sigterm(s: RunningServer, readable: list[socket.socket]) -> tuple[float, float]:
    """SIGTERM; returns (seconds until the last of `readable` was closed by the server, seconds until the
    process exited). The sockets in `readable` are read (and discarded) meanwhile; pass none to leave every
    client not reading."""
    t0 = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    limit = t0 + BOUND_S + 3.0  # past the bound: enough to tell a miss, never a hang
    open_socks = list(readable)
    closed_at = t0
    while open_socks and time.monotonic() < limit:
        ready, _, _ = select.select(open_socks, [], [], 0.05)
        for sock in ready:
            try:
                data = sock.recv(1 << 20)
            except (ConnectionResetError, BlockingIOError):
                data = b""
            if not data:
                open_socks.remove(sock)
                closed_at = time.monotonic()
    try:
        status = s.proc.wait(timeout=max(limit - time.monotonic(), 0.0))
    except Exception:
        s.proc.kill()
        s.proc.wait(timeout=10)
        pytest.fail(f"{NAME} still running {time.monotonic() - t0:.2f} s after SIGTERM (drain {DRAIN_S:g} s, "
                    f"bound {BOUND_S:g} s); {len(open_socks)} connections still open")
    exited = time.monotonic() - t0
    s.stop()  # collects the rest of stderr
    assert status == 0, f"exit status {status}:\n" + "\n".join(s.stderr_lines[-40:])
    for line in s.stderr_lines[1:]:  # after the ready line: a call abandoned past the deadline, say
        print(f"\n{NAME} stderr: {line}")
    assert not open_socks, f"{len(open_socks)} connections still open after the exit"
    return closed_at - t0, exited


@pytest.mark.parametrize(("max_file_size", "size", "conns"), [
    (GIB, GIB, CONNS),            # 16 fresh 1 GiB seeds: the benchmark's case
    (64 * GIB, 64 * GIB, 2),      # one pass of a minute per call
], ids=["16x1GiB", "2x64GiB"])
def test_sigterm_during_fresh_gen_crc_passes(max_file_size: int, size: int, conns: int) -> None:
    args = ["--store=mem", f"--drain-timeout={DRAIN_S:g}s", f"--max-file-size={max_file_size}"]
    with running_server(NAME, args) as s:
        assert s.ready["drain_timeout"] == "1s", s.ready
        addr = s.addr("frame")
        socks = [_slow_reader(addr) for _ in range(conns)]
        try:
            for i, sock in enumerate(socks):  # a fresh seed each: every first Read needs its own pass
                sock.sendall(_read_req(1, f"gen:{size}:{7000 + i}", size - MIB, MIB))
            _wait_metric(s, INFLIGHT, conns, "Reads in flight")
            closed, exited = _sigterm(s, socks)
        finally:
            for sock in socks:
                sock.close()
        print(f"\n{conns} fresh gen:{size}: last connection closed {closed:.2f} s, exit {exited:.2f} s "
              f"after SIGTERM (drain {DRAIN_S:g} s)")
        assert closed <= BOUND_S, f"last connection closed {closed:.2f} s after SIGTERM, bound {BOUND_S:g} s"
        assert exited <= BOUND_S, f"exited {exited:.2f} s after SIGTERM, bound {BOUND_S:g} s"


def test_sigterm_with_answers_stalled_in_full_socket_buffers(tmp_path: Path) -> None:
    store = tmp_path / "store"
    args = [f"--store=disk:{store}", f"--drain-timeout={DRAIN_S:g}s"]
    with running_server(NAME, args) as s:
        addr = s.addr("frame")
        stored = gen_bytes(8 * MIB, 3)
        with FrameClient(addr, timeout=30) as c:
            c.upload("stored.bin", stored, chunk_size=MIB)
            assert c.stat("gen:67108864:11").size == 64 * MIB  # the seed's CRC-32s and blocks, cached
        socks = [_slow_reader(addr) for _ in range(CONNS)]
        uploader = RawConn(addr, timeout=10)
        try:
            upload_id = begin(uploader, "slow-upload.bin", 4 * MIB, MIB)
            chunk = encode_request(50, "Xfer.UploadChunk", frame_pb2.UploadChunkRequest(
                upload_id=upload_id, offset=0, data=b"u" * MIB).SerializeToString())
            uploader.send(chunk[: len(chunk) // 2])  # half a frame: never parsed, never served
            reads = 0
            for i, sock in enumerate(socks):  # half read the disk store (pread), half cached gen: blocks
                name = "stored.bin" if i % 2 else "gen:67108864:11"
                sock.sendall(b"".join(_read_req(1 + k, name, k * MIB, MIB) for k in range(8)))
                reads += 8
            _wait_metric(s, READS_DONE, reads, "Reads answered")  # all built; most wait in full buffers
            _, exited = _sigterm(s, [])
        finally:
            for sock in socks:
                sock.close()
            uploader.close()
        print(f"\nanswers stalled in {CONNS} full socket buffers: exit {exited:.2f} s after SIGTERM "
              f"(drain {DRAIN_S:g} s)")
        assert exited <= BOUND_S, f"exited {exited:.2f} s after SIGTERM, bound {BOUND_S:g} s"
