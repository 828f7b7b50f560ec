"""The report's connection figures (loadgen --xfer-connections): per cell, the strategy, latency, connections
accepted by the server and opened by the client per second, client reconnects per second, the peak of TIME_WAIT
sockets on the server's port, and failures. Shown only for a run that has them: some cell sets [load]
connections, or some run reconnected or left sockets in TIME_WAIT."""

from __future__ import annotations

from xferbench.analysis.metrics import BY_NAME
from xferbench.analysis.summary import CellSummary, Summary
from xferbench.report import fmt

COLUMNS = ("client_p50_s", "client_p95_s", "conns_accepted_per_s", "conns_opened_per_s", "reconnects_per_s",
           "time_wait_peak", "client_failures", "server_errors")
HEAD = ("configuration", "connections", "P50", "P95", "accepted/s (server)", "opened/s (client)",
        "reconnects/s", "TIME_WAIT peak", "failures (client)", "errors (server)")


def strategy(s: Summary, c: CellSummary) -> str | None:
    """The cell's [load] connections (None: loadgen's default, one per user)."""
    for r in s.rows:
        if r.cell == c.name:
            v = (r.config.get("load") or {}).get("connections")
            return None if v is None else str(v)
    return None


def shown(s: Summary) -> bool:
    if any(strategy(s, c) is not None for c in s.cells):
        return True
    return any((r.reconnects_per_s or 0) > 0 or (r.time_wait_peak or 0) > 0 for r in s.rows if r.ok)


def _server_errors(s: Summary, c: CellSummary) -> str:
    vals = [r.server_errors for r in s.rows if r.cell == c.name and r.ok and r.server_errors is not None]
    return "-" if not vals else f"{sum(vals) / len(vals):,.0f}"


NOTE = ("Per configuration, geometric means across repeats [95% t-interval]: accepted/s from the server's "
        "xfer_connections_accepted_total, opened/s and reconnects/s from the client's "
        "xfer_client_connections_opened_total and xfer_client_reconnects_total, TIME_WAIT peak the largest "
        "per-second count of TIME_WAIT sockets to or from the server's port (/proc/net/tcp, tcp6); server errors "
        "are the mean count per run.")


def rows(s: Summary) -> list[list[str]]:
    """One row of plain text per cell, in HEAD's order."""
    out = []
    for c in s.cells:
        vals = [fmt.estimate(c.est.get(m), BY_NAME[m].unit) for m in COLUMNS[:-1]]
        out.append([c.name, strategy(s, c) or "user", *vals, _server_errors(s, c)])
    return out


def markdown(s: Summary) -> list[str]:
    if not shown(s):
        return []
    out = ["## Connections", "", NOTE, "", "| " + " | ".join(HEAD) + " |", "|---|---|" + "---:|" * (len(HEAD) - 2)]
    out += ["| " + " | ".join([f"`{r[0]}`", *r[1:]]) + " |" for r in rows(s)]
    return [*out, ""]
