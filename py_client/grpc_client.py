"""GrpcClient: `xfer.v1.FileTransfer` over grpcio (PROTOCOL.md "gRPC")."""

from __future__ import annotations

import os
import time
import zlib
from collections.abc import Iterator
from typing import BinaryIO

import grpc

from py_client import meta
from py_client._source import Buffer, UploadSource
from py_client.errors import XferError
from py_client.grpc_download import DownloadStream
from py_client.meta import Entries
from py_client.results import StatResult, TransferResult
from py_client.target import split_host_port
from py_client.tls import TLSOptions
from xfer.v1 import file_transfer_pb2 as pb
from xfer.v1 import file_transfer_pb2_grpc as pb_grpc

MAX_MESSAGE = 8 << 20  # 4 MiB chunks plus overhead, with room to spare
DEFAULT_DOWNLOAD_CHUNK = 1 << 20


class GrpcClient:
    """Client for `grpc://host:port`; `address` is `host:port`. Safe to share between threads.

    With `tls`, the channel is TLS (PROTOCOL.md "TLS"); a call that fails because the handshake did raises
    `unavailable` saying why (learned from one handshake of Python's own, since grpcio does not tell).
    """

    def __init__(self, address: str, *, timeout: float = 60.0,
                 options: list[tuple[str, int | str]] | None = None, tls: TLSOptions | None = None) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout {timeout} must be positive")
        self.address = address
        self.timeout = timeout
        opts: list[tuple[str, object]] = [
            ("grpc.max_send_message_length", MAX_MESSAGE),
            ("grpc.max_receive_message_length", MAX_MESSAGE),
            *(options or []),
        ]
        self.tls = tls
        self._channel = tls.grpc_channel(address, opts) if tls else grpc.insecure_channel(address, options=opts)
        self._stub = pb_grpc.FileTransferStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> GrpcClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _error(self, err: grpc.RpcError) -> XferError:
        """The call's error; over TLS, an unavailable server whose handshake fails says why."""
        xe = XferError.from_grpc(err)
        if self.tls is None or xe.code != "unavailable":
            return xe
        host, port = split_host_port(self.address)
        why = self.tls.probe(host, port, min(self.timeout, 10.0))
        return xe if why is None else XferError("unavailable", f"TLS handshake with {self.address} failed: {why}")

    @property
    def stub(self) -> pb_grpc.FileTransferStub:
        """The raw stub, for tests that send what the client never would."""
        return self._stub

    def echo(self, payload: bytes) -> bytes:
        try:
            resp = self._stub.Echo(pb.EchoRequest(payload=payload), timeout=self.timeout)
        except grpc.RpcError as e:
            raise self._error(e) from None
        echoed: bytes = resp.payload
        return echoed

    def stat(self, name: str) -> StatResult:
        try:
            resp = self._stub.Stat(pb.StatRequest(name=name), timeout=self.timeout)
        except grpc.RpcError as e:
            raise self._error(e) from None
        return StatResult(resp.name, resp.size, resp.crc32)

    def meta(self, entries: Entries | meta.Prepared, *, check: bool = True) -> list[tuple[str, str]]:
        """FileTransfer.Meta: the server's answer (entries sorted by key), checked against ours and its digest
        unless check=False (a load generator's --xfer-verify off)."""
        try:
            req = entries.request if isinstance(entries, meta.Prepared) else meta.request(entries)
            resp = self._stub.Meta(req, timeout=self.timeout)
        except grpc.RpcError as e:
            raise self._error(e) from None
        return meta.check_response(entries, resp) if check else meta.entries_of(resp)

    def upload(self, name: str, data: Buffer | None = None, *,
               path: str | os.PathLike[str] | None = None, chunk_size: int = 1 << 20) -> TransferResult:
        if chunk_size <= 0:
            raise ValueError(f"chunk size {chunk_size} must be positive")
        chunk_seconds: list[float] = []
        crc = 0
        with UploadSource(data, path) as src:
            size = src.size

            def requests() -> Iterator[pb.UploadRequest]:
                nonlocal crc
                yield pb.UploadRequest(header=pb.UploadHeader(name=name, size=size, chunk_size=chunk_size))
                for _off, chunk in src.chunks(chunk_size):
                    crc = zlib.crc32(chunk, crc)
                    msg = pb.UploadRequest(chunk=bytes(chunk))
                    t = time.perf_counter()
                    yield msg  # grpc asks for the next message once this one is handed to the stream
                    chunk_seconds.append(time.perf_counter() - t)
                yield pb.UploadRequest(trailer=pb.UploadTrailer(crc32=crc))

            t0 = time.perf_counter()
            try:
                resp = self._stub.Upload(requests(), timeout=self.timeout)
            except grpc.RpcError as e:
                raise self._error(e) from None
            seconds = time.perf_counter() - t0
        if resp.size != size or resp.crc32 != crc:
            raise XferError("data_loss", f"upload {name!r}: server committed size {resp.size} crc32 "
                                         f"0x{resp.crc32:08x}, client sent size {size} crc32 0x{crc:08x}")
        return TransferResult(size, crc, seconds, None, chunk_seconds)

    def download(self, name: str, *, chunk_size: int = DEFAULT_DOWNLOAD_CHUNK, out: BinaryIO | None = None,
                 verify: bool = True) -> TransferResult:
        if chunk_size <= 0:
            raise ValueError(f"chunk size {chunk_size} must be positive")
        t0 = time.perf_counter()
        parts: list[bytes] = []
        stream = DownloadStream(name, verify)
        call = self._stub.Download(pb.DownloadRequest(name=name, chunk_size=chunk_size), timeout=self.timeout)
        try:
            for msg in call:
                data = stream.take(msg)
                if data is None:
                    continue
                if out is None:
                    parts.append(data)
                else:
                    out.write(data)
        except grpc.RpcError as e:
            raise self._error(e) from None
        except XferError:
            call.cancel()
            raise
        size, crc = stream.finish()
        seconds = time.perf_counter() - t0
        return TransferResult(size, crc, seconds, b"".join(parts) if out is None else None, stream.chunk_seconds)
