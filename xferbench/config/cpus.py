"""The CPUs this process may use and the [pinning] table that shares them between the server and the load
generator."""

from __future__ import annotations

import os
from typing import Any

from xferbench.config.model import PIN_MODES, ExperimentError, Pinning
from xferbench.config.values import _unknown


def available_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def auto_pinning() -> Pinning:
    """Disjoint halves of the CPUs this process may use: the server on the lower half, Locust on the upper
    (on 2 CPUs: one each). With one CPU there is nothing to separate."""
    cpus = available_cpus()
    if len(cpus) < 2:
        return Pinning(mode="none")
    half = len(cpus) // 2
    return Pinning(tuple(cpus[:half]), tuple(cpus[half:]), "auto")


def _pinning(tab: dict[str, Any]) -> Pinning:
    _unknown(tab, ("server", "generator", "mode"), "pinning")
    explicit = "server" in tab or "generator" in tab
    mode = tab.get("mode", "manual" if explicit else "auto")
    if mode not in PIN_MODES:
        raise ExperimentError(f"pinning.mode = {mode!r}: expected {' | '.join(PIN_MODES)}")
    if mode == "none":
        if explicit:
            raise ExperimentError('pinning: mode = "none" pins nothing; drop server/generator or use mode = "manual"')
        return Pinning(mode="none")
    if mode == "auto":
        if explicit:
            raise ExperimentError(
                'pinning: mode = "auto" chooses the CPU sets itself; drop server/generator or use mode = "manual"'
            )
        return auto_pinning()
    return _manual_pinning(tab)


def _manual_pinning(tab: dict[str, Any]) -> Pinning:
    cpus = set(available_cpus())
    pins: dict[str, tuple[int, ...]] = {}
    for k in ("server", "generator"):
        v = tab.get(k)
        if v is None:
            continue
        if not isinstance(v, list) or not v or not all(type(c) is int and c in cpus for c in v):
            raise ExperimentError(f"pinning.{k} = {v!r}: expected a non-empty list of CPU numbers from {sorted(cpus)}")
        pins[k] = tuple(v)
    if not pins:
        raise ExperimentError('pinning: mode = "manual" needs server = [...] and/or generator = [...]')
    if set(pins.get("server", ())) & set(pins.get("generator", ())):
        raise ExperimentError(
            f"pinning: server {list(pins['server'])} and generator {list(pins['generator'])} share CPUs; "
            "the load generator would steal the server's time"
        )
    return Pinning(mode="manual", **pins)
