"""Result types shared by both clients."""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field


@dataclass
class TransferResult:
    """One upload or download.

    chunk_seconds: per-chunk times, in chunk order. Upload: request sent → acknowledged (frame) or the
    time each message took to be handed to the stream (gRPC). Download: request → chunk (frame) or the
    wait for each chunk message (gRPC).
    """

    bytes: int
    crc32: int
    seconds: float
    data: builtins.bytes | None = None  # `bytes` above is the field
    chunk_seconds: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class StatResult:
    name: str
    size: int
    crc32: int
