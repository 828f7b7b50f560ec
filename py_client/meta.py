"""Xfer.Meta / FileTransfer.Meta (PROTOCOL.md "Meta"): the answer a server owes for a list of entries,
and the check both clients make of the answer they got."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from py_client.content import crc32
from py_client.errors import XferError
from xfer.v1 import file_transfer_pb2 as pb

Entries = Sequence[tuple[str, str]]


def sorted_entries(entries: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The entries in the server's order: by key, compared as UTF-8 bytes (Go's and memcmp's order)."""
    return sorted(entries, key=lambda kv: kv[0].encode())


def digest(entries: Iterable[tuple[str, str]]) -> int:
    """CRC-32 over key NUL value NUL of each entry, in the order given."""
    crc = 0
    for k, v in entries:
        crc = crc32(k.encode() + b"\0" + v.encode() + b"\0", crc)
    return crc


def request(entries: Entries) -> pb.MetaRequest:
    return pb.MetaRequest(entries=[pb.MetaEntry(key=k, value=v) for k, v in entries])


def expected_response(entries: Entries) -> pb.MetaResponse:
    """The MetaResponse a server must send for these (valid, distinct-key) entries."""
    ordered = sorted_entries(entries)
    return pb.MetaResponse(entries=[pb.MetaEntry(key=k, value=v) for k, v in ordered], digest=digest(ordered))


def entries_of(resp: pb.MetaResponse) -> list[tuple[str, str]]:
    return [(e.key, e.value) for e in resp.entries]


@dataclass(frozen=True)
class Prepared:
    """Entries made ready once for many calls (a load generator's user): the request, its encoding and the
    answer it must get, so each call costs the client a comparison, not a sort and a CRC-32."""

    request: pb.MetaRequest
    body: bytes
    expected: list[tuple[str, str]]
    digest: int


def prepare(entries: Entries) -> Prepared:
    req = request(entries)
    want = sorted_entries(entries)
    return Prepared(req, req.SerializeToString(deterministic=True), want, digest(want))


def check_response(entries: Entries | Prepared, resp: pb.MetaResponse) -> list[tuple[str, str]]:
    """The answer's entries, after checking they are ours sorted by key and the digest covers them.

    Raises XferError("data_loss", ...) naming the first difference."""
    got = entries_of(resp)
    want = entries.expected if isinstance(entries, Prepared) else sorted_entries(entries)
    if got != want:
        first = next((i for i, (g, w) in enumerate(zip(got, want, strict=False)) if g != w), min(len(got), len(want)))
        raise XferError("data_loss", f"meta answer has {len(got)} entries, sent {len(want)}; first difference "
                                     f"at sorted entry {first}")
    want_digest = entries.digest if isinstance(entries, Prepared) else digest(got)  # got == want here
    if resp.digest != want_digest:
        raise XferError("data_loss", f"meta digest 0x{resp.digest:08x} differs from the client's "
                                     f"0x{want_digest:08x}")
    return got


_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."


def random_entries(count: int, lo: int, hi: int, rng: random.Random) -> list[tuple[str, str]]:
    """count entries with distinct keys, each key and value lo..hi ASCII bytes (keys at least 1 byte)."""
    if count < 0 or lo < 0 or hi < lo or hi > 4096:
        raise ValueError(f"entries {count}, sizes {lo}-{hi}: want count >= 0 and 0 <= lo <= hi <= 4096")
    key_lo, key_hi = max(lo, 1), max(min(hi, 256), 1)
    keys: set[str] = set()
    out: list[tuple[str, str]] = []
    for _ in range(100 * count + 100):  # bounded: distinct keys from 64^k choices come quickly
        if len(out) == count:
            break
        key = "".join(rng.choices(_ALPHABET, k=rng.randint(min(key_lo, key_hi), key_hi)))
        if key in keys:
            continue
        keys.add(key)
        out.append((key, "".join(rng.choices(_ALPHABET, k=rng.randint(lo, hi)))))
    if len(out) != count:
        raise ValueError(f"could not draw {count} distinct keys of {key_lo}-{key_hi} bytes")
    return out
