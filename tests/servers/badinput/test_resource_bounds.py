"""Connection-level bounds on memory, descriptors and time (PROTOCOL.md "Backpressure", "Descriptors",
"Frame buffers", "Connection errors").

Memory is each server's live figure, as in test_memory_baseline: xferd-c's allocator statistics, and for
xferd-go the heap after a forced GC plus goroutine stacks (what unbounded per-call goroutines cost).
"""

from __future__ import annotations

import os
import resource
import socket
import struct
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from py_client import GrpcClient
from py_client.frame import decode_response, encode_request, parse_frame
from tests.support.raw_frame import RawConn
from tests.support.servers import SERVERS, RunningServer, running_server, selected_servers, start_server
from xfer.v1 import file_transfer_pb2 as ft
from xfer.v1 import frame_pb2

FRAME_SERVERS = [n for n in selected_servers() if "frame" in SERVERS[n].transports]
GO = [n for n in selected_servers() if n == "xferd-go"]
C = [n for n in selected_servers() if n == "xferd-c"]

CALLS = 16                  # --max-conn-calls in the flood tests
UNSENT = 4 << 20            # --max-conn-unsent in the flood tests
READ_LEN = 256 << 10        # each flooding Read asks for this much
FLOOD_READS = 400           # unbounded, these would queue ~100 MiB of answers
SLACK = 6 << 20             # caches, connection buffers, runtime bookkeeping
RETURN_DEADLINE_S = 20.0
SEND_WINDOW_S = 3.0         # how long the flooder keeps pushing before it gives up (TCP pushes back)


def _metrics(s: RunningServer) -> dict[str, float]:
    with urllib.request.urlopen(s.metrics_url, timeout=10) as r:
        text = r.read().decode()
    return {sm.name: float(sm.value) for fam in text_string_to_metric_families(text) for sm in fam.samples
            if not sm.labels}


def live_bytes(s: RunningServer) -> float:
    if s.kind.name == "xferd-go":
        for _ in range(2):  # twice: sync.Pool's victim cache survives one GC
            with urllib.request.urlopen(f"http://{s.addr('metrics')}/debug/pprof/heap?gc=1", timeout=10) as r:
                r.read()
        m = _metrics(s)
        return m["go_memstats_heap_alloc_bytes"] + m["go_memstats_stack_inuse_bytes"]
    return _metrics(s)["xfer_allocator_allocated_bytes"]


def settle(s: RunningServer, baseline: float, slack: float = SLACK) -> float:
    """Polls live memory until it is within slack of baseline, or the deadline; returns the last figure."""
    deadline = time.monotonic() + RETURN_DEADLINE_S
    now = live_bytes(s)
    while now > baseline + slack and time.monotonic() < deadline:
        time.sleep(0.2)  # poll interval while the server releases the departed client's memory
        now = live_bytes(s)
    return now


