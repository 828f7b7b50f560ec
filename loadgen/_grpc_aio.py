"""The gRPC users' calls on grpc.aio: Echo, Meta, Upload, Download, each timed start to end on the event loop.

The same calls and checks as py_client.GrpcClient (PROTOCOL.md "gRPC"), awaited on loadgen._aioloop's loop
instead of blocking a thread. Every coroutine here runs on the loop thread and touches nothing of Locust's.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio

from loadgen._tls import ProcessTLS
from py_client.errors import XferError
from py_client.grpc_client import MAX_MESSAGE
from py_client.grpc_download import DownloadStream
from py_client.results import TransferResult
from xfer.v1 import file_transfer_pb2 as pb
from xfer.v1 import file_transfer_pb2_grpc as pb_grpc


@dataclass
class Outcome:
    """One call as it ended: its start and end (time.perf_counter, the same clock in every thread), what it
    returned (echoed bytes or a TransferResult) or the error it ended with."""

    start: float
    end: float
    value: Any = None
    error: XferError | None = None


class _ChunkCache:
    """Upload chunk messages, serialized once per process. Every upload sends a prefix of the process's one
    content buffer, so the chunk at an offset is the same bytes in every upload that reaches that far, and the
    CRC-32 of the content up to its end is the same too: building each message (a copy into `bytes`, the
    protobuf encoding, the CRC) once instead of per call is what keeps a Locust process near ghz on 1 MiB
    chunks. Bounded: beyond MAX_BYTES nothing more is kept. Used only on the loop thread."""

    MAX_BYTES = 512 << 20

    def __init__(self) -> None:
        self._buffer: object = None  # the content buffer the entries are slices of
        self._entries: dict[tuple[int, int], tuple[bytes, int]] = {}  # (offset, length) → (message, CRC-32 of
        self._bytes = 0                                                # the content up to the chunk's end)

    def get(self, data: memoryview, off: int, length: int, crc_before: int) -> tuple[bytes, int]:
        """The serialized UploadRequest of data[off:off+length] and the CRC-32 of data[:off+length]
        (crc_before is that of data[:off])."""
        if data.obj is not self._buffer:  # a new content buffer: nothing cached is a slice of it
            self._buffer, self._entries, self._bytes = data.obj, {}, 0
        hit = self._entries.get((off, length))
        if hit is not None:
            return hit
        chunk = data[off:off + length]
        built = pb.UploadRequest(chunk=bytes(chunk)).SerializeToString(), zlib.crc32(chunk, crc_before)
        if self._bytes + length <= self.MAX_BYTES:
            self._entries[(off, length)] = built
            self._bytes += length
        return built


_CHUNKS = _ChunkCache()


class AioClient:
    """One grpc.aio channel to `address`, over TLS with `tls` (--xfer-tls-ca). Make it, call it and close it on
    the loop thread."""

    def __init__(self, address: str, timeout: float, options: list[tuple[str, int | str]] | None = None,
                 tls: ProcessTLS | None = None) -> None:
        self.timeout = timeout
        opts: list[tuple[str, Any]] = [
            ("grpc.max_send_message_length", MAX_MESSAGE), ("grpc.max_receive_message_length", MAX_MESSAGE),
            *(options or [])]
        self._channel = grpc.aio.insecure_channel(address, options=opts) if tls is None else tls.aio_channel(address, opts)
        self._stub = pb_grpc.FileTransferStub(self._channel)
        # Upload takes requests already serialized (_ChunkCache); the stub's Upload would serialize each again.
        self._upload: grpc.aio.StreamUnaryMultiCallable[bytes, pb.UploadResponse] = self._channel.stream_unary(
            "/xfer.v1.FileTransfer/Upload", request_serializer=None, response_deserializer=pb.UploadResponse.FromString)

    @property
    def channel(self) -> grpc.aio.Channel:
        """The channel itself, for calls of methods this client has no stub for (loadgen._call_user)."""
        return self._channel

    async def close(self) -> None:
        await self._channel.close()

    async def timed(self, start: float | None, call: Any) -> Outcome:
        """Awaits call (a coroutine); start None = now (closed loop), else the intended start (open loop)."""
        t0 = time.perf_counter() if start is None else start
        try:
            value = await call
        except grpc.RpcError as e:
            return Outcome(t0, time.perf_counter(), error=XferError.from_grpc(e))
        except XferError as e:
            return Outcome(t0, time.perf_counter(), error=e)
        except (ValueError, OSError) as e:  # a client-side failure, reported as such
            return Outcome(t0, time.perf_counter(), error=XferError("internal", f"client: {e!r}"))
        return Outcome(t0, time.perf_counter(), value)

    async def echo(self, payload: bytes) -> bytes:
        resp = await self._stub.Echo(pb.EchoRequest(payload=payload), timeout=self.timeout)
        echoed: bytes = resp.payload
        return echoed

    async def meta(self, request: pb.MetaRequest) -> pb.MetaResponse:
        resp: pb.MetaResponse = await self._stub.Meta(request, timeout=self.timeout)
        return resp

    async def upload(self, name: str, data: memoryview, chunk_size: int) -> TransferResult:
        size = len(data)
        chunk_seconds: list[float] = []
        crc = 0

        async def requests() -> AsyncIterator[bytes]:
            nonlocal crc
            yield pb.UploadRequest(header=pb.UploadHeader(name=name, size=size, chunk_size=chunk_size)).SerializeToString()
            for off in range(0, size, chunk_size):
                message, crc = _CHUNKS.get(data, off, min(chunk_size, size - off), crc)
                t = time.perf_counter()
                yield message  # resumed once the message is handed to the stream
                chunk_seconds.append(time.perf_counter() - t)
            yield pb.UploadRequest(trailer=pb.UploadTrailer(crc32=crc)).SerializeToString()

        t0 = time.perf_counter()
        resp = await self._upload(requests(), timeout=self.timeout)
        seconds = time.perf_counter() - t0
        if resp.size != size or resp.crc32 != crc:
            raise XferError("data_loss", f"upload {name!r}: server committed size {resp.size} crc32 "
                                         f"0x{resp.crc32:08x}, client sent size {size} crc32 0x{crc:08x}")
        return TransferResult(size, crc, seconds, None, chunk_seconds)

    async def download(self, name: str, chunk_size: int, verify: bool) -> TransferResult:
        """Reads the stream, checking order (header, chunks, trailer), size and CRC-32; keeps no bytes."""
        t0 = time.perf_counter()
        stream = DownloadStream(name, verify)
        call = self._stub.Download(pb.DownloadRequest(name=name, chunk_size=chunk_size), timeout=self.timeout)
        try:
            async for msg in call:
                stream.take(msg)
        except XferError:
            call.cancel()
            raise
        size, crc = stream.finish()
        return TransferResult(size, crc, time.perf_counter() - t0, None, stream.chunk_seconds)
