"""Python clients for the xfer protocols: gRPC (`GrpcClient`) and frame (`FrameClient`).

    from py_client import connect
    with connect("frame://127.0.0.1:7070") as client:
        client.upload("a.bin", b"hello")
"""

from __future__ import annotations

from py_client.errors import XferError
from py_client.frame_client import FrameClient
from py_client.grpc_client import GrpcClient
from py_client.results import StatResult, TransferResult
from py_client.target import SCHEMES, Target, parse_target
from py_client.tls import TLSOptions

Client = GrpcClient | FrameClient


def connect(target: str, *, inflight: int = 8, timeout: float = 60.0,
            tls: TLSOptions | None = None) -> GrpcClient | FrameClient:
    """A client for `grpc://host:port` or `frame://host:port` (the scheme picks the transport), over TLS
    with `tls` (the target must then be a TLS listener, e.g. xferd-go's --tls-frame-addr).

    `inflight` (calls outstanding on one connection) applies to frame; gRPC multiplexes by itself.
    Raises ValueError for another scheme, a malformed address or an unreadable CA file.
    """
    t = parse_target(target)
    if t.scheme == "grpc":
        return GrpcClient(t.address, timeout=timeout, tls=tls)
    return FrameClient(t.address, inflight=inflight, timeout=timeout, tls=tls)


__all__ = [
    "SCHEMES",
    "Client",
    "FrameClient",
    "GrpcClient",
    "StatResult",
    "TLSOptions",
    "Target",
    "TransferResult",
    "XferError",
    "connect",
    "parse_target",
]
