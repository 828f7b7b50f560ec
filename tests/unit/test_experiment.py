"""Experiment schema: every shipped file is valid; invalid files are refused naming the field and what it
accepts; matrices expand and interleave as documented."""

from __future__ import annotations

import tomllib

import pytest

from xferbench import experiment as xe
from xferbench.matrix import schedule

BASE = """
[experiment]
repeats = 2
[[servers]]
server = "xferd-go"
[servers.flags]
pool = ["on", "off"]
[servers.load]
transport = ["grpc", "frame"]
"""


def parse(text: str) -> xe.Experiment:
    return xe.parse(tomllib.loads(text), "t.toml", "t")


@pytest.mark.parametrize("path", xe.shipped(), ids=lambda p: p.stem)
def test_shipped_experiments_are_valid(path) -> None:
    e = xe.load_file(path)
    assert e.cells and e.baseline in [c.name for c in e.cells]


def test_quick_fits_five_minutes() -> None:
    e = xe.load_file("quick")
    assert len(e.cells) == 9 and e.repeats == 2
    assert e.estimated_seconds(per_run_overhead_s=3.5) <= 300
    assert {c.server for c in e.cells} == {"xferd-go", "xferd-c"}


def test_matrix_and_interleaving() -> None:
    e = parse(BASE)
    names = [c.name for c in e.cells]
    assert names == ["go/grpc/pool=on", "go/frame/pool=on", "go/grpc/pool=off", "go/frame/pool=off"]
    order = [(r.cell.name, r.repeat) for r in schedule(e)]
    assert order == [(n, 1) for n in names] + [(n, 2) for n in names]
    c = e.cell("go/frame/pool=off")
    argv = c.server_argv()
    assert "--pool=off" in argv and "--metrics-addr=127.0.0.1:0" in argv


def test_env_axis_and_unset() -> None:
    e = parse("""
[[servers]]
server = "xferd-c"
[servers.env]
MALLOC_ARENA_MAX = ["2", ""]
""")
    assert [c.name for c in e.cells] == ["c/frame/MALLOC_ARENA_MAX=2", "c/frame/MALLOC_ARENA_MAX=default"]
    assert e.cells[1].server_env({"MALLOC_ARENA_MAX": "8", "X": "1"}) == {"X": "1"}
    assert e.cells[0].server_env({})["MALLOC_ARENA_MAX"] == "2"


def test_quick_override() -> None:
    e = parse(BASE + "\n").with_overrides(repeats=3, quick=True)
    assert e.repeats == 3 and e.warmup_s <= 1 and all(c.load.duration_s <= 3 for c in e.cells)


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ('[[servers]]\nserver = "xferd-rust"', ["servers[0].server", "xferd-go | xferd-c"]),
        (
            '[[servers]]\nserver = "xferd-c"\n[servers.flags]\nalloc = "hoard"',
            ["servers[0].flags.alloc", "glibc | jemalloc | tcmalloc | mimalloc | pool"],
        ),
        (
            '[[servers]]\nserver = "xferd-c"\n[servers.flags]\npool = "on"',
            ["servers[0].flags.pool", "allowed: alloc"],
        ),
        ('[[servers]]\nserver = "xferd-go"\n[servers.flags]\ngogc = -5', ["servers[0].flags.gogc", '"off"']),
        (
            '[load]\nprofile = "zigzag"\n[[servers]]\nserver = "xferd-go"',
            ["load.profile", "steady | ramp | step | spike | soak"],
        ),
        ('[load]\nusers = 0\n[[servers]]\nserver = "xferd-go"', ["load.users", "positive integer"]),
        (
            '[load]\nmix = "upload:1,put:2"\n[[servers]]\nserver = "xferd-go"',
            ["load.mix", "upload, download, echo"],
        ),
        ('[load]\nrate = "fast"\n[[servers]]\nserver = "xferd-go"', ["load.rate", "poisson:R"]),
        ('[load]\nchunk = "big"\n[[servers]]\nserver = "xferd-go"', ["load.chunk", "64KiB"]),
        ('[load]\ncolour = 1\n[[servers]]\nserver = "xferd-go"', ["load.colour", "allowed: users"]),
        (
            '[[servers]]\nserver = "xferd-c"\n[servers.load]\ntransport = "grpc"',
            ["servers[0].load.transport", "frame"],
        ),
        ('[experiment]\nrepeats = 0\n[[servers]]\nserver = "xferd-go"', ["experiment.repeats", ">= 1"]),
        (
            '[experiment]\nbaseline = "nope"\n[[servers]]\nserver = "xferd-go"',
            ["experiment.baseline", "go/grpc"],
        ),
        ("[experiment]\nrepeats = 2", ["servers: required"]),
        # Checked by loadgen's own option parsers, so refused here exactly when Locust would refuse them:
        ('[load]\nsizes = "wat"\n[[servers]]\nserver = "xferd-go"', ["load.sizes", "lognormal:"]),
        ('[load]\nchunk = "8MiB"\n[[servers]]\nserver = "xferd-go"', ["load.chunk", "4MiB"]),
        ('[pinning]\nserver = [99]\n[[servers]]\nserver = "xferd-go"', ["pinning.server", "CPU numbers"]),
        ('[[servers]]\nserver = "xferd-go"\n[[servers]]\nserver = "xferd-go"', ["two cells", "go/grpc"]),
        ('[[servers]]\nserver = "xferd-go"\nname = "x-{nope}"', ["servers[0].name", "unknown field"]),
        ('[[servers]]\nserver = "xferd-go"\n[servers.env]\nGOGC = true', ["servers[0].env.GOGC"]),
        ('[bogus]\n[[servers]]\nserver = "xferd-go"', ["(top level).bogus", "allowed: experiment"]),
    ],
)
def test_schema_errors_name_field_and_allowed(text: str, needles: list[str]) -> None:
    with pytest.raises(xe.ExperimentError) as ei:
        parse(text)
    msg = str(ei.value)
    assert msg.startswith("t.toml: ")
    for n in needles:
        assert n in msg, msg


def test_bad_toml_and_missing_file(tmp_path) -> None:
    p = tmp_path / "bad.toml"
    p.write_text("[experiment\n")
    with pytest.raises(xe.ExperimentError, match="not valid TOML"):
        xe.load_file(p)
    with pytest.raises(xe.ExperimentError, match="No such file"):
        xe.load_file(tmp_path / "missing.toml")


def test_sizes() -> None:
    assert xe.parse_size("64KiB") == 65536 and xe.parse_size("4MiB") == 4 << 20 and xe.parse_size(10) == 10
    for bad in ("", "-1", "1XB", 0):
        with pytest.raises(ValueError):
            xe.parse_size(bad)
