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


class AioClient:
    """One grpc.aio channel to `address`. Make it, call it and close it on the loop thread."""

    def __init__(self, address: str, timeout: float) -> None:
        self.timeout = timeout
        self._channel = grpc.aio.insecure_channel(address, options=[
            ("grpc.max_send_message_length", MAX_MESSAGE), ("grpc.max_receive_message_length", MAX_MESSAGE)])
        self._stub = pb_grpc.FileTransferStub(self._channel)

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

        async def requests() -> AsyncIterator[pb.UploadRequest]:
            nonlocal crc
            yield pb.UploadRequest(header=pb.UploadHeader(name=name, size=size, chunk_size=chunk_size))
            for off in range(0, size, chunk_size):
                chunk = data[off:off + chunk_size]
                crc = zlib.crc32(chunk, crc)
                t = time.perf_counter()
                yield pb.UploadRequest(chunk=bytes(chunk))  # resumed once the message is handed to the stream
                chunk_seconds.append(time.perf_counter() - t)
            yield pb.UploadRequest(trailer=pb.UploadTrailer(crc32=crc))

        t0 = time.perf_counter()
        resp = await self._stub.Upload(requests(), timeout=self.timeout)
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
