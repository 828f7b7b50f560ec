"""Toxiproxy's toxics between py_client and every (server, transport), during uploads and downloads.

For each toxic, the client either completes correctly or raises a typed XferError (never a traceback of
another type, never a hang: every attempt is bounded by the client's timeout plus a margin). Whatever
happened, the server shows nothing partial (the upload's name holds the old version or the complete new
one), loses nothing committed (a file stored before the fault is intact), and a retry once the toxic is
gone succeeds. An "ok" under a toxic that slows the bytes took at least the time that toxic imposes
(bandwidth, slicer), and under slow_close a connection through the proxy took at least its delay to close,
measured from the client's side, and less once the toxic was gone.

Direction: an upload's toxic is on the upstream (client → server) side, a download's on the downstream
side, so it hits the bulk of the bytes; latency is on the requests' side in both (`stream` below). Some
toxics are chained after a bandwidth limit so that they strike in the middle of a transfer rather than
before its first byte.

XFER_FAULT_TABLE=path.json writes every scenario's outcome (tests/servers/fault/table.py turns it into the
BENCHMARKS.md table).
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from py_client import XferError, connect
from py_client.content import crc32, gen_bytes
from tests.support.toxiproxy import ProxiedServer, Toxic

SIZE = 2 << 20
CHUNK = 256 << 10
OLD = gen_bytes(1 << 20, 1)
NEW = gen_bytes(SIZE, 2)
KEEP = gen_bytes(300 << 10, 3)
RATE_KB_S = 2000  # Toxiproxy's bandwidth unit: 1000 bytes per second; NEW then takes about 1 s
MARGIN_S = 3.0  # an attempt may overrun its client timeout by this much before it counts as a hang
RETRY_TIMEOUT_S = 20.0
SLOW_CLOSE_MS = 1000
# slicer: every slice at most average + variation bytes, each followed by the delay, one slice at a time per
# direction (Toxiproxy's SlicerToxic.Pipe); so the bulk's SIZE bytes take at least their slices' delays.
SLICE_AVG, SLICE_VAR, SLICE_DELAY_US = 1500, 1000, 500
SLICED_MIN_S = math.ceil(SIZE / (SLICE_AVG + SLICE_VAR)) * SLICE_DELAY_US / 1e6  # 839 slices: 0.42 s


@dataclass(frozen=True)
class Scenario:
    toxics: Callable[[str], list[Toxic]]  # stream → the toxics, in chain order
    expect: frozenset[str]  # "ok" or the XferError codes accepted
    timeout_s: float  # the client's timeout for the attempt under the toxic
    min_s: float = 0.0  # an "ok" attempt must take at least this long (the toxic really acted)
    what: str = ""
    mid_transfer: bool = False  # the fault must strike after the first bytes and before the last
    close_held_s: float = 0.0  # a connection through the proxy must take at least this long to close
    # None: the bulk's direction. Latency delays the requests instead: a latency toxic still holding
    # response bytes for a client that gave up wedges Toxiproxy's toxic removal and its whole API
    # (Shopify/toxiproxy#558, open in v2.12.0), and the retry needs the toxic gone.
    stream: str | None = None

    def chain(self, bulk: str) -> list[Toxic]:
        return self.toxics(self.stream or bulk)


SCENARIOS: dict[str, Scenario] = {
    "latency": Scenario(
        lambda s: [Toxic("latency", {"latency": 400}, s)],
        frozenset({"deadline_exceeded"}), 0.15,
        what="400 ms on requests, client timeout 150 ms", stream="upstream",
    ),
    "bandwidth": Scenario(
        lambda s: [Toxic("bandwidth", {"rate": RATE_KB_S}, s)],
        frozenset({"ok"}), 10.0, min_s=0.85 * SIZE / (RATE_KB_S * 1000),
        what=f"{RATE_KB_S} KB/s",
    ),
    "reset_peer": Scenario(
        lambda s: [Toxic("bandwidth", {"rate": RATE_KB_S}, s), Toxic("reset_peer", {"timeout": 250}, s)],
        frozenset({"unavailable"}), 10.0, mid_transfer=True,
        what=f"reset 250 ms into a transfer at {RATE_KB_S} KB/s",
    ),
    "slow_close": Scenario(
        lambda s: [Toxic("slow_close", {"delay": SLOW_CLOSE_MS}, s)],
        frozenset({"ok"}), 10.0, close_held_s=SLOW_CLOSE_MS / 1000,
        what=f"closes held back {SLOW_CLOSE_MS / 1000:g} s",
    ),
    "timeout": Scenario(
        lambda s: [Toxic("timeout", {"timeout": 0}, s)],
        frozenset({"deadline_exceeded"}), 0.5,
        what="all data held, client timeout 500 ms",
    ),
    "slicer": Scenario(
        lambda s: [Toxic("slicer", {"average_size": SLICE_AVG, "size_variation": SLICE_VAR, "delay": SLICE_DELAY_US}, s)],
        frozenset({"ok"}), 10.0, min_s=SLICED_MIN_S,
        what=f"{SLICE_AVG}±{SLICE_VAR}-byte slices, {SLICE_DELAY_US} µs apart",
    ),
}

_RESULTS: list[dict[str, object]] = []


@pytest.fixture(scope="module", autouse=True)
def _table() -> Iterator[None]:
    yield
    path = os.environ.get("XFER_FAULT_TABLE")
    if path:
        Path(path).write_text(json.dumps(_RESULTS, indent=1))


def _attempt(target: str, timeout_s: float, op: Callable[..., object], on_connected: Callable[[], object] | None = None
             ) -> tuple[str, float, str]:
    """Runs op(client) once; (outcome, seconds, message): outcome is "ok" or the XferError's code. Any other
    exception propagates and fails the test: clients must report faults as XferError.

    The connection is made (and used once) before `on_connected` adds the toxics, so they strike a live
    connection in the middle of its life, as real faults do, not its handshake."""
    client = connect(target, timeout=RETRY_TIMEOUT_S, inflight=4)
    try:
        client.echo(b"warm-up")
        if on_connected is not None:
            on_connected()
        client.timeout = timeout_s  # both clients read it per call
        t0 = time.perf_counter()
        try:
            op(client)
            outcome, message = "ok", ""
        except XferError as e:
            outcome, message = e.code, e.message
        seconds = time.perf_counter() - t0
    finally:
        client.close()
    return outcome, seconds, message


def _close_seconds(listen: str, timeout_s: float) -> float:
    """Seconds from the client's half-close of a new connection through the proxy to the end of that
    connection on the client's side (EOF or reset). The close crosses the proxy both ways: client → server
    (the upstream link) and, once the server has closed its side, server → client (the downstream link), so a
    slow_close on either direction holds it back by its delay."""
    host, port = listen.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        t0 = time.perf_counter()
        sock.shutdown(socket.SHUT_WR)
        try:
            while sock.recv(65536):  # a gRPC server's SETTINGS may come first
                pass
        except ConnectionResetError:
            pass
        return time.perf_counter() - t0


def _check_close(sc: Scenario, held: float | None, free: float | None) -> None:
    """With the toxic the close took at least its delay, and without it less: the delay was the toxic's."""
    if sc.close_held_s:
        assert held is not None and free is not None
        assert held >= sc.close_held_s, f"the close took {held:.3f}s under a {sc.close_held_s:g}s slow_close"
        assert free < sc.close_held_s, f"the close took {free:.3f}s without the toxic: the probe measures nothing"


