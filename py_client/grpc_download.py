"""The checks of a gRPC Download stream (PROTOCOL.md "gRPC"), shared by the blocking client and loadgen's
grpc.aio users: one header, then chunks, then one trailer; never more bytes than declared; the CRC-32."""

from __future__ import annotations

import time
import zlib

from py_client.errors import XferError
from xfer.v1 import file_transfer_pb2 as pb


class DownloadStream:
    """Feed each DownloadResponse to `take` (it returns the chunk's bytes, or None for a header or trailer),
    then call `finish` once the stream ended."""

    def __init__(self, name: str, verify: bool) -> None:
        self.name = name
        self.verify = verify
        self.crc = 0
        self.received = 0
        self.header: pb.DownloadHeader | None = None
        self.trailer: pb.DownloadTrailer | None = None
        self.chunk_seconds: list[float] = []
        self._t = time.perf_counter()

    def take(self, msg: pb.DownloadResponse) -> bytes | None:
        kind = msg.WhichOneof("msg")
        name = self.name
        if self.trailer is not None:
            raise XferError("internal", f"download {name!r}: {kind} after the trailer")
        data: bytes | None = None
        if kind == "header":
            if self.header is not None:
                raise XferError("internal", f"download {name!r}: a second header")
            self.header = msg.header
        elif kind == "chunk":
            if self.header is None:
                raise XferError("internal", f"download {name!r}: a chunk before the header")
            self.chunk_seconds.append(time.perf_counter() - self._t)
            data = msg.chunk
            self.received += len(data)
            if self.received > self.header.size:
                raise XferError("data_loss", f"download {name!r}: {self.received} bytes received, "
                                             f"more than the declared {self.header.size}")
            if self.verify:
                self.crc = zlib.crc32(data, self.crc)
        elif kind == "trailer":
            if self.header is None:
                raise XferError("internal", f"download {name!r}: a trailer before the header")
            self.trailer = msg.trailer
        else:
            raise XferError("internal", f"download {name!r}: an empty DownloadResponse")
        self._t = time.perf_counter()
        return data

    def finish(self) -> tuple[int, int]:
        """(size, crc32) of a stream that ended whole and, with verify, intact."""
        name, header, trailer = self.name, self.header, self.trailer
        if header is None or trailer is None:
            raise XferError("data_loss", f"download {name!r}: stream ended without "
                                         f"{'a header' if header is None else 'a trailer'}")
        if self.received != header.size:
            raise XferError("data_loss", f"download {name!r}: received {self.received} of {header.size} bytes")
        if self.verify and self.crc != trailer.crc32:
            raise XferError("data_loss", f"crc32 mismatch downloading {name!r}: received 0x{self.crc:08x}, "
                                         f"server 0x{trailer.crc32:08x}")
        return header.size, trailer.crc32
