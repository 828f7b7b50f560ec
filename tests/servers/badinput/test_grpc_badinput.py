"""Bad input over gRPC: the same checks as frame, as gRPC status codes (PROTOCOL.md "gRPC")."""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterable, Iterator

import grpc
import pytest

from py_client import GrpcClient, XferError
from tests.servers.badinput.conftest import SENTINEL, SENTINEL_CRC, SENTINEL_DATA
from tests.support.servers import RunningServer
from xfer.v1 import file_transfer_pb2 as pb
from xfer.v1 import file_transfer_pb2_grpc as pb_grpc

MAX_FRAME = 8 << 20
MAX_CHUNK = 4 << 20
MAX_FILE = 1 << 30
TIMEOUT_S = 30.0


@pytest.fixture
def stub(grpc_server: RunningServer) -> Iterator[pb_grpc.FileTransferStub]:
    ch = grpc.insecure_channel(grpc_server.addr("grpc"), options=[
        ("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)])
    yield pb_grpc.FileTransferStub(ch)
    ch.close()


def header(name: str, size: int, chunk: int) -> pb.UploadRequest:
    return pb.UploadRequest(header=pb.UploadHeader(name=name, size=size, chunk_size=chunk))


def chunk(data: bytes) -> pb.UploadRequest:
    return pb.UploadRequest(chunk=data)


def trailer(crc: int) -> pb.UploadRequest:
    return pb.UploadRequest(trailer=pb.UploadTrailer(crc32=crc))


def upload_error(stub: pb_grpc.FileTransferStub, msgs: Iterable[pb.UploadRequest]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        stub.Upload(iter(list(msgs)), timeout=TIMEOUT_S)
    return info.value


def assert_status(err: grpc.RpcError, code: grpc.StatusCode, *subjects: str) -> None:
    assert err.code() == code, f"want {code}, got {err.code()}: {err.details()}"  # type: ignore[attr-defined]
    details = err.details() or ""  # type: ignore[attr-defined]
    for s in subjects:
        assert s in details, f"{s!r} not named in {details!r}"


def assert_not_visible(stub: pb_grpc.FileTransferStub, name: str) -> None:
    with pytest.raises(grpc.RpcError) as info:
        stub.Stat(pb.StatRequest(name=name), timeout=TIMEOUT_S)
    assert_status(info.value, grpc.StatusCode.NOT_FOUND)


BAD_NAMES = {
    "slash": ("a/b", '"a/b"'), "backslash": ("a\\b", "name"), "dotdot": ("..", '".."'), "dot": (".", '"."'),
    "nul": ("a\x00b", "name"), "empty": ("", "name"), "too-long": ("x" * 256, "255"),
    "gen": ("gen:1:2", "reserved"),
}


@pytest.mark.parametrize("case", list(BAD_NAMES), ids=list(BAD_NAMES))
def test_bad_names(stub: pb_grpc.FileTransferStub, case: str) -> None:
    name, subject = BAD_NAMES[case]
    err = upload_error(stub, [header(name, 1, 1), chunk(b"x"), trailer(zlib.crc32(b"x"))])
    assert_status(err, grpc.StatusCode.INVALID_ARGUMENT, subject)


def test_missing_header(stub: pb_grpc.FileTransferStub) -> None:
    err = upload_error(stub, [chunk(b"abc"), trailer(zlib.crc32(b"abc"))])
    assert_status(err, grpc.StatusCode.INVALID_ARGUMENT, "UploadHeader")


def test_empty_stream(stub: pb_grpc.FileTransferStub) -> None:
    err = upload_error(stub, [])
    assert_status(err, grpc.StatusCode.INVALID_ARGUMENT)


def test_second_header(stub: pb_grpc.FileTransferStub) -> None:
    err = upload_error(stub, [header("twice.bin", 3, 3), header("twice.bin", 3, 3), chunk(b"abc"),
                              trailer(zlib.crc32(b"abc"))])
    assert_status(err, grpc.StatusCode.INVALID_ARGUMENT, "UploadHeader")
    assert_not_visible(stub, "twice.bin")


def test_chunk_past_declared_size(stub: pb_grpc.FileTransferStub) -> None:
    err = upload_error(stub, [header("past.bin", 1500, 1024), chunk(b"a" * 1024), chunk(b"b" * 1024), trailer(0)])
    assert_status(err, grpc.StatusCode.OUT_OF_RANGE)
    assert_not_visible(stub, "past.bin")


def test_extra_chunk_after_the_size(stub: pb_grpc.FileTransferStub) -> None:
    err = upload_error(stub, [header("extra.bin", 64, 64), chunk(b"a" * 64), chunk(b"b"), trailer(0)])
    assert_status(err, grpc.StatusCode.OUT_OF_RANGE)
    assert_not_visible(stub, "extra.bin")


def test_chunk_of_the_wrong_length(stub: pb_grpc.FileTransferStub) -> None:
    err = upload_error(stub, [header("short.bin", 1500, 1024), chunk(b"a" * 10), chunk(b"b" * 1490), trailer(0)])
    assert_status(err, grpc.StatusCode.INVALID_ARGUMENT, "10")
    assert_not_visible(stub, "short.bin")


def test_wrong_crc(stub: pb_grpc.FileTransferStub) -> None:
    data = b"0123456789"
    err = upload_error(stub, [header("badcrc.bin", 10, 10), chunk(data), trailer(0xDEADBEEF)])
    assert_status(err, grpc.StatusCode.DATA_LOSS, "0xdeadbeef", f"0x{zlib.crc32(data):08x}")
    assert_not_visible(stub, "badcrc.bin")


def test_wrong_crc_keeps_the_old_file(stub: pb_grpc.FileTransferStub) -> None:
    err = upload_error(stub, [header(SENTINEL, 3, 3), chunk(b"abc"), trailer(1)])
    assert_status(err, grpc.StatusCode.DATA_LOSS)
    st = stub.Stat(pb.StatRequest(name=SENTINEL), timeout=TIMEOUT_S)
    assert (st.size, st.crc32) == (len(SENTINEL_DATA), SENTINEL_CRC)


def test_incomplete_upload(stub: pb_grpc.FileTransferStub) -> None:
    err = upload_error(stub, [header("incomplete.bin", 2048, 1024), chunk(b"a" * 1024), trailer(0)])
    assert_status(err, grpc.StatusCode.FAILED_PRECONDITION, "1024", "2048")
    assert_not_visible(stub, "incomplete.bin")


def test_stream_without_trailer_leaves_nothing(stub: pb_grpc.FileTransferStub) -> None:
    with pytest.raises(grpc.RpcError) as info:
        stub.Upload(iter([header("notrailer.bin", 3, 3), chunk(b"abc")]), timeout=TIMEOUT_S)
    assert info.value.code() != grpc.StatusCode.OK  # type: ignore[attr-defined]
    assert_not_visible(stub, "notrailer.bin")


def test_cancelled_upload_leaves_nothing(stub: pb_grpc.FileTransferStub) -> None:
    release = threading.Event()

    def msgs() -> Iterator[pb.UploadRequest]:
        yield header("cancelled.bin", 2048, 1024)  # a valid upload (--min-chunk), cut by the cancel alone
        yield chunk(b"a" * 1024)
        release.wait(TIMEOUT_S)

    fut = stub.Upload.future(msgs(), timeout=TIMEOUT_S)
    fut.cancel()
    release.set()
    with pytest.raises(grpc.FutureCancelledError):
        fut.result(timeout=TIMEOUT_S)
    assert_not_visible(stub, "cancelled.bin")


@pytest.mark.parametrize(("size", "chunk_size", "subject"), [
    (MAX_FILE + 1, 65536, str(MAX_FILE + 1)), (10, 0, "chunk"), (10, MAX_CHUNK + 1, str(MAX_CHUNK + 1))])
def test_bad_upload_header(stub: pb_grpc.FileTransferStub, size: int, chunk_size: int, subject: str) -> None:
    err = upload_error(stub, [header("hdr.bin", size, chunk_size), chunk(b"x" * 10), trailer(0)])
    assert_status(err, grpc.StatusCode.INVALID_ARGUMENT, subject)


def test_oversize_message(stub: pb_grpc.FileTransferStub) -> None:
    with pytest.raises(grpc.RpcError) as info:
        stub.Echo(pb.EchoRequest(payload=b"\0" * (MAX_FRAME + (1 << 20))), timeout=TIMEOUT_S)
    assert_status(info.value, grpc.StatusCode.RESOURCE_EXHAUSTED)


def test_echo_over_max_chunk(stub: pb_grpc.FileTransferStub) -> None:
    with pytest.raises(grpc.RpcError) as info:
        stub.Echo(pb.EchoRequest(payload=b"\0" * (MAX_CHUNK + 1)), timeout=TIMEOUT_S)
    assert_status(info.value, grpc.StatusCode.INVALID_ARGUMENT, str(MAX_CHUNK + 1))


def test_unknown_file(stub: pb_grpc.FileTransferStub) -> None:
    with pytest.raises(grpc.RpcError) as info:
        list(stub.Download(pb.DownloadRequest(name="nope.bin"), timeout=TIMEOUT_S))
    assert_status(info.value, grpc.StatusCode.NOT_FOUND, '"nope.bin"')
    with pytest.raises(grpc.RpcError) as info:
        stub.Stat(pb.StatRequest(name="nope.bin"), timeout=TIMEOUT_S)
    assert_status(info.value, grpc.StatusCode.NOT_FOUND, '"nope.bin"')


def test_download_chunk_over_max(stub: pb_grpc.FileTransferStub) -> None:
    with pytest.raises(grpc.RpcError) as info:
        list(stub.Download(pb.DownloadRequest(name=SENTINEL, chunk_size=MAX_CHUNK + 1), timeout=TIMEOUT_S))
    assert_status(info.value, grpc.StatusCode.INVALID_ARGUMENT, str(MAX_CHUNK + 1))


@pytest.mark.parametrize("name", ["a/b", "..", "gen:01:2", "gen:1", f"gen:{MAX_FILE + 1}:0"])
def test_bad_download_names(stub: pb_grpc.FileTransferStub, name: str) -> None:
    with pytest.raises(grpc.RpcError) as info:
        list(stub.Download(pb.DownloadRequest(name=name), timeout=TIMEOUT_S))
    assert_status(info.value, grpc.StatusCode.INVALID_ARGUMENT)


def test_client_maps_status_codes(grpc_server: RunningServer) -> None:
    with GrpcClient(grpc_server.addr("grpc")) as c:
        with pytest.raises(XferError) as info:
            c.upload("a/b", b"x")
        assert info.value.code == "invalid_argument" and '"a/b"' in info.value.message
        with pytest.raises(XferError) as info:
            c.stat("nope.bin")
        assert str(info.value).startswith('not_found: ') and '"nope.bin"' in str(info.value)


# ---- Meta (PROTOCOL.md "Meta") ------------------------------------------------------------------------

@pytest.mark.parametrize(("entries", "named"), [
    ([(f"k{i}", "v") for i in range(1025)], "1025 entries exceed limit 1024 (--max-meta-entries)"),
    ([("k" * 257, "v")], "key length 257 is outside 1..256"),
    ([("k", "v" * 4097)], "value length 4097 exceeds limit 4096"),
    ([("a", "1"), ("a", "1")], 'duplicate key "a"'),
    ([("a", "v\0")], "entry 0 value contains NUL"),
], ids=["over-limit", "long-key", "long-value", "duplicate", "nul-value"])
def test_meta_refusals(stub: pb_grpc.FileTransferStub, entries: list[tuple[str, str]], named: str) -> None:
    req = pb.MetaRequest(entries=[pb.MetaEntry(key=k, value=v) for k, v in entries])
    with pytest.raises(grpc.RpcError) as info:
        stub.Meta(req, timeout=TIMEOUT_S)
    assert_status(info.value, grpc.StatusCode.INVALID_ARGUMENT, named)
