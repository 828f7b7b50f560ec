"""py_client tests: URL parsing, errors, and the frame client against the real servers' frame transport."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from py_client import FrameClient, GrpcClient, XferError, connect, parse_target
from py_client.content import crc32, gen_bytes
from tests.support.servers import SERVERS, RunningServer, running_server, selected_servers
from xfer.v1 import file_transfer_pb2, frame_pb2

ROOT = Path(__file__).resolve().parents[2]


# ---- targets ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("url", "scheme", "host", "port"), [
    ("grpc://127.0.0.1:50051", "grpc", "127.0.0.1", 50051),
    ("frame://localhost:7070", "frame", "localhost", 7070),
    ("frame://[::1]:7071", "frame", "::1", 7071),
])
def test_parse_target(url: str, scheme: str, host: str, port: int) -> None:
    t = parse_target(url)
    assert (t.scheme, t.host, t.port) == (scheme, host, port)
    assert str(t) == url


@pytest.mark.parametrize(("url", "needle"), [
    ("http://127.0.0.1:80", "unknown scheme 'http'"),
    ("tcp://h:1", "accepted schemes: grpc, frame"),
    ("127.0.0.1:7070", "no scheme"),
    ("frame://127.0.0.1", "no port"),
    ("frame://:7070", "no host"),
    ("frame://h:0", "port '0'"),
    ("frame://h:65536", "port '65536'"),
    ("frame://h:x", "port 'x'"),
    ("grpc://h:1/path", "nothing after the port"),
    ("frame://::1:7070", "brackets"),
])
def test_parse_target_errors(url: str, needle: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_target(url)
    assert needle in str(info.value)


def test_connect_picks_transport() -> None:
    with connect("frame://127.0.0.1:9", inflight=3, timeout=5) as fc:
        assert isinstance(fc, FrameClient)
        assert (fc.inflight, fc.timeout, fc.address) == (3, 5, "127.0.0.1:9")
        assert not fc.connected  # connects lazily
    with connect("grpc://127.0.0.1:9", timeout=7) as gc:
        assert isinstance(gc, GrpcClient)
        assert gc.timeout == 7


def test_connect_unknown_scheme_names_it_and_the_accepted_ones() -> None:
    with pytest.raises(ValueError, match=r"'https'.*grpc, frame"):
        connect("https://127.0.0.1:1")


def test_frame_client_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="inflight"):
        FrameClient("127.0.0.1:1", inflight=0)
    with pytest.raises(ValueError, match="no port"):
        FrameClient("127.0.0.1")


# ---- errors -----------------------------------------------------------------------------------------

def test_xfer_error_parse_and_str() -> None:
    e = XferError.parse('not_found: file "x" not found')
    assert (e.code, e.message, str(e)) == ("not_found", 'file "x" not found', 'not_found: file "x" not found')
    odd = XferError.parse("something odd")
    assert (odd.code, str(odd)) == ("unknown", "unknown: something odd")
    assert XferError.parse("data_loss: crc32 mismatch: a, b").message == "crc32 mismatch: a, b"


# ---- frame client against the real servers' frame transport ------------------------------------------

FRAME_SERVERS = [name for name in selected_servers() if "frame" in SERVERS[name].transports]


@pytest.fixture(scope="module", params=FRAME_SERVERS)
def frame_server(request: pytest.FixtureRequest) -> Iterator[RunningServer]:
    with running_server(request.param, ["--store=mem"]) as s:
        yield s


@pytest.fixture
def addr(frame_server: RunningServer) -> str:
    return frame_server.addr("frame")


def test_echo_and_stat(addr: str) -> None:
    with FrameClient(addr) as c:
        assert c.echo(b"hello") == b"hello"
        assert c.echo(b"") == b""
        st = c.stat("gen:100:42")
        assert (st.name, st.size, st.crc32) == ("gen:100:42", 100, crc32(gen_bytes(100, 42)))
        with pytest.raises(XferError) as info:
            c.stat("missing")
        assert info.value.code == "not_found" and '"missing"' in info.value.message
        assert c.echo(b"still usable") == b"still usable"


def test_call_many_matches_responses_by_seq(addr: str) -> None:
    # Mixed sizes on one pipelined connection: the servers answer in completion order, so small
    # echoes overtake large ones; every result must still land in its own call's place.
    payloads = [bytes([i]) * ((i % 5) * 200_000) for i in range(40)]
    with FrameClient(addr, inflight=8) as c:
        results = c.call_many([("Xfer.Echo", file_transfer_pb2.EchoRequest(payload=p)) for p in payloads])
    assert [r.payload for r in results] == payloads  # type: ignore[union-attr]


def test_call_many_without_raising_returns_errors_in_place(addr: str) -> None:
    with FrameClient(addr) as c:
        results = c.call_many([
            ("Xfer.Echo", file_transfer_pb2.EchoRequest(payload=b"a")),
            ("Xfer.Nope", b""),
            ("Xfer.Stat", file_transfer_pb2.StatRequest(name="nope")),
            ("Xfer.Echo", file_transfer_pb2.EchoRequest(payload=b"b")),
        ], raise_errors=False)
        assert isinstance(results[1], XferError) and results[1].code == "unimplemented"
        assert isinstance(results[2], XferError) and results[2].code == "not_found"
        assert results[0].payload == b"a" and results[3].payload == b"b"  # type: ignore[union-attr]
        with pytest.raises(XferError, match="unimplemented"):
            c.call_many([("Xfer.Echo", b""), ("Xfer.Nope", b"")])
        assert c.echo(b"after") == b"after"


@pytest.mark.parametrize(("size", "chunk", "inflight"), [
    (0, 64 << 10, 8), (1, 64 << 10, 8), ((64 << 10) - 1, 64 << 10, 8), (64 << 10, 64 << 10, 8),
    ((64 << 10) + 1, 64 << 10, 8), (1 << 20, 4096, 16), (3 << 20, 1 << 20, 1),
])
def test_upload_download_round_trip(addr: str, size: int, chunk: int, inflight: int) -> None:
    data = os.urandom(size)
    with FrameClient(addr, inflight=inflight) as c:
        up = c.upload("f.bin", data, chunk_size=chunk)
        assert (up.bytes, up.crc32) == (size, crc32(data))
        assert len(up.chunk_seconds) == -(-size // chunk)
        assert all(s >= 0 for s in up.chunk_seconds)
        down = c.download("f.bin", chunk_size=chunk)
        assert down.data == data and (down.bytes, down.crc32) == (size, crc32(data))
        assert len(down.chunk_seconds) == max(1, -(-size // chunk))
        sink = io.BytesIO()
        streamed = c.download("f.bin", chunk_size=chunk, out=sink)
        assert streamed.data is None and sink.getvalue() == data


def test_upload_from_path_and_memoryview(addr: str, tmp_path: Path) -> None:
    data = gen_bytes(300_001, 5)
    p = tmp_path / "src.bin"
    p.write_bytes(data)
    with FrameClient(addr, inflight=4) as c:
        assert c.upload("p.bin", path=p, chunk_size=65536).crc32 == crc32(data)
        assert c.upload("m.bin", memoryview(data)[1:], chunk_size=65536).bytes == len(data) - 1
        assert c.download("p.bin").data == data and c.download("m.bin").data == data[1:]
        with pytest.raises(ValueError, match="exactly one"):
            c.upload("x", b"a", path=p)


def test_download_gen_name_verifies(addr: str) -> None:
    with FrameClient(addr, inflight=4) as c:
        r = c.download("gen:1000003:9", chunk_size=65536)
    assert r.data == gen_bytes(1000003, 9)


class _ReplaceOnFirstWrite(io.BytesIO):
    """A download sink that uploads a new version of the file as soon as the first chunk arrives,
    before the client asks for the rest: a deterministic mid-download change on a real server."""

    def __init__(self, addr: str, name: str, new: bytes) -> None:
        super().__init__()
        self._addr, self._name, self._new = addr, name, new

    def write(self, b: bytes) -> int:  # type: ignore[override]
        if self._new:
            with FrameClient(self._addr) as other:
                other.upload(self._name, self._new, chunk_size=65536)
            self._new = b""
        return super().write(b)


def test_download_detects_a_version_change(addr: str) -> None:
    with FrameClient(addr) as c:
        c.upload("flip.bin", gen_bytes(1 << 20, 1), chunk_size=65536)
        sink = _ReplaceOnFirstWrite(addr, "flip.bin", gen_bytes(1 << 20, 2))
        with pytest.raises(XferError) as info:
            c.download("flip.bin", chunk_size=65536, out=sink)
        assert info.value.code == "aborted" and "changed during download" in info.value.message
        assert c.echo(b"ok") == b"ok"


def test_seq0_fails_every_call_in_flight() -> None:
    # A frame over the server's --max-frame is a connection error: the server answers seq 0 and closes.
    for name in FRAME_SERVERS:
        with running_server(name, ["--store=mem", "--max-frame=65536", "--max-chunk=16384"]) as s, \
                FrameClient(s.addr("frame"), inflight=4) as c:
            calls = [("Xfer.Echo", file_transfer_pb2.EchoRequest(payload=b"x"))] * 3
            with pytest.raises(XferError) as info:
                c.call_many([*calls, ("Xfer.Echo", file_transfer_pb2.EchoRequest(payload=b"y" * 70_000))])
            assert str(info.value).startswith("resource_exhausted: frame length"), name
            assert "exceeds limit 65536" in str(info.value), name
            assert not c.connected, name


def test_connection_refused_is_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connect is refused
        with pytest.raises(XferError) as info:
            FrameClient(f"127.0.0.1:{port}", timeout=5).echo(b"x")
    assert info.value.code == "unavailable" and str(port) in info.value.message


def test_silent_server_is_deadline_exceeded() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:  # accepts (backlog), never answers
        addr = f"127.0.0.1:{listener.getsockname()[1]}"
        with FrameClient(addr, timeout=0.3) as c, pytest.raises(XferError) as info:
            c.echo(b"x")
    assert info.value.code == "deadline_exceeded"


def test_raw_bodies_and_parts(addr: str) -> None:
    body = file_transfer_pb2.EchoRequest(payload=b"split").SerializeToString()
    with FrameClient(addr) as c:
        r = c.call("Xfer.Echo", [body[:3], memoryview(body)[3:]], file_transfer_pb2.EchoResponse)
        assert r.payload == b"split"
        with pytest.raises(XferError, match="invalid_argument: malformed"):
            c.call("Xfer.UploadBegin", b"\xff\xff\xff", frame_pb2.UploadBeginResponse)


def test_frame_client_under_gevent(addr: str) -> None:
    """Locust monkey-patches with gevent: the same client must work there, with concurrent users."""
    script = textwrap.dedent(f"""
        from gevent import monkey; monkey.patch_all()
        import gevent, os
        from py_client import FrameClient
        def user(i):
            with FrameClient({addr!r}, inflight=4, timeout=10) as c:
                data = os.urandom(200_000 + i)
                c.upload(f"g{{i}}", data, chunk_size=16384)
                assert c.download(f"g{{i}}", chunk_size=16384).data == data
                assert c.echo(b"e" * i) == b"e" * i
        jobs = [gevent.spawn(user, i) for i in range(6)]
        gevent.joinall(jobs, timeout=60, raise_error=True)
        assert all(j.successful() for j in jobs)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
