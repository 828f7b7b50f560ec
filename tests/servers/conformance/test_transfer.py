"""The operations every server and transport must get right (PROTOCOL.md), checked end to end."""

from __future__ import annotations

import io
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from py_client import FrameClient, GrpcClient, XferError, connect
from py_client.content import crc32, gen_bytes, gen_crc32

Client = GrpcClient | FrameClient
CHUNK = 64 << 10


def unique(prefix: str, pair: tuple[str, str]) -> str:
    return f"{prefix}-{pair[0]}-{pair[1]}.bin"


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 17],
                         ids=["0", "1", "chunk-1", "chunk", "chunk+1", "3chunks+17"])
def test_round_trip_edge_sizes(client: Client, pair: tuple[str, str], size: int) -> None:
    data = os.urandom(size)
    name = unique(f"edge{size}", pair)
    up = client.upload(name, data, chunk_size=CHUNK)
    assert (up.bytes, up.crc32) == (size, crc32(data))
    assert len(up.chunk_seconds) == -(-size // CHUNK)
    down = client.download(name, chunk_size=CHUNK)
    assert (down.bytes, down.crc32) == (size, crc32(data))
    assert down.data == data
    st = client.stat(name)
    assert (st.name, st.size, st.crc32) == (name, size, crc32(data))


def test_round_trip_10_mib(client: Client, pair: tuple[str, str]) -> None:
    data = gen_bytes(10 << 20, 77)
    name = unique("big", pair)
    up = client.upload(name, data)  # default 1 MiB chunks
    assert (up.bytes, up.crc32) == (len(data), crc32(data))
    assert len(up.chunk_seconds) == 10
    down = client.download(name)
    assert down.data == data and down.crc32 == crc32(data)
    # A chunk size that does not divide the size, and the largest chunk the servers take by default.
    assert client.download(name, chunk_size=3_000_001).data == data
    assert client.download(name, chunk_size=4 << 20).data == data


def test_download_into_a_stream(client: Client, pair: tuple[str, str]) -> None:
    data = os.urandom(5 * CHUNK + 3)
    name = unique("stream", pair)
    client.upload(name, data, chunk_size=CHUNK)
    sink = io.BytesIO()
    r = client.download(name, chunk_size=CHUNK, out=sink)
    assert r.data is None and sink.getvalue() == data and r.crc32 == crc32(data)


@pytest.mark.parametrize(("size", "seed"), [(0, 0), (1, 0), (100, 42), (65536, 7), (3000001, 9),
                                            (10 << 20, 2**64 - 1)])
def test_gen_files(client: Client, size: int, seed: int) -> None:
    name = f"gen:{size}:{seed}"
    r = client.download(name, chunk_size=1 << 20)
    assert r.bytes == size and r.crc32 == gen_crc32(size, seed)
    assert r.data == gen_bytes(size, seed)
    st = client.stat(name)
    assert (st.size, st.crc32) == (size, gen_crc32(size, seed))


def test_gen_file_small_chunks(client: Client) -> None:
    r = client.download("gen:1000:3", chunk_size=7)
    assert r.data == gen_bytes(1000, 3)


def test_upload_from_path(client: Client, pair: tuple[str, str], tmp_path: Path) -> None:
    data = gen_bytes(1_500_000, 11)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    name = unique("path", pair)
    up = client.upload(name, path=src, chunk_size=CHUNK)
    assert (up.bytes, up.crc32) == (len(data), crc32(data))
    assert client.download(name).data == data


def test_upload_replaces_a_file_whole(client: Client, pair: tuple[str, str]) -> None:
    name = unique("replace", pair)
    first, second = os.urandom(3 * CHUNK), os.urandom(CHUNK + 5)
    client.upload(name, first, chunk_size=CHUNK)
    client.upload(name, second, chunk_size=CHUNK)
    assert client.download(name, chunk_size=CHUNK).data == second
    assert client.stat(name).size == len(second)


def test_two_concurrent_uploads_of_one_name(target: str, pair: tuple[str, str]) -> None:
    """The result is one complete upload, never a mix."""
    name = unique("race", pair)
    a, b = gen_bytes(2 << 20, 1), gen_bytes(2 << 20, 2)
    barrier = threading.Barrier(2)

    def up(data: bytes) -> int:
        with connect(target, inflight=4) as c:
            barrier.wait(timeout=30)
            return c.upload(name, data, chunk_size=16 << 10).crc32

    for _ in range(3):
        with ThreadPoolExecutor(2) as ex:
            crcs = list(ex.map(up, [a, b]))
        assert crcs == [crc32(a), crc32(b)]
        with connect(target) as c:
            got = c.download(name).data
            st = c.stat(name)
        assert got in (a, b), "the file mixes the two uploads"
        assert st.crc32 == crc32(got)


def test_missing_file_is_not_found(client: Client) -> None:
    with pytest.raises(XferError) as info:
        client.download("no-such-file.bin")
    assert info.value.code == "not_found"
    assert '"no-such-file.bin"' in info.value.message
    with pytest.raises(XferError) as info:
        client.stat("no-such-file.bin")
    assert info.value.code == "not_found" and '"no-such-file.bin"' in info.value.message
    assert str(info.value).startswith("not_found: ")


@pytest.mark.parametrize("size", [0, 1, 1 << 20, 4 << 20], ids=["0B", "1B", "1MiB", "4MiB"])
def test_echo(client: Client, size: int) -> None:
    payload = os.urandom(size)
    assert client.echo(payload) == payload


def test_many_small_calls_on_one_client(client: Client) -> None:
    for i in range(200):
        assert client.echo(i.to_bytes(2, "big")) == i.to_bytes(2, "big")


def test_stat(client: Client, pair: tuple[str, str]) -> None:
    name = unique("stat", pair)
    data = b"123456789"
    client.upload(name, data)
    st = client.stat(name)
    assert (st.name, st.size, st.crc32) == (name, 9, 0xCBF43926)


def test_clients_in_parallel(target: str, pair: tuple[str, str]) -> None:
    def work(i: int) -> bool:
        data = gen_bytes(300_000 + i, 100 + i)
        with connect(target, inflight=8) as c:
            name = unique(f"par{i}", pair)
            c.upload(name, data, chunk_size=32 << 10)
            return c.download(name, chunk_size=32 << 10).data == data and c.echo(b"x" * i) == b"x" * i

    with ThreadPoolExecutor(8) as ex:
        assert all(ex.map(work, range(16)))
