"""xferd-c specific checks: allocator choice and detection, metrics, a raw-socket frame round trip,
connection limits and timeouts. Each test starts the real binary (build/bin/xferd-c, or $XFERD_C_BIN)
on port 0 and waits for its ready line."""

from __future__ import annotations

import os
import re
import signal
import socket
import struct
import subprocess
import time
import urllib.request
import zlib

import pytest

from tests.support.servers import SERVERS, running_server, start_server
from xfer.v1 import file_transfer_pb2 as ft
from xfer.v1 import frame_pb2 as fr
from xferbench.analysis.metrics import BY_NAME
from xferbench.measure import figures
from xferbench.measure.scrape import scrape as scrape_snapshot

NAME = "xferd-c"
LIBDIR = "/usr/lib/x86_64-linux-gnu"
PRELOAD_LIBS = {
    "jemalloc": f"{LIBDIR}/libjemalloc.so.2",
    "tcmalloc": f"{LIBDIR}/libtcmalloc_minimal.so.4",
    "mimalloc": f"{LIBDIR}/libmimalloc.so.2",
}
ALLOCS = ["glibc", "jemalloc", "tcmalloc", "mimalloc", "pool"]
IO_TIMEOUT_S = 10.0


def binary() -> str:
    return str(SERVERS[NAME].binary)


def is_sanitizer_build() -> bool:
    """The ASan build serves malloc itself, so preloaded allocators are refused there."""
    return "asan" in os.path.basename(binary())


# ---------------------------------------------------------------- a tiny frame client


class FrameConn:
    def __init__(self, addr: str) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=IO_TIMEOUT_S)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def send(self, method: str, seq: int, body: bytes) -> None:
        hdr = fr.RequestHeader(method=method, seq=seq).SerializeToString()
        self.sock.sendall(struct.pack(">II", 4 + len(hdr) + len(body), len(hdr)) + hdr + body)

    def _need(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("closed by server")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self) -> tuple[fr.ResponseHeader, bytes]:
        frame_len, header_len = struct.unpack(">II", self._need(8))
        rest = self._need(frame_len - 4)
        hdr = fr.ResponseHeader()
        hdr.ParseFromString(rest[:header_len])
        return hdr, rest[header_len:]

    def call(self, method: str, req, resp_type, seq: int = 1):
        self.send(f"Xfer.{method}", seq, req.SerializeToString())
        hdr, body = self.recv()
        assert hdr.seq == seq
        if hdr.error:
            return hdr.error
        out = resp_type()
        out.ParseFromString(body)
        return out


def gen_bytes(size: int, seed: int) -> bytes:
    mask = (1 << 64) - 1
    words = []
    for i in range((size + 7) // 8):
        z = (seed + (i + 1) * 0x9E3779B97F4A7C15) & mask
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        words.append(struct.pack("<Q", z ^ (z >> 31)))
    return b"".join(words)[:size]


def scrape(server) -> str:
    with urllib.request.urlopen(server.metrics_url, timeout=IO_TIMEOUT_S) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return r.read().decode()


def metric_value(text: str, name: str) -> float:
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert m, f"{name} missing"
    return float(m.group(1))


# ---------------------------------------------------------------- allocators


@pytest.mark.parametrize("alloc", ALLOCS)
def test_allocator_detected_and_reported(alloc: str, tmp_path) -> None:
    if is_sanitizer_build() and alloc in PRELOAD_LIBS:
        pytest.skip("a sanitizer build cannot preload another allocator")
    with running_server(NAME, [f"--alloc={alloc}"]) as s:
        want = "asan" if is_sanitizer_build() and alloc == "glibc" else alloc
        assert s.ready["alloc"] == want
        if alloc in PRELOAD_LIBS:
            assert s.ready["malloc_lib"] == PRELOAD_LIBS[alloc]
        # exercise the allocator a little so its statistics move
        c = FrameConn(s.addr("frame"))
        for i in range(20):
            r = c.call("Echo", ft.EchoRequest(payload=os.urandom(100_000)), ft.EchoResponse, seq=i + 1)
            assert len(r.payload) == 100_000
        text = scrape(s)  # with the connection open: its read buffer is allocated (the pool's only live block)
        c.close()
        pool = "on" if alloc == "pool" else "off"
        version = s.ready["version"]
        assert (f'xfer_build_info{{server="xferd-c",version="{version}",allocator="{want}",pool="{pool}",'
                f'gogc="",memlimit=""}} 1') in text
        rss = metric_value(text, "process_resident_memory_bytes")
        assert rss > 0
        if alloc == "mimalloc":
            # mimalloc measures neither allocated nor resident bytes (its "rss" is an estimate from
            # commit), so it reports commit under that name and nothing under the others.
            assert metric_value(text, "xfer_allocator_committed_bytes") > 0
            assert "xfer_allocator_allocated_bytes" not in text and "xfer_allocator_resident_bytes" not in text
        else:
            allocated = metric_value(text, "xfer_allocator_allocated_bytes")
            resident = metric_value(text, "xfer_allocator_resident_bytes")
            assert 0 < allocated <= resident  # what is allocated is resident
            if alloc not in ("jemalloc", "pool"):
                # jemalloc's stats.resident and the pool's slab capacity are upper bounds (PROTOCOL.md) and
                # may exceed RSS; the others measure pages really held, which lie within the process's RSS
                assert resident <= rss
        if alloc == "pool":
            assert metric_value(text, "xfer_buffer_pool_news_total") < metric_value(text, "xfer_buffer_pool_gets_total")
        out = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), capture_output=True)
        assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
        assert s.stop() == 0


