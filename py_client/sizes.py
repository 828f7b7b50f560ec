"""The one size grammar (docs/DESIGN.md "Size grammar"): plain bytes (`65536`) or a number with a binary
suffix, `KiB`, `MiB` or `GiB` (`64KiB`, `4MiB`); whole numbers only, as the servers take them.

py_client's CLI, loadgen's `--xfer-*` options and the runner's experiment TOML all parse sizes here, so a
size one of them accepts is accepted by every other (the servers implement the same grammar and pass the
same cases: proto/testdata/size.vectors, read by tests in Go, C and Python).
"""

from __future__ import annotations

import re

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30

SUFFIXES = {"": 1, "KiB": KIB, "MiB": MIB, "GiB": GIB}
SIZE_HELP = "plain bytes (65536) or a number with KiB, MiB or GiB (64KiB, 4MiB)"

_SIZE_RE = re.compile(r"([0-9]+)(KiB|MiB|GiB)?")


def parse_size(text: str | int, *, what: str = "size", lo: int = 0, hi: int | None = None) -> int:
    """`text` in bytes, within lo..hi; raises ValueError naming `what`, the value and the grammar.

    An int (a TOML integer) is taken as bytes; bool is refused (TOML `true` is not a size).
    """
    if isinstance(text, bool):
        raise ValueError(f"{what} {text!r} is not a size: want {SIZE_HELP}")
    if isinstance(text, int):
        n = text
    else:
        m = _SIZE_RE.fullmatch(text)
        if m is None:
            raise ValueError(f"{what} {text!r} is not a size: want {SIZE_HELP}")
        n = int(m.group(1)) * SUFFIXES[m.group(2) or ""]
    if hi is None and n < lo:
        raise ValueError(f"{what} {text!r} = {n} bytes is below the minimum, {lo}")
    if hi is not None and not lo <= n <= hi:
        raise ValueError(f"{what} {text!r} = {n} bytes is outside {lo}..{hi}")
    return n
