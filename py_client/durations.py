"""The one duration grammar (docs/DESIGN.md "Sizes, durations and units"): one or more terms `<number><unit>`
with units `h`, `m`, `s`, `ms`, `us`, each at most once and in that order (`500ms`, `10s`, `2m`, `1m30s`,
`1h30m`, `1s500ms`), or a bare number, which is seconds (`15` = `15s`; only on its own: `1m30` is refused).
A number is digits, optionally a point and at most nine more digits (`1.5s`, `0.5h`). The value is a whole
number of microseconds, at most 2^63-1 nanoseconds (`2562047h47m16.854775s`). No sign, no space, no exponent,
no other unit or spelling (`S`, `sec`, `min`, `ns`, `µs`).

The runner's experiment TOML, the xferbench CLI, loadgen's options and py_client's CLI parse durations here,
so a duration one of them accepts is accepted by every other (the servers implement the same grammar and pass
the same cases: proto/testdata/duration.vectors, read by tests in Go, C and Python).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

# Microseconds per unit, in the order the terms must come.
UNITS = {"h": 3_600_000_000, "m": 60_000_000, "s": 1_000_000, "ms": 1_000, "us": 1}
US_PER_S = 1_000_000
MAX_US = (2**63 - 1) // 1000  # the largest whole-microsecond duration that fits 64-bit signed nanoseconds
MAX_FRACTION_DIGITS = 9
DURATION_HELP = ("a number with h, m, s, ms or us, or several in that order (500ms, 10s, 2m, 1m30s, 1.5s); "
                 "a bare number is seconds (15)")

_NUMBER = r"([0-9]+)(?:\.([0-9]+))?"
_TERM_RE = re.compile(_NUMBER + r"([^0-9.]*)")
_BARE_RE = re.compile(_NUMBER)


def _term_us(whole: str, fraction: str | None, unit_us: int) -> int | None:
    """whole.fraction units in microseconds; None when the fraction is too long or not whole microseconds."""
    whole = whole.lstrip("0")
    if len(whole) > 19:  # past any bound (and past int()'s digit limit for huge inputs)
        return MAX_US + 1
    us = int(whole or "0") * unit_us
    if fraction is not None:
        if len(fraction) > MAX_FRACTION_DIGITS:
            return None
        part, rest = divmod(int(fraction) * unit_us, 10 ** len(fraction))
        if rest:
            return None
        us += part
    return us


def _grammar_us(text: str) -> int | None:
    """The text's microseconds by the grammar, None where it is not a duration (the bound is the caller's)."""
    if not text.isascii():
        return None
    bare = _BARE_RE.fullmatch(text)
    if bare:
        return _term_us(bare.group(1), bare.group(2), US_PER_S)
    order = list(UNITS)
    total, pos, last = 0, 0, -1
    while pos < len(text):
        m = _TERM_RE.match(text, pos)
        if m is None or m.group(3) not in UNITS:
            return None
        rank = order.index(m.group(3))
        term = _term_us(m.group(1), m.group(2), UNITS[m.group(3)])
        if rank <= last or term is None:
            return None
        total, pos, last = total + term, m.end(), rank
    return total if pos else None


def _text_of(value: object) -> str | None:
    """A TOML value as grammar text: an int or float is seconds, spelled in plain decimals (1e-05 is 10us);
    None for anything else (bool: TOML `true` is not a duration)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        try:
            return format(Decimal(repr(value)), "f")
        except InvalidOperation:  # pragma: no cover - the repr of a finite float is a decimal
            return None
    return None


def parse_duration_us(value: str | int | float, *, what: str = "duration") -> int:
    """`value` in whole microseconds; raises ValueError naming `what`, the value and the grammar.

    An int or float (a TOML number) is seconds; bool is refused (TOML `true` is not a duration).
    """
    text = _text_of(value)
    us = None if text is None else _grammar_us(text)
    if us is None:
        raise ValueError(f"{what} {value!r} is not a duration: want {DURATION_HELP}")
    if us > MAX_US:
        raise ValueError(f"{what} {value!r} exceeds the largest duration, 2562047h47m16.854775s")
    return us


def parse_duration(value: str | int | float, *, what: str = "duration") -> float:
    """`value` in seconds (parse_duration_us / 1e6); each caller bounds it and says so."""
    return parse_duration_us(value, what=what) / US_PER_S
