"""The one size grammar (py_client/sizes.py, docs/DESIGN.md "Size grammar"), and that py_client's CLI,
loadgen's options and the experiment TOML all go through it."""

from __future__ import annotations

import pytest

import loadgen
from py_client import cli
from py_client.sizes import parse_size
from xferbench import config as xe


@pytest.mark.parametrize(("text", "want"), [
    ("0", 0), ("512", 512), ("65536", 65536), ("64KiB", 65536), ("1MiB", 1 << 20),
    ("4MiB", 4 << 20), ("1GiB", 1 << 30), (4096, 4096),
])
def test_accepted(text: str | int, want: int) -> None:
    assert parse_size(text) == want


@pytest.mark.parametrize(
    "text", ["", "x", "-1", "1e3", "4KB", "4kb", "2 MiB", "2mib", "1.3KiB", "1.5MiB", "256B", "1.", " 64KiB", True]
)
def test_refused_with_the_grammar_in_the_message(text: str | bool) -> None:
    with pytest.raises(ValueError, match=r"size"):
        parse_size(text)


def test_bounds_name_the_value_and_range() -> None:
    with pytest.raises(ValueError, match=r"chunk '8MiB' = 8388608 bytes is outside 1\.\.4194304"):
        parse_size("8MiB", what="chunk", lo=1, hi=4 << 20)


def test_every_user_of_sizes_shares_the_grammar() -> None:
    # loadgen options
    assert loadgen.option("chunk").parse("64KiB") == 65536
    with pytest.raises(ValueError, match="--xfer-chunk"):
        loadgen.option("chunk").parse("64KB")
    # experiment TOML: server flags and [load]
    exp = xe.parse({"load": {"chunk": "16KiB"},
                    "servers": [{"server": "xferd-go", "flags": {"max-chunk": "2MiB", "memlimit": "256MiB"}}]})
    assert exp.cells[0].flags == {"max-chunk": str(2 << 20), "memlimit": str(256 << 20)}
    assert exp.cells[0].load.chunk == "16KiB"
    with pytest.raises(xe.ExperimentError, match=r"servers\[0\]\.flags\.max-chunk = '2MB'"):
        xe.parse({"servers": [{"server": "xferd-go", "flags": {"max-chunk": "2MB"}}]})
    # py_client's CLI
    args = cli.build_parser().parse_args(["echo", "--target", "grpc://127.0.0.1:1", "--size", "4KiB"])
    assert args.size == 4096
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["echo", "--target", "grpc://127.0.0.1:1", "--size", "4KB"])
