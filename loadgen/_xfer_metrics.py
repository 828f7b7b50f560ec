"""Client-side measurements: HDR-style histograms per (transport, method), Prometheus text, snapshots.

Each Locust process keeps one Recorder fed by the events.request listener. A Snapshot is a plain,
msgpack-able copy (workers send theirs to the master with every stats report); snapshots add, so the
master can merge workers and evaluate --xfer-check on the whole run.

Two histograms per series:
- a fine log histogram (1% relative precision, 1 µs .. ~ hours), for percentiles printed and checked here;
- Prometheus buckets (BOUNDS): PROTOCOL.md's bounds plus finer ones, mergeable across processes.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

# PROTOCOL.md "Metrics": shared by both servers and the client, so one histogram_quantile serves all.
PROTOCOL_BOUNDS = (
    0.0001, 0.00015, 0.0002, 0.0003, 0.0005, 0.0007, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.007,
    0.01, 0.015, 0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1, 1.5, 2, 3, 5, 7, 10,
)
_STEPS = (1, 1.2, 1.5, 1.7, 2, 2.5, 3, 4, 5, 6, 7, 8.5)
BOUNDS: tuple[float, ...] = tuple(sorted(
    {round(m * 10.0**e, 10) for e in range(-4, 1) for m in _STEPS}
    | {float(b) for b in PROTOCOL_BOUNDS} | {15.0, 20.0, 30.0, 60.0}
))
assert set(map(float, PROTOCOL_BOUNDS)) <= set(BOUNDS)

FINE_MIN = 1e-6
_LOG_G = math.log(1.01)

TOP_METHODS = ("Upload", "Download", "Echo")


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

    def add(self, other: Series, sign: int = 1) -> None:
        self.ok += sign * other.ok
        self.err += sign * other.err
        self.sum += sign * other.sum
        self.max = max(self.max, other.max)
        for i, n in other.fine.items():
            v = self.fine.get(i, 0) + sign * n
            if v:
                self.fine[i] = v
            else:
                self.fine.pop(i, None)
        for i, n in enumerate(other.prom):
            self.prom[i] += sign * n

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
    """Everything one process (or the merge of several) measured."""

    series: dict[tuple[str, str], Series] = field(default_factory=dict)
    errors: dict[tuple[str, str, str], int] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)
    verified: dict[tuple[str, str], int] = field(default_factory=dict)
    cpu_seconds: float = 0.0

    def copy(self) -> Snapshot:
        return Snapshot({k: s.copy() for k, s in self.series.items()}, dict(self.errors), dict(self.bytes),
                        dict(self.verified), self.cpu_seconds)

    def add(self, other: Snapshot, sign: int = 1) -> Snapshot:
        for k, s in other.series.items():
            self.series.setdefault(k, Series()).add(s, sign)
        for d_self, d_other in ((self.errors, other.errors), (self.bytes, other.bytes),
                                (self.verified, other.verified)):
            for k, n in d_other.items():
                d_self[k] = d_self.get(k, 0) + sign * n
        self.cpu_seconds += sign * other.cpu_seconds
        return self

    def methods(self, method: str | None) -> list[Series]:
        """Series of one method, or of the top-level calls (Upload, Download, Echo) when None."""
        want = (method,) if method else TOP_METHODS
        return [s for (_t, m), s in self.series.items() if m in want]

    # ---- wire form (msgpack: lists and str keys only) ----

    def to_wire(self) -> dict:
        return {
            "series": [[t, m, s.ok, s.err, s.sum, s.max, list(s.fine), list(s.fine.values()), s.prom]
                       for (t, m), s in self.series.items()],
            "errors": [[*k, n] for k, n in self.errors.items()],
            "bytes": [[k, n] for k, n in self.bytes.items()],
            "verified": [[*k, n] for k, n in self.verified.items()],
            "cpu": self.cpu_seconds,
        }

    @classmethod
    def from_wire(cls, w: dict) -> Snapshot:
        snap = cls()
        for t, m, ok, err, sm, mx, idx, cnt, prom in w.get("series", []):
            snap.series[(t, m)] = Series(ok, err, sm, mx, dict(zip(idx, cnt, strict=True)), list(prom))
        snap.errors = {(t, m, c): n for t, m, c, n in w.get("errors", [])}
        snap.bytes = {k: n for k, n in w.get("bytes", [])}
        snap.verified = {(m, r): n for m, r, n in w.get("verified", [])}
        snap.cpu_seconds = w.get("cpu", 0.0)
        return snap


class Recorder(Snapshot):
    """The live measurements of this process."""

    def observe(self, transport: str, method: str, seconds: float, ok: bool, code: str = "") -> None:
        key = (transport, method)
        s = self.series.get(key)
        if s is None:
            s = self.series[key] = Series()
        s.observe(seconds, ok)
        if not ok:
            ek = (transport, method, code or "unknown")
            self.errors[ek] = self.errors.get(ek, 0) + 1

    def add_bytes(self, direction: str, n: int) -> None:
        self.bytes[direction] = self.bytes.get(direction, 0) + n

    def verify(self, method: str, ok: bool) -> None:
        k = (method, "ok" if ok else "mismatch")
        self.verified[k] = self.verified.get(k, 0) + 1


# ---- Prometheus text format 0.0.4 ------------------------------------------------------------------

def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**kv: str) -> str:
    return "{" + ",".join(f'{k}="{_esc(str(v))}"' for k, v in kv.items()) + "}"


def _num(v: float) -> str:
    if isinstance(v, int):
        return str(v)
    return repr(float(v)) if math.isfinite(v) else ("+Inf" if v > 0 else "NaN")


def render(snap: Snapshot, *, users: int, extra_gauges: list[tuple[str, str, str, float]] = ()) -> str:
    """xfer_client_* families of a snapshot. extra_gauges: (name, help, labels text, value)."""
    out: list[str] = []
    w = out.append
    w("# HELP xfer_client_requests_total Calls made by this Locust process (result ok|error).")
    w("# TYPE xfer_client_requests_total counter")
    for (t, m), s in sorted(snap.series.items()):
        w(f"xfer_client_requests_total{_labels(transport=t, method=m, result='ok')} {s.ok}")
        w(f"xfer_client_requests_total{_labels(transport=t, method=m, result='error')} {s.err}")
    w("# HELP xfer_client_request_duration_seconds Call durations (ok and error), from the intended "
      "start in open-loop mode; Upload/Download are whole transfers, *Chunk one chunk each.")
    w("# TYPE xfer_client_request_duration_seconds histogram")
    for (t, m), s in sorted(snap.series.items()):
        cum = 0
        for bound, n in zip(BOUNDS, s.prom, strict=False):
            cum += n
            le = _labels(transport=t, method=m, le=_num(bound))
            w(f"xfer_client_request_duration_seconds_bucket{le} {cum}")
        w(f"xfer_client_request_duration_seconds_bucket{_labels(transport=t, method=m, le='+Inf')} {s.count}")
        w(f"xfer_client_request_duration_seconds_sum{_labels(transport=t, method=m)} {_num(s.sum)}")
        w(f"xfer_client_request_duration_seconds_count{_labels(transport=t, method=m)} {s.count}")
    w("# HELP xfer_client_errors_total Failed calls by error code (the server's code, or the client's).")
    w("# TYPE xfer_client_errors_total counter")
    for (t, m, c), n in sorted(snap.errors.items()):
        w(f"xfer_client_errors_total{_labels(transport=t, method=m, code=c)} {n}")
    w("# HELP xfer_client_transfer_bytes_total Bytes of completed transfers.")
    w("# TYPE xfer_client_transfer_bytes_total counter")
    for d in ("upload", "download"):
        w(f"xfer_client_transfer_bytes_total{_labels(direction=d)} {snap.bytes.get(d, 0)}")
    w("# HELP xfer_client_verifications_total Checksums (Upload, Download) and echo payloads checked.")
    w("# TYPE xfer_client_verifications_total counter")
    for (m, r), n in sorted(snap.verified.items()):
        w(f"xfer_client_verifications_total{_labels(method=m, result=r)} {n}")
    w("# HELP xfer_client_users Locust users running in this process.")
    w("# TYPE xfer_client_users gauge")
    w(f"xfer_client_users {users}")
    for name, help_text, labels, value in extra_gauges:
        w(f"# HELP {name} {help_text}")
        w(f"# TYPE {name} gauge")
        w(f"{name}{labels} {_num(value)}")
    return "\n".join(out) + "\n"