def eventually(fn: Callable[[], None], what: str, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while True:
        try:
            fn()
            return
        except (AssertionError, OSError) as e:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: still failing after {within}s: {e}") from e
            time.sleep(0.05)  # poll interval


def push(sock: socket.socket, data: bytes, window_s: float) -> int:
    """Sends as much of data as the server takes within window_s; returns the bytes sent."""
    sock.settimeout(0.2)
    sent, end = 0, time.monotonic() + window_s
    while sent < len(data) and time.monotonic() < end:
        try:
            sent += sock.send(data[sent : sent + (256 << 10)])
        except TimeoutError:
            continue  # the server stopped reading: that is the backpressure under test
    return sent


def echo_ok(addr: str, payload: bytes = b"fresh") -> None:
    with RawConn(addr, timeout=5) as c:
        r = c.call("Xfer.Echo", ft.EchoRequest(payload=payload))
        assert not r.error and r.parse(ft.EchoResponse).payload == payload  # type: ignore[attr-defined]


def warm_baseline(s: RunningServer) -> tuple[str, float]:
    """The server's frame address, and the live memory a test measures against: taken after one Echo, so what
    a first call sets up for good is not counted against the test."""
    addr = s.addr("frame")
    echo_ok(addr)
    return addr, live_bytes(s)


@pytest.fixture(params=FRAME_SERVERS)
def bounded(request: pytest.FixtureRequest) -> Iterator[RunningServer]:
    args = ["--store=mem", f"--max-conn-calls={CALLS}", f"--max-conn-unsent={UNSENT}"]
    with running_server(request.param, args) as s:
        yield s


def test_unread_answers_cost_at_most_the_bounds(bounded: RunningServer) -> None:
    """A client that pipelines Reads and never reads the answers costs the server about the bounds,
    and everything comes back once it leaves."""
    assert bounded.ready["max_conn_calls"] == str(CALLS) and bounded.ready["max_conn_unsent"] == str(UNSENT)
    addr, baseline = warm_baseline(bounded)
    # A file of one Read: servers keep the generated blocks its Reads share (PROTOCOL.md "Generated content"),
    # which is then one 1 MiB block of the slack, not a whole larger file's blocks on top of the bound.
    req = frame_pb2.ReadRequest(name=f"gen:{READ_LEN}:7", offset=0, length=READ_LEN).SerializeToString()
    flood = b"".join(encode_request(i + 1, "Xfer.Read", req) for i in range(FLOOD_READS))
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
        push(sock, flood, SEND_WINDOW_S)
        peak = max(live_bytes(bounded) for _ in range(5))
    # Answers queued or being produced count against the unsent bound; one call may cross it.
    bound = UNSENT + READ_LEN + SLACK
    assert peak - baseline <= bound, (
        f"{bounded.kind.name}: {(peak - baseline) / 2**20:.1f} MiB held for an unread client, "
        f"bound {bound / 2**20:.1f} MiB")
    now = settle(bounded, baseline)
    assert now <= baseline + SLACK, f"{bounded.kind.name}: {now - baseline:.0f} B still held after the client left"
    echo_ok(addr)


@pytest.mark.parametrize("name", GO)
def test_echo_burst_memory_returns(name: str) -> None:
    """Tens of thousands of pipelined Echo calls leave no goroutines or net/rpc free lists behind."""
    calls = 100_000
    with running_server(name, ["--store=mem"]) as s:
        addr, baseline = warm_baseline(s)
        body = ft.EchoRequest(payload=b"x" * 16).SerializeToString()
        frames = b"".join(encode_request(i + 1, "Xfer.Echo", body) for i in range(calls))
        with RawConn(addr, timeout=30) as c:
            answered: list[int] = []
            reader = threading.Thread(target=lambda: answered.extend(c.response().seq for _ in range(calls)))
            reader.start()
            c.send(frames)
            reader.join(timeout=60)
            assert len(answered) == calls, f"{len(answered)} of {calls} answered"
        now = settle(s, baseline, 4 << 20)
        assert now <= baseline + (4 << 20), f"xferd-go holds {(now - baseline) / 2**20:.1f} MiB after the burst"


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("name", FRAME_SERVERS)
def test_out_of_descriptors(name: str) -> None:
    """More connections than descriptors: the server stays up, tells or drops the extra clients, does not
    spin, and serves a fresh client once the others close."""
    with running_server(name, ["--store=mem", "--max-conns=1000"]) as s:
        pid = s.proc.pid
        in_use = len(os.listdir(f"/proc/{pid}/fd"))
        limit = in_use + 24
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, limit))
        addr = s.addr("frame")
        host, port = addr.rsplit(":", 1)
        conns: list[socket.socket] = []
        try:
            for _ in range(60):
                conns.append(socket.create_connection((host, int(port)), timeout=5))
            served = refused = 0
            for sock in conns:
                sock.settimeout(5)
                sock.sendall(encode_request(1, "Xfer.Echo", ft.EchoRequest(payload=b"hi").SerializeToString()))
            for sock in conns:
                data = _read_frame_or_eof(sock)
                if data is None:
                    refused += 1
                    continue
                hdr_seq, err = data
                if hdr_seq == 0:
                    assert err.startswith("resource_exhausted"), err
                    refused += 1
                else:
                    served += 1
            assert served >= 8 and refused >= 20, (served, refused)
            assert s.alive()
            t0, cpu0 = time.monotonic(), _cpu_seconds(pid)
            time.sleep(1.0)  # the measured idle second
            used = _cpu_seconds(pid) - cpu0
            assert used < 0.3 * (time.monotonic() - t0), f"{name} burned {used:.2f} s of CPU in an idle second"
        finally:
            for sock in conns:
                sock.close()
        eventually(lambda: echo_ok(addr), "a fresh client after the others closed")


def _read_frame_or_eof(sock: socket.socket) -> tuple[int, str] | None:
    """The first response's (seq, error), or None when the server closed without one. Times out only if
    the server leaves the connection hanging, which is what must not happen."""
    buf = bytearray()
    while True:
        r = parse_frame(buf, 1 << 20)
        if r.outcome == "frame":
            hdr, _ = decode_response(bytes(buf[: r.size]))
            return hdr.seq, hdr.error
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        buf += chunk


