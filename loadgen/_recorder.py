"""Client-side measurements: HDR-style histograms per (transport, method), and snapshots of them.

Each Locust process keeps one Recorder, fed by the users. A Snapshot is a plain, msgpack-able copy
(workers send theirs to the master with every stats report); snapshots add, so the master can merge its
workers'. A Recorder keeps two: the process's whole life (exported) and the current run (summarised).

Two histograms per series:
- a fine log histogram (1% relative precision, 1 µs .. ~ hours), for percentiles printed and checked here;
- Prometheus buckets (BOUNDS): PROTOCOL.md's bounds plus finer ones, mergeable across processes.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any

# PROTOCOL.md "Metrics": shared by both servers and the client, so one histogram_quantile serves all.
PROTOCOL_BOUNDS = (
    0.00001, 0.000015, 0.00002, 0.00003, 0.00005, 0.00007,
    0.0001, 0.00015, 0.0002, 0.0003, 0.0005, 0.0007, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.007,
    0.01, 0.015, 0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1, 1.5, 2, 3, 5, 7, 10,
)
_STEPS = (1, 1.2, 1.5, 1.7, 2, 2.5, 3, 4, 5, 6, 7, 8.5)
BOUNDS: tuple[float, ...] = tuple(sorted(
    {round(m * 10.0**e, 10) for e in range(-5, 1) for m in _STEPS}
    | {float(b) for b in PROTOCOL_BOUNDS} | {15.0, 20.0, 30.0, 60.0}
))
assert set(map(float, PROTOCOL_BOUNDS)) <= set(BOUNDS)

FINE_MIN = 1e-6
_LOG_G = math.log(1.01)

CHUNK_METHODS = ("UploadChunk", "DownloadChunk")  # parts of Upload/Download: every other method is an operation


def fine_index(seconds: float) -> int:
    if seconds <= FINE_MIN:
        return 0
    return int(math.log(seconds / FINE_MIN) / _LOG_G) + 1


def fine_value(idx: int) -> float:
    """A representative value of bucket idx (its geometric middle): within 0.5% of any value in it."""
    if idx <= 0:
        return FINE_MIN
    return FINE_MIN * math.exp((idx - 0.5) * _LOG_G)


@dataclass
class Series:
    ok: int = 0
    err: int = 0
    sum: float = 0.0
    max: float = 0.0
    fine: dict[int, int] = field(default_factory=dict)
    prom: list[int] = field(default_factory=lambda: [0] * (len(BOUNDS) + 1))

    @property
    def count(self) -> int:
        return self.ok + self.err

    def observe(self, seconds: float, ok: bool) -> None:
        if ok:
            self.ok += 1
        else:
            self.err += 1
        self.sum += seconds
        if seconds > self.max:
            self.max = seconds
        i = fine_index(seconds)
        self.fine[i] = self.fine.get(i, 0) + 1
        self.prom[bisect.bisect_left(BOUNDS, seconds)] += 1

    def add(self, other: Series) -> None:
        self.ok += other.ok
        self.err += other.err
        self.sum += other.sum
        self.max = max(self.max, other.max)
        for i, n in other.fine.items():
            self.fine[i] = self.fine.get(i, 0) + n
        for i, n in enumerate(other.prom):
            self.prom[i] += n

    def copy(self) -> Series:
        return Series(self.ok, self.err, self.sum, self.max, dict(self.fine), list(self.prom))


def quantile(series: list[Series], q: float) -> float:
    """The q-quantile over the merged fine histograms (nan when empty), capped at the largest sample."""
    merged: dict[int, int] = {}
    total = 0
    top = 0.0
    for s in series:
        for i, n in s.fine.items():
            merged[i] = merged.get(i, 0) + n
            total += n
        top = max(top, s.max)
    if total == 0:
        return math.nan
    rank = max(1, math.ceil(q * total))
    seen = 0
    for i in sorted(merged):
        seen += merged[i]
        if seen >= rank:
            return min(fine_value(i), top) if top > 0 else fine_value(i)
    return top


@dataclass
class Snapshot:
    """Everything one process (or the merge of several) measured. `errors` counts failed calls by
    (transport, method, code), the code being PROTOCOL.md's status code (`data_loss`, `unavailable`, ...);
    `cpu_seconds` is the generator CPU the snapshot's process(es) used."""

    series: dict[tuple[str, str], Series] = field(default_factory=dict)
    errors: dict[tuple[str, str, str], int] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)
    verified: dict[tuple[str, str], int] = field(default_factory=dict)
    cpu_seconds: float = 0.0
    # Client connections by (transport, event): event "opened" (every connection made) or "reconnect" (one
    # re-made after its predecessor failed or closed, under --xfer-connections user or pool).
    conns: dict[tuple[str, str], int] = field(default_factory=dict)
    # TLS handshakes made by (transport, resumed): "true", "false", or "unknown" (gRPC: grpcio does not tell).
    tls: dict[tuple[str, str], int] = field(default_factory=dict)

    def observe(self, transport: str, method: str, seconds: float, code: str) -> None:
        """One call; code "ok", or the status code it failed with."""
        key = (transport, method)
        s = self.series.get(key)
        if s is None:
            s = self.series[key] = Series()
        s.observe(seconds, code == "ok")
        if code != "ok":
            ek = (transport, method, code)
            self.errors[ek] = self.errors.get(ek, 0) + 1

    def add_bytes(self, direction: str, n: int) -> None:
        self.bytes[direction] = self.bytes.get(direction, 0) + n

    def verify(self, method: str, ok: bool) -> None:
        k = (method, "ok" if ok else "mismatch")
        self.verified[k] = self.verified.get(k, 0) + 1

    def connection(self, transport: str, reconnect: bool, resumed: str = "") -> None:
        """One connection made (and, when reconnect, re-made after an error or close); over TLS, its handshake
        (resumed: its label, "" for plaintext)."""
        for event in ("opened", "reconnect") if reconnect else ("opened",):
            k = (transport, event)
            self.conns[k] = self.conns.get(k, 0) + 1
        if resumed:
            self.tls[(transport, resumed)] = self.tls.get((transport, resumed), 0) + 1

    def copy(self) -> Snapshot:
        return Snapshot({k: s.copy() for k, s in self.series.items()}, dict(self.errors), dict(self.bytes),
                        dict(self.verified), self.cpu_seconds, dict(self.conns), dict(self.tls))

    def add(self, other: Snapshot) -> Snapshot:
        for k, s in other.series.items():
            self.series.setdefault(k, Series()).add(s)
        for ek, n in other.errors.items():
            self.errors[ek] = self.errors.get(ek, 0) + n
        for direction, n in other.bytes.items():
            self.bytes[direction] = self.bytes.get(direction, 0) + n
        for vk, n in other.verified.items():
            self.verified[vk] = self.verified.get(vk, 0) + n
        self.cpu_seconds += other.cpu_seconds
        for ck, n in other.conns.items():
            self.conns[ck] = self.conns.get(ck, 0) + n
        for tk, n in other.tls.items():
            self.tls[tk] = self.tls.get(tk, 0) + n
        return self

    def methods(self, method: str | None) -> list[Series]:
        """Series of one method, or of the whole operations (every method but the chunk calls) when None."""
        if method:
            return [s for (_t, m), s in self.series.items() if m == method]
        return [s for (_t, m), s in self.series.items() if m not in CHUNK_METHODS]

    def codes(self, transport: str, method: str) -> dict[str, int]:
        """Calls of (transport, method) by outcome: "ok" and each error code."""
        out = {"ok": self.series[(transport, method)].ok} if (transport, method) in self.series else {}
        for (t, m, c), n in self.errors.items():
            if (t, m) == (transport, method):
                out[c] = n
        return out

    # ---- wire form (msgpack: lists and str keys only) ----

    def to_wire(self) -> dict[str, Any]:
        return {
            "series": [[t, m, s.ok, s.err, s.sum, s.max, list(s.fine), list(s.fine.values()), s.prom]
                       for (t, m), s in self.series.items()],
            "errors": [[*k, n] for k, n in self.errors.items()],
            "bytes": [[k, n] for k, n in self.bytes.items()],
            "verified": [[*k, n] for k, n in self.verified.items()],
            "cpu": self.cpu_seconds,
            "conns": [[*k, n] for k, n in self.conns.items()],
            "tls": [[*k, n] for k, n in self.tls.items()],
        }

    @classmethod
    def from_wire(cls, w: dict[str, Any]) -> Snapshot:
        snap = cls()
        for t, m, ok, err, sm, mx, idx, cnt, prom in w.get("series", []):
            snap.series[(t, m)] = Series(ok, err, sm, mx, dict(zip(idx, cnt, strict=True)), list(prom))
        snap.errors = {(t, m, c): n for t, m, c, n in w.get("errors", [])}
        snap.bytes = {k: n for k, n in w.get("bytes", [])}
        snap.verified = {(m, r): n for m, r, n in w.get("verified", [])}
        snap.cpu_seconds = w.get("cpu", 0.0)
        snap.conns = {(t, e): n for t, e, n in w.get("conns", [])}
        snap.tls = {(t, r): n for t, r, n in w.get("tls", [])}
        return snap


class Recorder:
    """The live measurements of this process: since it started (`total`, what /metrics exports) and since
    the current run started (`run`, what the run's summary and --xfer-check judge)."""

    def __init__(self) -> None:
        self.total = Snapshot()
        self.run = Snapshot()

    def new_run(self) -> None:
        self.run = Snapshot()

    def observe(self, transport: str, method: str, seconds: float, code: str) -> None:
        self.total.observe(transport, method, seconds, code)
        self.run.observe(transport, method, seconds, code)

    def add_bytes(self, direction: str, n: int) -> None:
        self.total.add_bytes(direction, n)
        self.run.add_bytes(direction, n)

    def verify(self, method: str, ok: bool) -> None:
        self.total.verify(method, ok)
        self.run.verify(method, ok)

    def connection(self, transport: str, reconnect: bool, resumed: str = "") -> None:
        """Called from the user greenlets and from the grpc.aio loop thread: each update is a few dict
        operations on keys of a fixed set, and a snapshot copy can only see a count one behind."""
        self.total.connection(transport, reconnect, resumed)
        self.run.connection(transport, reconnect, resumed)