def _stat(target: str, name: str) -> tuple[int, int] | None:
    """(size, crc32) of `name` on the server, None when it does not exist."""
    with connect(target, timeout=RETRY_TIMEOUT_S) as c:
        try:
            st = c.stat(name)
        except XferError as e:
            assert e.code == "not_found", e
            return None
        return st.size, st.crc32


def _version(data: bytes) -> tuple[int, int]:
    return len(data), crc32(data)


def _check_attempt(sc: Scenario, outcome: str, seconds: float, message: str) -> None:
    assert outcome in sc.expect, f"got {outcome}: {message} ({seconds:.2f}s); expected {sorted(sc.expect)}"
    assert seconds < sc.timeout_s + MARGIN_S, f"the client hung: {seconds:.1f}s with a {sc.timeout_s}s timeout"
    if outcome == "ok":
        assert seconds >= sc.min_s, f"{seconds:.2f}s: faster than the toxic allows ({sc.min_s:.2f}s)"
    if sc.mid_transfer:  # not at the handshake: 250 ms after the first byte (and, being an error, before the last)
        assert seconds >= 0.2, f"struck at {seconds:.2f}s, before the transfer was under way"


def _record(p: ProxiedServer, toxic: str, op: str, outcome: str, message: str, during: str, after: str,
            retry: str) -> None:
    _RESULTS.append({"toxic": toxic, "what": SCENARIOS[toxic].what, "op": op, "server": p.server.kind.name,
                     "transport": p.transport, "outcome": outcome, "message": message, "during": during,
                     "after": after, "retry": retry})