@pytest.mark.parametrize("name", FRAME_SERVERS)
def test_declared_frames_cost_what_arrived(name: str) -> None:
    """50 clients each declare an 8 MiB frame and send 1 KiB of it: far less than 50 x 8 MiB is held."""
    n = 50
    with running_server(name, ["--store=mem"]) as s:
        addr, baseline = warm_baseline(s)
        host, port = addr.rsplit(":", 1)
        socks = [socket.create_connection((host, int(port)), timeout=10) for _ in range(n)]
        try:
            for sock in socks:
                sock.sendall(struct.pack(">II", 8 << 20, 16) + b"\x00" * 1024)
            eventually(lambda: echo_ok(addr), "server answers while the frames are pending")
            held = live_bytes(s) - baseline
            assert held < 16 << 20, f"{name}: {held / 2**20:.1f} MiB for {n} declared 8 MiB frames"
        finally:
            for sock in socks:
                sock.close()


@pytest.mark.parametrize("name", FRAME_SERVERS)
def test_nothing_after_connection_error(name: str) -> None:
    """Calls in flight when a connection error is sent are never answered after it."""
    with running_server(name, ["--store=mem"]) as s:
        req = frame_pb2.ReadRequest(name="gen:16777216:3", offset=0, length=4 << 20).SerializeToString()
        with RawConn(s.addr("frame"), timeout=20) as c:
            c.send(b"".join(encode_request(i + 1, "Xfer.Read", req) for i in range(12))
                   + struct.pack(">II", 4 + 2000, 2000))  # header_len over 1024: a connection error
            got = c.wait_closed(timeout=20)
        errors = [i for i, r in enumerate(got) if r.seq == 0]
        assert errors, f"no connection error among {[r.seq for r in got]}"
        assert errors == [len(got) - 1], f"answers after the seq-0 response: {[r.seq for r in got]}"


@pytest.mark.parametrize("name", GO)
def test_frame_flood_leaves_grpc_serving(name: str) -> None:
    """Frame connections up to and over --max-conns do not take gRPC's budget."""
    limit = 6
    with running_server(name, ["--store=mem", f"--max-conns={limit}"]) as s:
        conns = [RawConn(s.addr("frame"), timeout=5) for _ in range(limit)]
        try:
            for i, c in enumerate(conns):
                assert c.call("Xfer.Echo", ft.EchoRequest(payload=b"%d" % i)).error == ""
            with RawConn(s.addr("frame"), timeout=5) as extra:
                assert extra.connection_error().code == "resource_exhausted"
            with GrpcClient(s.addr("grpc"), timeout=10) as g:
                assert g.echo(b"grpc still serves") == b"grpc still serves"
        finally:
            for c in conns:
                c.close()


@pytest.mark.parametrize("name", FRAME_SERVERS)
def test_slow_scraper_blocks_nobody(name: str) -> None:
    """A scrape request trickling at 1 byte/s delays no other scrape, and SIGTERM still exits promptly."""
    drain = 1.0
    s = start_server(name, ["--store=mem", f"--drain-timeout={drain:g}s"])
    try:
        host, port = s.addr("metrics").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as slow:
            slow.sendall(b"G")
            for _ in range(5):
                t0 = time.monotonic()
                with urllib.request.urlopen(s.metrics_url, timeout=3) as r:
                    assert r.status == 200 and b"xfer_" in r.read()
                assert time.monotonic() - t0 < 2.0
                slow.sendall(b"E")
            t0 = time.monotonic()
            status = s.stop()
            elapsed = time.monotonic() - t0
        assert status == 0, status
        assert elapsed < drain + 1.0, f"{name} took {elapsed:.1f} s to exit with a slow scraper connected"
    finally:
        s.stop()


@pytest.mark.parametrize("name", FRAME_SERVERS)
def test_reader_that_never_reads_is_dropped(name: str) -> None:
    """Answers that meet a full send buffer for --write-timeout close the connection."""
    with running_server(name, ["--store=mem", "--write-timeout=1s"]) as s:
        assert s.ready["write_timeout"] == "1s", s.ready
        host, port = s.addr("frame").rsplit(":", 1)
        req = frame_pb2.ReadRequest(name="gen:8388608:7", offset=0, length=READ_LEN).SerializeToString()
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
            push(sock, b"".join(encode_request(i + 1, "Xfer.Read", req) for i in range(64)), 1.0)
            t0 = time.monotonic()

            def accepted() -> None:
                assert _metrics(s)["xfer_connections"] == 1, "the connection is not accepted yet"

            eventually(accepted, "the server accepts the connection")

            def dropped() -> None:
                assert _metrics(s)["xfer_connections"] == 0, "the non-reading client is still connected"

            eventually(dropped, "dropped after --write-timeout", within=8.0)
            assert time.monotonic() - t0 >= 0.5, "dropped before the write timeout"
