"""The Python side of the one size grammar (docs/DESIGN.md, "Sizes, durations and units"): the one Python
size parser (py_client.sizes, used by the runner, loadgen and py_client) passes proto/testdata/size.vectors, as
the Go and C servers' unit tests do."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from py_client.sizes import parse_size

VECTORS = Path(__file__).resolve().parents[2] / "proto" / "testdata" / "size.vectors"
UINT64_MAX = (1 << 64) - 1


def vectors() -> list[tuple[str, int | None]]:
    """(input, bytes) per line; None where the input is not a size. `-` is the empty input."""
    out = []
    for line in VECTORS.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        text, want = line.split("\t")
        out.append(("" if text == "-" else text, None if want == "error" else int(want)))
    return out


def disagreements(parse: Callable[[str], int]) -> list[str]:
    out = []
    for text, want in vectors():
        try:
            got: int | None = parse(text)
        except ValueError:
            got = None
        if got is not None and got > UINT64_MAX:
            got = None  # past 64 bits is out of the grammar, whatever a parser's own bound
        if got != want:
            out.append(f"{text!r}: got {got}, want {'an error' if want is None else want}")
    return out


def test_the_vectors_cover_the_grammar() -> None:
    vs = dict(vectors())
    assert vs["64KiB"] == 65536 and vs["4MiB"] == 4 << 20 and vs["65536"] == 65536
    assert all(vs[bad] is None for bad in ("64KB", "1.5MiB", "64 KiB", "", "-64", "1TiB"))


def test_the_python_parser_passes_the_vectors() -> None:
    problems = disagreements(parse_size)
    assert not problems, "py_client.sizes.parse_size differs from proto/testdata/size.vectors:\n" + "\n".join(problems)