def _state_text(state: tuple[int, int] | None, versions: dict[str, bytes]) -> str:
    for label, data in versions.items():
        if state == _version(data):
            return label
    return "absent" if state is None else f"PARTIAL {state}"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("toxic", list(SCENARIOS))
def test_upload(proxied: ProxiedServer, toxic: str) -> None:
    sc = SCENARIOS[toxic]
    name = f"fault-up-{toxic}-{proxied.name}.bin"
    keep = f"fault-keep-up-{toxic}-{proxied.name}.bin"
    with connect(proxied.direct, timeout=RETRY_TIMEOUT_S) as c:
        c.upload(name, OLD, chunk_size=CHUNK)
        c.upload(keep, KEEP, chunk_size=CHUNK)
    versions = {"old": OLD, "new": NEW}

    added: list[str] = []
    try:
        outcome, seconds, message = _attempt(proxied.target, sc.timeout_s,
                                             lambda c: c.upload(name, NEW, chunk_size=CHUNK),
                                             lambda: added.extend(proxied.add(t) for t in sc.chain("upstream")))
        during = _stat(proxied.direct, name)  # past the proxy, while the faulty connection may still linger
        held = _close_seconds(proxied.listen, sc.close_held_s + RETRY_TIMEOUT_S) if sc.close_held_s else None
    finally:
        for t in reversed(added):
            proxied.remove(t)
    _check_attempt(sc, outcome, seconds, message)
    _check_close(sc, held, _close_seconds(proxied.listen, RETRY_TIMEOUT_S) if sc.close_held_s else None)
    # Never partial: the old version or the whole new one, whatever the client saw.
    assert during in (_version(OLD), _version(NEW)), f"{name} shows {during} during the fault"
    after = _stat(proxied.direct, name)
    assert after in (_version(OLD), _version(NEW)), f"{name} shows {after} after the fault"
    if outcome == "ok":
        assert after == _version(NEW)
    assert _stat(proxied.direct, keep) == _version(KEEP), "a file committed before the fault changed"

    outcome2, _s, message2 = _attempt(proxied.target, RETRY_TIMEOUT_S,
                                      lambda c: c.upload(name, NEW, chunk_size=CHUNK))
    assert outcome2 == "ok", f"retry without the toxic: {outcome2}: {message2}"
    with connect(proxied.target, timeout=RETRY_TIMEOUT_S) as c:
        assert c.download(name, chunk_size=CHUNK).data == NEW
    _record(proxied, toxic, "upload", outcome, message, _state_text(during, versions), _state_text(after, versions),
            "ok")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("toxic", list(SCENARIOS))
def test_download(proxied: ProxiedServer, toxic: str) -> None:
    sc = SCENARIOS[toxic]
    name = f"fault-down-{toxic}-{proxied.name}.bin"
    with connect(proxied.direct, timeout=RETRY_TIMEOUT_S) as c:
        c.upload(name, NEW, chunk_size=CHUNK)
    got: list[bytes | None] = []

    def download(c: object) -> None:
        got.append(c.download(name, chunk_size=CHUNK).data)  # type: ignore[attr-defined]

    added: list[str] = []
    try:
        outcome, seconds, message = _attempt(proxied.target, sc.timeout_s, download,
                                             lambda: added.extend(proxied.add(t) for t in sc.chain("downstream")))
        during = _stat(proxied.direct, name)
        held = _close_seconds(proxied.listen, sc.close_held_s + RETRY_TIMEOUT_S) if sc.close_held_s else None
    finally:
        for t in reversed(added):
            proxied.remove(t)
    _check_attempt(sc, outcome, seconds, message)
    _check_close(sc, held, _close_seconds(proxied.listen, RETRY_TIMEOUT_S) if sc.close_held_s else None)
    if outcome == "ok":
        assert got == [NEW], "a download that returned must return the file, whole"
    assert during == _version(NEW), "a download changed the stored file"
    after = _stat(proxied.direct, name)
    assert after == _version(NEW), "a download changed the stored file"

    got.clear()
    outcome2, _s, message2 = _attempt(proxied.target, RETRY_TIMEOUT_S, download)
    assert outcome2 == "ok" and got == [NEW], f"retry without the toxic: {outcome2}: {message2}"
    versions = {"intact": NEW}
    _record(proxied, toxic, "download", outcome, message, _state_text(during, versions),
            _state_text(after, versions), "ok")
