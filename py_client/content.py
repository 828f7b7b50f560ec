"""Synthetic file content (`gen:<size>:<seed>`) and CRC-32, as PROTOCOL.md defines them."""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

GEN_PREFIX = "gen:"
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GEN_RE = re.compile(r"gen:(0|[1-9][0-9]*):(0|[1-9][0-9]*)")
_WORDS_PER_BATCH = 1 << 17  # 1 MiB of content per numpy batch


@dataclass(frozen=True)
class GenName:
    size: int
    seed: int

    def __str__(self) -> str:
        return f"{GEN_PREFIX}{self.size}:{self.seed}"


def parse_gen_name(name: str) -> GenName | None:
    """Returns the parsed name, None for a non-gen name; raises ValueError for a malformed gen name."""
    if not name.startswith(GEN_PREFIX):
        return None
    m = _GEN_RE.fullmatch(name)
    if m is None or int(m.group(2)) >= 1 << 64:
        raise ValueError(f"malformed gen name {name!r}: want gen:<size>:<seed> in unsigned decimal")
    return GenName(int(m.group(1)), int(m.group(2)))


def _words(seed: int, first: int, count: int) -> np.ndarray:
    with np.errstate(over="ignore"):
        i = np.arange(first + 1, first + 1 + count, dtype=np.uint64)
        z = np.uint64(seed) + i * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def gen_bytes(size: int, seed: int, offset: int = 0, length: int | None = None) -> bytes:
    """Bytes [offset, offset+length) of gen:<size>:<seed>, clipped to size."""
    end = size if length is None else min(size, offset + length)
    if offset >= end:
        return b""
    first_word, last_word = offset // 8, (end + 7) // 8
    out = bytearray()
    for w in range(first_word, last_word, _WORDS_PER_BATCH):
        n = min(_WORDS_PER_BATCH, last_word - w)
        out += _words(seed, w, n).astype("<u8").tobytes()
    skip = offset - first_word * 8
    return bytes(out[skip : skip + (end - offset)])


def crc32(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    return zlib.crc32(data, value) & 0xFFFFFFFF


@lru_cache(maxsize=256)
def gen_crc32(size: int, seed: int) -> int:
    crc, step = 0, 8 << 20
    for off in range(0, size, step):
        crc = crc32(gen_bytes(size, seed, off, step), crc)
    return crc
