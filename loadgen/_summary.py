"""The summary printed when a run stops: one table of whole operations, the chunk calls apart, and the
generator's CPU in cores."""

from __future__ import annotations

from dataclasses import dataclass

from loadgen._recorder import CHUNK_METHODS, Series, Snapshot, quantile

SATURATED_CORES = 0.9  # a Locust process above 0.9 cores is the bottleneck, not the server
_HEADER = (f"{'transport':9} {'method':14} {'requests':>9} {'errors':>7} {'req/s':>9} {'avg ms':>9} "
           f"{'p50 ms':>9} {'p95 ms':>9} {'p99 ms':>9} {'max ms':>9}")


@dataclass(frozen=True)
class RunSummary:
    role: str  # local | master
    run_number: int
    snap: Snapshot
    wall_s: float
    cpu_cores: float  # the busiest worker on a master
    idle_classes: tuple[str, ...] = ()  # user classes of the mix that got no user


def _row(transport: str, method: str, series: list[Series], wall_s: float) -> str:
    n = sum(s.count for s in series)
    err = sum(s.err for s in series)
    avg = sum(s.sum for s in series) / n
    ms = [1000.0 * quantile(series, q) for q in (0.5, 0.95, 0.99)]
    top = 1000.0 * max(s.max for s in series)
    return (f"{transport:9} {method:14} {n:9d} {err:7d} {n / wall_s:9.1f} {1000.0 * avg:9.3f} "
            f"{ms[0]:9.3f} {ms[1]:9.3f} {ms[2]:9.3f} {top:9.3f}")


def _table(snap: Snapshot, wall_s: float, whole: bool) -> list[str]:
    keys = sorted(k for k, s in snap.series.items() if s.count and (k[1] not in CHUNK_METHODS) == whole)
    return [_row(t, m, [snap.series[(t, m)]], wall_s) for t, m in keys]


def _tls_line(tls: dict[tuple[str, str], int]) -> str:
    """TLS handshakes per transport, and how many resumed where the client can tell (loadgen._tls)."""
    parts = []
    for t in sorted({t for t, _r in tls}):
        n = sum(v for (tt, _r), v in tls.items() if tt == t)
        unknown = tls.get((t, "unknown"), 0)
        how = ("resumption unknown: grpcio does not tell" if unknown == n
               else f"{tls.get((t, 'true'), 0)} resumed")
        parts.append(f"{t} {n} ({how})")
    return "TLS handshakes: " + "; ".join(parts)


def render(run: RunSummary) -> str:
    snap, wall = run.snap, run.wall_s
    lines = [f"xfer summary of run {run.run_number} ({run.role}, {wall:.1f} s; percentiles from client "
             "histograms, 1% precision)", _HEADER, *_table(snap, wall, whole=True)]
    ops = snap.methods(None)
    if any(s.count for s in ops):
        lines.append(_row("", "operations", [s for s in ops if s.count], wall))
    chunks = _table(snap, wall, whole=False)
    if chunks:
        lines += ["chunk calls (parts of the Upload and Download operations above, not counted in them):",
                  *chunks]
    up, down = snap.bytes.get("upload", 0), snap.bytes.get("download", 0)
    ver_ok = sum(n for (_m, r), n in snap.verified.items() if r == "ok")
    ver_bad = sum(n for (_m, r), n in snap.verified.items() if r != "ok")
    where = " (busiest worker)" if run.role == "master" else ""
    lines.append(f"upload {up / wall / 1e6:.1f} MB/s, download {down / wall / 1e6:.1f} MB/s; "
                 f"verified {ver_ok}, mismatched {ver_bad}; generator CPU {run.cpu_cores:.2f} cores{where}")
    if snap.tls:
        lines.append(_tls_line(snap.tls))
    if run.idle_classes:
        lines.append(f"WARNING: {', '.join(run.idle_classes)} never ran: the user count is too small for "
                     "every class of --xfer-mix (raise -u, or drop classes from the mix)")
    if run.cpu_cores > SATURATED_CORES:
        lines.append(f"WARNING: the load generator used more than {SATURATED_CORES:g} cores: it may "
                     "be the bottleneck (use --processes or more workers)")
    return "\n".join(lines)
