"""The checks every table of an experiment shares: durations, tables and their keys, matrix axes, and the
values of [servers.limits]."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from py_client.durations import parse_duration
from py_client.sizes import SIZE_HELP, parse_size
from xferbench.config.model import ExperimentError

MEMORY_LIMIT_MIN = 6 << 20  # what Docker refuses below ("Minimum memory limit allowed is 6MB")


def parse_seconds(text: str | int | float) -> float:
    """A positive duration in the one grammar (py_client/durations.py): '20ms' → 0.02, '1m30s' → 90.0; a TOML
    number, or a bare number, is seconds. Raises ValueError."""
    value = parse_duration(text)
    if value <= 0:
        raise ValueError(f"{text!r} is not a positive duration")
    return value


def _seconds_key(v: Any, *, positive: bool) -> float | None:
    """A TOML `*_s` value: a number of seconds or a duration string ("2m"), >= 0 (> 0 if positive); None if not."""
    try:
        value = parse_duration(v)
    except ValueError:
        return None
    return None if positive and value == 0 else value


def _table(d: Any, where: str) -> dict[str, Any]:
    if not isinstance(d, dict):
        raise ExperimentError(f"{where}: expected a table")
    return d


def _unknown(d: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    for k in d:
        if k not in allowed:
            raise ExperimentError(f"{where}.{k}: unknown key; allowed: {', '.join(allowed)}")


def _as_axis(v: Any) -> list[Any]:
    return list(v) if isinstance(v, list) else [v]


def _limit_cpus(v: Any) -> str:
    ncpu = len(os.sched_getaffinity(0))
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= ncpu:
        raise ValueError(f"a number of cores, 0 < cpus <= {ncpu} (this machine's CPUs)")
    return f"{v:g}"


def _limit_memory(v: Any) -> str:
    try:
        n = parse_size(v, lo=MEMORY_LIMIT_MIN)
    except ValueError:
        raise ValueError(f'a size of at least 6MiB, {SIZE_HELP} (e.g. "256MiB")') from None
    return str(v) if isinstance(v, str) else str(n)


LIMIT_KEYS: dict[str, Callable[[Any], str]] = {"cpus": _limit_cpus, "memory": _limit_memory}