def test_report_shows_what_mimalloc_measures() -> None:
    """mimalloc exports committed bytes only; the report's figure for it is named so, and is not empty."""
    if is_sanitizer_build():
        pytest.skip("a sanitizer build cannot preload mimalloc")
    with running_server(NAME, ["--alloc=mimalloc"]) as s:
        first = scrape_snapshot(s.metrics_url)
        c = FrameConn(s.addr("frame"))
        for i in range(20):
            c.call("Echo", ft.EchoRequest(payload=os.urandom(100_000)), ft.EchoResponse, seq=i + 1)
        last = scrape_snapshot(s.metrics_url)
        c.close()
    assert first is not None and last is not None
    fig = figures.server_figures([first, last])
    assert fig["alloc_committed_bytes"] == pytest.approx(
        (first.sum("xfer_allocator_committed_bytes") + last.sum("xfer_allocator_committed_bytes")) / 2)
    assert fig["alloc_committed_bytes"] > 0
    assert fig["alloc_allocated_bytes"] is None and fig["alloc_resident_bytes"] is None
    assert BY_NAME["alloc_committed_bytes"].title == "allocator committed (mimalloc)"
    assert BY_NAME["alloc_committed_bytes"].bar  # report.html draws it


def run_until_exit(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([binary(), "--frame-addr=127.0.0.1:0", "--metrics-addr=127.0.0.1:0", *args],
                          env={**os.environ, **env}, capture_output=True, timeout=30)


@pytest.mark.skipif(is_sanitizer_build(), reason="a sanitizer build serves malloc itself")
def test_refuses_when_preloaded_allocator_is_not_the_one_asked_for() -> None:
    # Someone else's LD_PRELOAD puts jemalloc in front of glibc: --alloc glibc must not pretend.
    r = run_until_exit(["--alloc=glibc"], {"LD_PRELOAD": PRELOAD_LIBS["jemalloc"]})
    assert r.returncode == 1
    assert "xferd-c: error: --alloc glibc asked for glibc, but malloc is served by jemalloc" in r.stderr.decode()
    # The documented test hook swaps the library the re-exec preloads.
    r = run_until_exit(["--alloc=jemalloc"], {"XFERD_C_PRELOAD_LIB": PRELOAD_LIBS["tcmalloc"]})
    assert r.returncode == 1
    assert "asked for jemalloc, but malloc is served by tcmalloc" in r.stderr.decode()
    r = run_until_exit(["--alloc=pool"], {"LD_PRELOAD": PRELOAD_LIBS["mimalloc"]})
    assert r.returncode == 1 and "served by mimalloc" in r.stderr.decode()


def test_tunables_echoed_and_flags_from_env() -> None:
    env = {"MALLOC_ARENA_MAX": "2", "XFERD_MAX_CHUNK": "12345", "XFERD_WORKERS": "3"}
    s = start_server(NAME, ["--workers=1"], env=env)
    try:
        assert "MALLOC_ARENA_MAX=2" in s.ready["env"].split(";")
        assert s.ready["max_chunk"] == "12345"
        assert s.ready["workers"] == "1"  # the command line wins
    finally:
        assert s.stop() == 0


def test_bad_flag_exits_2() -> None:
    r = run_until_exit(["--alloc=nope"], {})
    assert r.returncode == 2 and b"xferd-c: error:" in r.stderr


# ---------------------------------------------------------------- frame round trip


def test_upload_download_over_raw_socket(tmp_path) -> None:
    with running_server(NAME, [f"--store=disk:{tmp_path}"]) as s:
        c = FrameConn(s.addr("frame"))
        data = os.urandom(300_000)
        cs = 65536
        begin = c.call("UploadBegin", fr.UploadBeginRequest(name="a.bin", size=len(data), chunk_size=cs),
                       fr.UploadBeginResponse)
        uid = begin.upload_id
        assert uid != 0
        # pipeline every chunk, last first; answers come back in any order, matched by seq
        offsets = list(range(0, len(data), cs))[::-1]
        for i, off in enumerate(offsets):
            req = fr.UploadChunkRequest(upload_id=uid, offset=off, data=data[off:off + cs])
            c.send("Xfer.UploadChunk", 100 + i, req.SerializeToString())
        seen = set()
        for _ in offsets:
            hdr, _body = c.recv()
            assert hdr.error == "" and hdr.method == "Xfer.UploadChunk"
            seen.add(hdr.seq)
        assert seen == {100 + i for i in range(len(offsets))}
        r = c.call("UploadCommit", fr.UploadCommitRequest(upload_id=uid, crc32=zlib.crc32(data)),
                   fr.UploadCommitResponse)
        assert (r.size, r.crc32) == (len(data), zlib.crc32(data))
        assert (tmp_path / "files" / "a.bin").read_bytes() == data
        got = b""
        while len(got) < len(data):
            rr = c.call("Read", fr.ReadRequest(name="a.bin", offset=len(got), length=100_000), fr.ReadResponse)
            assert rr.size == len(data) and rr.crc32 == zlib.crc32(data)
            got += rr.data
        assert got == data
        st = c.call("Stat", ft.StatRequest(name="gen:1000:7"), ft.StatResponse)
        assert st.size == 1000 and st.crc32 == zlib.crc32(gen_bytes(1000, 7))
        rr = c.call("Read", fr.ReadRequest(name="gen:1000:7", offset=3, length=500), fr.ReadResponse)
        assert rr.data == gen_bytes(1000, 7)[3:503]
        assert c.call("Stat", ft.StatRequest(name="a/b"), ft.StatResponse) == 'invalid_argument: name "a/b" contains \'/\''
        assert c.call("Nope", ft.StatRequest(), ft.StatResponse) == 'unimplemented: unknown method "Xfer.Nope"'
        c.close()
        text = scrape(s)
        assert 'xfer_requests_total{transport="frame",method="UploadChunk",code="ok"} 5' in text
        assert metric_value(text, 'xfer_transfer_bytes_total{direction="upload"}') == len(data)
        assert s.stop() == 0


def test_oversized_frame_is_a_connection_error() -> None:
    with running_server(NAME, ["--max-frame=1000"]) as s:
        c = FrameConn(s.addr("frame"))
        c.sock.sendall(struct.pack(">II", 2000, 10))
        hdr, body = c.recv()
        assert (hdr.seq, hdr.method, body) == (0, "", b"")
        assert hdr.error == "resource_exhausted: frame length 2000 exceeds limit 1000"
        assert c.sock.recv(10) == b""
        c.close()


def test_too_many_connections_and_stalled_client() -> None:
    with running_server(NAME, ["--max-conns=2", "--read-timeout=300ms"]) as s:
        a, b = FrameConn(s.addr("frame")), FrameConn(s.addr("frame"))
        assert a.call("Echo", ft.EchoRequest(payload=b"x"), ft.EchoResponse).payload == b"x"
        b.sock.sendall(b"\x00\x00\x00\x20\x00\x00")  # half a frame, then silence
        extra = FrameConn(s.addr("frame"))
        hdr, _ = extra.recv()
        assert hdr.seq == 0 and hdr.error == "resource_exhausted: too many connections (limit 2)"
        extra.close()
        deadline = time.monotonic() + 5
        dropped = False
        while time.monotonic() < deadline and not dropped:
            # the healthy client keeps being served while the stalled one times out
            assert a.call("Echo", ft.EchoRequest(payload=b"y"), ft.EchoResponse).payload == b"y"
            b.sock.settimeout(0.1)
            try:
                dropped = b.sock.recv(1) == b""
            except TimeoutError:
                pass
        assert dropped, "stalled half-frame client was not dropped"
        a.close()
        b.close()
        assert s.stop(signal.SIGINT) == 0
