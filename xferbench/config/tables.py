"""The optional top-level tables that stand alone: [network] (Toxiproxy's conditions) and [soak] (the leak
check's goal)."""

from __future__ import annotations

import re
from typing import Any

from py_client.sizes import SIZE_HELP, parse_size
from xferbench.config.model import ExperimentError, Network, Soak
from xferbench.config.values import _unknown, parse_seconds

_RATE_RE = re.compile(r"^\s*(.+?)\s*/\s*s\s*$")
BANDWIDTH_MIN = 1000  # Toxiproxy's bandwidth toxic counts in units of 1000 bytes per second


def _soak(tab: dict[str, Any]) -> Soak:
    _unknown(tab, ("growth_max", "held_slack"), "soak")
    growth_max = tab.get("growth_max", Soak.growth_max)
    if isinstance(growth_max, bool) or not isinstance(growth_max, int | float) or not 0 < growth_max < 10:
        raise ExperimentError(f"soak.growth_max = {growth_max!r}: expected a fraction > 0 (0.05 = 5% growth)")
    slack = tab.get("held_slack", Soak.held_slack)
    if isinstance(slack, bool) or not isinstance(slack, int) or slack < 0:
        raise ExperimentError(f"soak.held_slack = {slack!r}: expected an integer >= 0")
    return Soak(float(growth_max), slack)


def _whole_ms(tab: dict[str, Any], key: str) -> int:
    v = tab[key]
    try:
        seconds = parse_seconds(v)
    except ValueError:
        raise ExperimentError(f'network.{key} = {v!r}: expected a duration such as "20ms" or 0.02 (seconds)') from None
    ms = seconds * 1000
    if abs(ms - round(ms)) > 1e-6:
        raise ExperimentError(f"network.{key} = {v!r}: expected whole milliseconds (Toxiproxy delays in ms)")
    return round(ms)


def _network(tab: dict[str, Any]) -> Network:
    """Validates [network]; every error names the key and what it accepts."""
    _unknown(tab, ("latency", "jitter", "bandwidth"), "network")
    if not tab:
        raise ExperimentError("network: empty table; give latency, jitter and/or bandwidth, or drop [network]")
    latency = _whole_ms(tab, "latency") if "latency" in tab else 0
    jitter = _whole_ms(tab, "jitter") if "jitter" in tab else 0
    if jitter and not latency:
        raise ExperimentError("network.jitter: needs network.latency (jitter varies the latency around it)")
    if jitter > latency:
        raise ExperimentError(
            f"network.jitter = {tab['jitter']!r}: at most network.latency ({latency} ms); a delay cannot go below zero"
        )
    bandwidth = _bandwidth(tab["bandwidth"]) if "bandwidth" in tab else None
    return Network(latency, jitter, bandwidth)


def _bandwidth(v: Any) -> int:
    """network.bandwidth: a size per second, in bytes per second."""
    m = _RATE_RE.match(v) if isinstance(v, str) else None
    try:
        bandwidth = parse_size(m.group(1)) if m else None
    except ValueError:
        bandwidth = None
    if bandwidth is None:
        raise ExperimentError(
            f'network.bandwidth = {v!r}: expected a rate such as "100MiB/s" or "800000/s" (a size, {SIZE_HELP}, then /s)'
        )
    if bandwidth < BANDWIDTH_MIN:
        raise ExperimentError(f"network.bandwidth = {v!r}: at least 1000/s (Toxiproxy's unit is 1000 B/s)")
    return bandwidth
