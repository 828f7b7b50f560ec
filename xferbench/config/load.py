"""The [load] table: each key's value checked (loadgen's options by loadgen's own parsers), the mode a cell
runs in, explicit step levels, and the check of what the cell's driver can honour (its entry in drivers.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import loadgen
from xferbench.config import drivers, hosts, tls, userload
from xferbench.config.model import LOAD_KEYS, LOAD_MODES, LOADGEN_KEYS, TRANSPORTS, ExperimentError, Load
from xferbench.config.values import _seconds_key, parse_seconds

# What xferload can honour is its entry in the driver registry (xferbench/config/drivers.py); these two are
# read from there for the modules that name them. xferload_args is here, beside the schema, because
# run/generators.py builds the command line from the schema's Load and parsing checks it before any run.
XFERLOAD_METHODS = set(drivers.DRIVERS["xferload"].calls)  # one call per operation, as loadgen counts them
XFERLOAD_MAX_INFLIGHT = drivers.DRIVERS["xferload"].max_inflight


def _loadgen_value(key: str, v: Any, where: str) -> Any:
    """A [load] value that is a loadgen option, checked by that option's own parser (so refused here exactly
    when Locust would refuse it): its command-line text; inflight as a number; an "off" rate as None."""
    opt = loadgen.option(key)
    if not isinstance(v, str | int | float | bool):
        raise ExperimentError(f"{where}.{key} = {v!r}: expected a string or a number, as {opt.flag} takes")
    try:
        text = opt.text(v)
    except ValueError as e:
        raise ExperimentError(f"{where}.{key} = {v!r}: {e}") from None
    if key == "inflight":
        return int(text)
    if key == "rate":
        return text if opt.parse(text) is not None else None
    if key == "steps":
        return text.replace(" ", "") if opt.parse(text) else None
    return text


def _check_load_value(key: str, v: Any, where: str) -> Any:
    """A [load] value (or one of a server group's [servers.load] axis) checked and in the form Load holds."""
    if key == "steps" and isinstance(v, list):  # [load] steps = [50, 100, 200]: the option's own text
        if not v or not all(type(x) is int for x in v):
            raise _bad(key, v, where, 'increasing whole numbers of users, e.g. [50, 100, 200] or "50,100,200"')
        v = ",".join(map(str, v))
    if key in LOADGEN_KEYS:
        return _loadgen_value(key, v, where)
    if key == "hosts":
        try:
            return hosts.check_value(v)
        except ValueError as e:
            raise ExperimentError(f"{where}.{key} = {e}") from None
    if key in userload.OWN_KEYS:
        try:
            return userload.check_value(key, v)
        except ValueError as e:
            raise ExperimentError(f"{where}.{key} = {e}") from None
    if key in _CHOICES:
        if v not in _CHOICES[key]:
            raise _bad(key, v, where, _CHOICES_TEXT[key])
        return v
    if key in _NUMBERS:
        return _number_value(key, v, where)
    raise ExperimentError(f"{where}.{key}: unknown key; allowed: {', '.join(LOAD_KEYS)}")


def _bad(key: str, v: Any, where: str, allowed: str) -> ExperimentError:
    return ExperimentError(f"{where}.{key} = {v!r}: expected {allowed}")


_CHOICES: dict[str, tuple[str, ...]] = {
    "mode": LOAD_MODES,
    "transport": TRANSPORTS,
    "driver": tuple(drivers.DRIVERS),
    "frame_codec": ("protobuf", "gob"),
    "tls": tls.TLS_MODES,
}
_CHOICES_TEXT = {
    "mode": " | ".join(LOAD_MODES),
    "transport": " | ".join(TRANSPORTS),
    "driver": " | ".join(f'"{d}"' for d in drivers.DRIVERS),
    "frame_codec": '"protobuf" | "gob"',
    "tls": " | ".join(f'"{m}"' for m in tls.TLS_MODES),
}
_NUMBERS = ("settle_s", "users", "duration_s", "spawn_rate", "slo_p99", "slo_failures")


def _number_value(key: str, v: Any, where: str) -> Any:
    """The [load] keys that are numbers (or durations) of our own, not loadgen options."""
    not_number = isinstance(v, bool) or not isinstance(v, int | float)
    if key == "settle_s":
        settle = _seconds_key(v, positive=False)
        if settle is None:
            raise _bad(key, v, where, 'a number of seconds >= 0, or a duration such as "5s"')
        return settle
    if key == "users":
        if not_number or not isinstance(v, int) or v <= 0:
            raise _bad(key, v, where, "a positive integer")
        return v
    if key == "duration_s":
        duration = _seconds_key(v, positive=True)
        if duration is None:
            raise _bad(key, v, where, 'a positive number of seconds, or a duration such as "2m"')
        return duration
    if key == "spawn_rate":
        if not_number or v <= 0:
            raise _bad(key, v, where, "a positive number")
        return float(v)
    if key == "slo_p99":
        try:
            return parse_seconds(v)
        except ValueError:
            raise _bad(key, v, where, 'a latency such as "20ms", "500us" or 0.02 (seconds)') from None
    if not_number or not 0 <= v < 1:  # slo_failures
        raise _bad(key, v, where, "a fraction of calls, 0 <= x < 1 (0.01 = 1%)")
    return float(v)


def _resolve_mode(load: Load, where: str) -> Load:
    """The load mode a cell runs in, and the keys each mode needs."""
    # First what your own users or a gRPC call rule out, so that a locustfile with mode = "open" is told to drop
    # the mode rather than first to add a rate it would then be told to drop.
    try:
        userload.check(load)
    except ValueError as e:
        raise ExperimentError(f"{where}: load.{e}") from None
    mode = load.mode or ("open" if load.rate else "closed")
    if mode == "open" and not load.rate:
        raise ExperimentError(f'{where}: load.mode = "open" needs load.rate (arrivals per second)')
    if mode == "closed" and load.rate:
        raise ExperimentError(
            f'{where}: load.mode = "closed" with load.rate = {load.rate!r}: a closed loop has no rate; drop one of them'
        )
    if mode == "capacity" and not load.slo_p99:
        raise ExperimentError(f'{where}: load.mode = "capacity" needs load.slo_p99 (e.g. "20ms")')
    if mode == "capacity" and not load.rate:
        raise ExperimentError(f'{where}: load.mode = "capacity" needs load.rate, the first rate it tries')
    load = replace(load, mode=mode)
    try:
        check_driver(load)
    except ValueError as e:
        raise ExperimentError(f'{where}: load.driver = "{load.driver}": load.{e}') from None
    return _stepped(load, where) if load.steps else load


def _stepped(load: Load, where: str) -> Load:
    """Explicit step levels: the step profile in a closed loop, each level held step_s with settle_s of it
    before the level's window; users is the last level and duration_s levels x step_s."""
    if load.profile != "step":
        raise ExperimentError(f'{where}: load.steps = {load.steps!r} needs load.profile = "step" (it is {load.profile!r})')
    if load.mode != "closed":
        raise ExperimentError(
            f"{where}: load.steps: the levels are concurrent users in a closed loop; drop "
            f"load.rate / load.mode = {load.mode!r}"
        )
    if not load.step_s or load.step_s == "auto":
        raise ExperimentError(f"{where}: load.steps needs load.step_s, the seconds each level is held (e.g. 20)")
    if load.settle_s >= load.step_seconds:
        raise ExperimentError(
            f"{where}: load.settle_s = {load.settle_s:g} leaves nothing of load.step_s = "
            f"{load.step_s} to measure; want settle_s < step_s"
        )
    return replace(load.with_step_s(load.step_seconds, load.settle_s), users=load.levels[-1])


def check_driver(load: Load) -> None:
    """Raises ValueError naming the [load] key the cell's driver cannot honour (the driver's registry entry)."""
    drivers.check(load)


def xferload_args(load: Load) -> list[str]:
    """xferload's flags for the [load] keys it honours: users → --conns (one connection per user, as a
    Locust frame user), inflight → --inflight, rate → --rate, echo_size → --size, meta_entries → --entries,
    meta_size → --entry-size, verify, frame_codec → --codec. sizes and chunk only concern upload and
    download, which it does not run here. Raises ValueError for a load its registry entry cannot run."""
    check_driver(load)
    (method,) = (m for m, w in loadgen.option("mix").parse(load.mix).items() if w > 0)  # one, as checked
    args = ["--method", method, "--conns", str(load.users), "--inflight", str(load.inflight)]
    return args + _xferload_payload_args(load)


def _xferload_payload_args(load: Load) -> list[str]:
    """xferload's flags for the rate, the payloads, verification and the codec (of a load already checked)."""
    opt = loadgen.option
    args: list[str] = []
    rate = opt("rate").parse(load.rate) if load.rate else None
    if rate is not None:  # constant intervals, as its entry requires
        args += ["--rate", f"{rate.per_second:g}"]
    if load.echo_size is not None:  # one size, as its entry requires
        args += ["--size", str(opt("echo_size").parse(load.echo_size).values[0])]
    if load.meta_entries is not None:
        args += ["--entries", str(opt("meta_entries").parse(load.meta_entries))]
    if load.meta_size is not None:
        lo, hi = opt("meta_size").parse(load.meta_size)
        args += ["--entry-size", f"{lo}-{hi}"]
    if load.verify == "off":
        args += ["--verify=false"]
    if load.frame_codec != "protobuf":  # the flag is new; the default needs none
        args += ["--codec", load.frame_codec]
    return args
