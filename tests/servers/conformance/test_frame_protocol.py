"""Frame-only behaviour: pipelining with out-of-order answers, Read by offset, UploadAbort."""

from __future__ import annotations

import os

import pytest

from py_client import FrameClient, XferError
from py_client.content import crc32, gen_bytes
from tests.support.pool import ServerPool
from tests.support.servers import SERVERS, selected_servers
from xfer.v1 import file_transfer_pb2 as ft
from xfer.v1 import frame_pb2 as fr

FRAME_SERVERS = [s for s in selected_servers() if "frame" in SERVERS[s].transports]


@pytest.fixture(params=FRAME_SERVERS)
def fc(request: pytest.FixtureRequest, pool: ServerPool) -> FrameClient:
    s = pool.get(request.param)
    c = FrameClient(s.addr("frame"), inflight=32, timeout=60)
    request.addfinalizer(c.close)
    return c


def test_pipelined_calls_all_answered(fc: FrameClient) -> None:
    payloads = [os.urandom(n) for n in (0, 1, 10, 1000, 100_000, 1 << 20) * 10]
    results = fc.call_many([("Xfer.Echo", ft.EchoRequest(payload=p)) for p in payloads])
    assert [r.payload for r in results] == payloads  # type: ignore[union-attr]


def test_response_echoes_method_and_seq(fc: FrameClient) -> None:
    from tests.support.raw_frame import RawConn

    with RawConn(fc.address) as raw:
        seqs = [raw.request("Xfer.Echo", ft.EchoRequest(payload=b"%d" % i), seq=1000 + i) for i in range(20)]
        seen = {}
        for _ in seqs:
            r = raw.response()
            assert r.method == "Xfer.Echo" and not r.error
            seen[r.seq] = r.parse(ft.EchoResponse).payload  # type: ignore[attr-defined]
        assert seen == {1000 + i: b"%d" % i for i in range(20)}


def test_read_by_offset(fc: FrameClient) -> None:
    name = "gen:1000:5"
    data = gen_bytes(1000, 5)
    r = fc.call("Xfer.Read", fr.ReadRequest(name=name, offset=100, length=50), fr.ReadResponse)
    assert (r.data, r.size, r.crc32) == (data[100:150], 1000, crc32(data))
    tail = fc.call("Xfer.Read", fr.ReadRequest(name=name, offset=990, length=50), fr.ReadResponse)
    assert tail.data == data[990:]
    end = fc.call("Xfer.Read", fr.ReadRequest(name=name, offset=1000, length=50), fr.ReadResponse)
    assert end.data == b"" and end.size == 1000


def test_chunks_in_any_order_and_received_count(fc: FrameClient) -> None:
    cs = 1024  # the smallest chunk --min-chunk allows
    data = os.urandom(5 * cs + 1)
    b = fc.call("Xfer.UploadBegin",
                fr.UploadBeginRequest(name="anyorder.bin", size=len(data), chunk_size=cs),
                fr.UploadBeginResponse)
    received = []
    for off in (5 * cs, 2 * cs, 0, 4 * cs, cs, 3 * cs):
        r = fc.call("Xfer.UploadChunk",
                    fr.UploadChunkRequest(upload_id=b.upload_id, offset=off, data=data[off : off + cs]),
                    fr.UploadChunkResponse)
        received.append(r.received)
    assert received == [1 + n * cs for n in range(6)]
    c = fc.call("Xfer.UploadCommit", fr.UploadCommitRequest(upload_id=b.upload_id, crc32=crc32(data)),
                fr.UploadCommitResponse)
    assert (c.size, c.crc32) == (len(data), crc32(data))
    assert fc.download("anyorder.bin", chunk_size=999).data == data


def test_abort_discards(fc: FrameClient) -> None:
    cs = 1024
    b = fc.call("Xfer.UploadBegin", fr.UploadBeginRequest(name="aborted.bin", size=2 * cs, chunk_size=cs),
                fr.UploadBeginResponse)
    fc.call("Xfer.UploadChunk", fr.UploadChunkRequest(upload_id=b.upload_id, offset=0, data=b"1" * cs),
            fr.UploadChunkResponse)
    fc.call("Xfer.UploadAbort", fr.UploadAbortRequest(upload_id=b.upload_id), fr.UploadAbortResponse)
    with pytest.raises(XferError) as info:
        fc.call("Xfer.UploadChunk", fr.UploadChunkRequest(upload_id=b.upload_id, offset=cs, data=b"2" * cs),
                fr.UploadChunkResponse)
    assert info.value.code == "not_found" and str(b.upload_id) in info.value.message
    with pytest.raises(XferError) as info:
        fc.stat("aborted.bin")
    assert info.value.code == "not_found"


def test_later_commit_wins_whole(fc: FrameClient) -> None:
    """Two uploads of one name, chunks interleaved on the wire: the later commit wins."""
    cs = 1024
    a, b = os.urandom(4 * cs), os.urandom(4 * cs)
    begin = fr.UploadBeginRequest(name="interleaved.bin", size=4 * cs, chunk_size=cs)
    ids = [fc.call("Xfer.UploadBegin", begin, fr.UploadBeginResponse).upload_id for _ in range(2)]
    calls = []
    for off in range(0, 4 * cs, cs):
        for uid, data in zip(ids, (a, b), strict=True):
            calls.append(("Xfer.UploadChunk", fr.UploadChunkRequest(upload_id=uid, offset=off,
                                                                    data=data[off : off + cs])))
    fc.call_many(calls)
    fc.call("Xfer.UploadCommit", fr.UploadCommitRequest(upload_id=ids[1], crc32=crc32(b)))
    assert fc.download("interleaved.bin").data == b
    fc.call("Xfer.UploadCommit", fr.UploadCommitRequest(upload_id=ids[0], crc32=crc32(a)))
    assert fc.download("interleaved.bin").data == a
