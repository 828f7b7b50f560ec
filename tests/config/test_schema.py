"""Experiment schema: every shipped file is valid; invalid files are refused naming the field and what it
accepts; matrices expand and interleave as documented."""

from __future__ import annotations

import os
import tomllib

import pytest

from py_client.sizes import parse_size
from xferbench import config as xe
from xferbench.analysis import stats
from xferbench.config import command
from xferbench.run.matrix import schedule

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


def refused(text: str, needles: list[str]) -> None:
    """The experiment is refused with a message that names the file and contains every needle."""
    with pytest.raises(xe.ExperimentError) as ei:
        parse(text)
    msg = str(ei.value)
    assert msg.startswith("t.toml: ")
    for n in needles:
        assert n in msg, msg


@pytest.mark.parametrize("path", xe.shipped(), ids=lambda p: p.stem)
def test_shipped_experiments_are_valid(path) -> None:
    e = xe.load_file(path)
    assert e.cells and e.baseline in [c.name for c in e.cells]


def test_quick_fits_five_minutes() -> None:
    e = xe.load_file("quick")
    assert e.repeats >= stats.MIN_REPEATS  # its report has intervals and verdicts
    assert e.estimated_seconds(per_run_overhead_s=3.5) <= 300
    assert {c.server for c in e.cells} == {"xferd-go", "xferd-c"}


def test_matrix_and_interleaving() -> None:
    e = parse(BASE)
    names = [c.name for c in e.cells]
    assert names == ["go/grpc/pool=on", "go/frame/pool=on", "go/grpc/pool=off", "go/frame/pool=off"]
    runs = schedule(e)
    # Rounds: every cell once in round 1, then every cell once in round 2 (the order within a round is
    # xferbench.run.matrix's business).
    assert [r.order for r in runs] == list(range(len(runs)))
    assert [r.repeat for r in runs] == [1] * 4 + [2] * 4
    assert sorted(r.cell.name for r in runs[:4]) == sorted(names) == sorted(r.cell.name for r in runs[4:])
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
            ["load.profile", "steady, ramp, step, spike, soak"],
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
    refused(text, needles)


def test_bad_toml_and_missing_file(tmp_path) -> None:
    p = tmp_path / "bad.toml"
    p.write_text("[experiment\n")
    with pytest.raises(xe.ExperimentError, match="not valid TOML"):
        xe.load_file(p)
    with pytest.raises(xe.ExperimentError, match="No such file"):
        xe.load_file(tmp_path / "missing.toml")


def test_sizes() -> None:
    # The one size grammar (py_client/sizes.py); server size flags take a positive size.
    assert parse_size("64KiB", lo=1) == 65536 and parse_size("4MiB", lo=1) == 4 << 20 and parse_size(10, lo=1) == 10
    for bad in ("", "-1", "1XB", 0):
        with pytest.raises(ValueError):
            parse_size(bad, lo=1)


def test_seconds() -> None:
    assert xe.parse_seconds("20ms") == pytest.approx(0.02)
    assert xe.parse_seconds("500us") == pytest.approx(5e-4) and xe.parse_seconds("1m30s") == 90.0
    assert xe.parse_seconds("1.5s") == 1.5 and xe.parse_seconds("2") == 2.0
    assert xe.parse_seconds(2) == 2.0 and xe.parse_seconds(0.02) == 0.02
    # the one duration grammar (proto/testdata/duration.vectors): one spelling per unit, no space, positive here
    for bad in ("", "fast", "-1ms", "0", "20 min", " 20ms", "500µs", "1s1m", 0, -1, True):
        with pytest.raises(ValueError):
            xe.parse_seconds(bad)


# --- [experiment] aa and alpha ------------------------------------------------------------------------


def test_aa_adds_a_copy_of_the_baseline_right_after_it() -> None:
    e = parse(BASE.replace("repeats = 2", 'repeats = 2\naa = true\nbaseline = "go/frame/pool=on"'))
    names = [c.name for c in e.cells]
    assert names == [
        "go/grpc/pool=on",
        "go/frame/pool=on",
        "go/frame/pool=on (A/A)",
        "go/grpc/pool=off",
        "go/frame/pool=off",
    ]
    assert e.aa and e.aa_cell == "go/frame/pool=on (A/A)" == e.baseline + xe.AA_SUFFIX
    base, copy = e.cell(e.baseline), e.cell(e.aa_cell)
    assert copy.server_argv() == base.server_argv() and copy.server_env({}) == base.server_env({})
    assert (copy.load, copy.axes, copy.config()) == (base.load, base.axes, base.config())
    assert copy.slug != base.slug
    # Every round runs it, like any other cell.
    runs = [r for r in schedule(e) if r.cell.name == e.aa_cell]
    assert [r.repeat for r in runs] == [1, 2]


def test_aa_defaults_to_off_and_takes_only_booleans() -> None:
    e = parse(BASE)
    assert not e.aa and e.aa_cell is None and len(e.cells) == 4
    default_base = parse(BASE.replace("repeats = 2", "repeats = 2\naa = true"))
    assert [c.name for c in default_base.cells][:2] == ["go/grpc/pool=on", "go/grpc/pool=on (A/A)"]
    with pytest.raises(xe.ExperimentError, match=r"^t\.toml: experiment\.aa = 'yes': expected true or false"):
        parse(BASE.replace("repeats = 2", 'repeats = 2\naa = "yes"'))


@pytest.mark.parametrize(("value", "expected"), [(None, 0.05), ("0.01", 0.01), ("0.1", 0.1), ("0.25", 0.25)])
def test_alpha(value: str | None, expected: float) -> None:
    text = BASE if value is None else BASE.replace("repeats = 2", f"repeats = 2\nalpha = {value}")
    assert parse(text).alpha == expected


@pytest.mark.parametrize("value", ["0", "0.5", "1", "-0.05", '"0.05"', "true"])
def test_alpha_refused(value: str) -> None:
    with pytest.raises(xe.ExperimentError) as ei:
        parse(BASE.replace("repeats = 2", f"repeats = 2\nalpha = {value}"))
    assert str(ei.value).startswith("t.toml: experiment.alpha = ") and "between 0 and 0.5" in str(ei.value)


# --- [pinning] ----------------------------------------------------------------------------------------

GO = '[[servers]]\nserver = "xferd-go"\n'


@pytest.fixture
def cpus(monkeypatch: pytest.MonkeyPatch):
    """Pretend this process may run on the given CPUs."""

    def set_cpus(*c: int) -> None:
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(c))

    return set_cpus


@pytest.mark.parametrize(
    ("affinity", "server", "generator"),
    [
        ((0, 1), (0,), (1,)),
        ((0, 1, 2), (0,), (1, 2)),
        (tuple(range(8)), (0, 1, 2, 3), (4, 5, 6, 7)),
        ((9, 2, 7, 5), (2, 5), (7, 9)),  # the CPUs this process may use, not 0..n-1
    ],
)
def test_auto_pinning_is_disjoint_halves_of_the_affinity(cpus, affinity, server, generator) -> None:
    cpus(*affinity)
    for text in (GO, '[pinning]\nmode = "auto"\n' + GO):  # auto is the default
        p = parse(text).pinning
        assert (p.mode, p.server, p.generator) == ("auto", server, generator)
        assert "auto" in p.describe()


def test_auto_pinning_on_this_machine() -> None:
    p = parse(GO).pinning
    mine = os.sched_getaffinity(0)
    if len(mine) < 2:
        assert (p.mode, p.server, p.generator) == ("none", (), ())
        return
    assert p.mode == "auto" and p.server and p.generator
    assert set(p.server).isdisjoint(p.generator) and set(p.server) | set(p.generator) == mine
    assert max(p.server) < min(p.generator) and abs(len(p.server) - len(p.generator)) <= 1


def test_auto_pinning_with_one_cpu_pins_nothing(cpus) -> None:
    cpus(3)
    p = parse(GO).pinning
    assert (p.mode, p.server, p.generator) == ("none", (), ()) and p.describe() == "not pinned"


def test_manual_and_no_pinning(cpus) -> None:
    cpus(0, 1, 2, 3)
    p = parse("[pinning]\nserver = [0, 1]\ngenerator = [3]\n" + GO).pinning  # explicit sets imply manual
    assert (p.mode, p.server, p.generator) == ("manual", (0, 1), (3,))
    assert p.describe() == "server on CPUs 0,1, load generator on CPUs 3 (manual)"
    p = parse('[pinning]\nmode = "manual"\nserver = [2]\n' + GO).pinning
    assert (p.mode, p.server, p.generator) == ("manual", (2,), ())
    p = parse('[pinning]\nmode = "none"\n' + GO).pinning
    assert (p.mode, p.server, p.generator) == ("none", (), ()) and p.describe() == "not pinned"


@pytest.mark.parametrize(
    ("pinning", "needles"),
    [
        ("server = [0, 1]\ngenerator = [1, 2]", ["pinning: server [0, 1] and generator [1, 2] share CPUs"]),
        ('mode = "manual"\nserver = [2]\ngenerator = [2]', ["share CPUs"]),
        ('mode = "auto"\nserver = [0]', ["pinning", 'mode = "auto"', "manual"]),
        ('mode = "fast"', ["pinning.mode = 'fast'", "auto | manual | none"]),
        ("server = [4]", ["pinning.server = [4]", "CPU numbers from [0, 1, 2, 3]"]),
        ("generator = []", ["pinning.generator = []", "non-empty list"]),
        ('server = "0-1"', ["pinning.server = '0-1'"]),
        ("server = [true]", ["pinning.server"]),
        ("cpus = [0]", ["pinning.cpus: unknown key", "allowed: server, generator, mode"]),
    ],
)
def test_pinning_errors(cpus, pinning: str, needles: list[str]) -> None:
    cpus(0, 1, 2, 3)
    refused(f"[pinning]\n{pinning}\n" + GO, needles)


# --- [load] mode --------------------------------------------------------------------------------------


def test_load_mode_resolves_per_cell() -> None:
    e = parse(
        "[load]\nusers = 4\n"
        + GO
        + 'label = "closed"\n'
        + GO
        + 'label = "open"\n[servers.load]\nrate = "poisson:150"\n'
        + GO
        + 'label = "cap"\n[servers.load]\nmode = "capacity"\nrate = "100"\nslo_p99 = "20ms"\nslo_failures = 0.02\n'
    )
    modes = {c.name: c.load.mode for c in e.cells}
    assert modes == {"closed/grpc": "closed", "open/grpc": "open", "cap/grpc": "capacity"}
    cap = e.cell("cap/grpc")
    assert cap.load.slo_p99 == pytest.approx(0.02) and cap.load.slo_failures == 0.02
    assert cap.config()["load"]["mode"] == "capacity" and cap.config()["load"]["slo_p99"] == pytest.approx(0.02)
    assert e.cell("closed/grpc").load.slo_failures == 0.01 and e.cell("closed/grpc").load.slo_p99 is None


def test_load_mode_axis_names_cells() -> None:
    e = parse('[load]\nrate = "200"\nslo_p99 = "5ms"\n' + GO + '[servers.load]\nmode = ["open", "capacity"]\n')
    assert [(c.name, c.load.mode) for c in e.cells] == [("go/grpc/mode=open", "open"), ("go/grpc/mode=capacity", "capacity")]


@pytest.mark.parametrize(
    ("load", "needles"),
    [
        ('mode = "open"', ['load.mode = "open"', "load.rate"]),
        ('mode = "closed"\nrate = "100"', ['load.mode = "closed"', "load.rate = '100'"]),
        ('mode = "capacity"\nrate = "100"', ['load.mode = "capacity"', "load.slo_p99"]),
        ('mode = "capacity"\nslo_p99 = "20ms"', ['load.mode = "capacity"', "load.rate"]),
        ('mode = "burst"', ["load.mode = 'burst'", "open | closed | capacity"]),
        ('slo_p99 = "soon"', ["load.slo_p99 = 'soon'", '"20ms"']),
        ("slo_p99 = 0", ["load.slo_p99 = 0"]),
        ("slo_failures = 1.5", ["load.slo_failures = 1.5", "0 <= x < 1"]),
        ("slo_failures = -0.1", ["load.slo_failures"]),
        ('slo_failures = "1%"', ["load.slo_failures"]),
    ],
)
def test_load_mode_errors_name_the_field(load: str, needles: list[str]) -> None:
    refused(f"[load]\n{load}\n" + GO, needles)


def test_load_mode_error_in_a_group_names_the_group() -> None:
    with pytest.raises(xe.ExperimentError) as ei:
        parse(GO + '[servers.load]\nmode = "closed"\n' + GO + 'label = "b"\n[servers.load]\nmode = "open"\n')
    msg = str(ei.value)
    assert "servers[1]" in msg and 'load.mode = "open" needs load.rate' in msg, msg


def test_adaptive_gogc_fits_six_minutes_with_intervals() -> None:
    """experiments/adaptive-gogc.toml: adaptive against static 50/100/200 under a spike, with verdicts."""
    e = xe.load_file("adaptive-gogc")
    assert e.repeats >= stats.MIN_REPEATS
    assert e.estimated_seconds(per_run_overhead_s=3.5) <= 360
    assert {c.flags["gogc"] for c in e.cells} == {"adaptive", "50", "100", "200"}
    assert {c.load.profile for c in e.cells} == {"spike"}


def test_gogc_adaptive_and_its_parameters_are_server_flags() -> None:
    e = parse('[[servers]]\nserver = "xferd-go"\n[servers.flags]\ngogc = "adaptive"\ngogc-window = "3s"\n'
              'gogc-interval = "500ms"\ngogc-min = 20\ngogc-max = 150\n')
    assert e.cells[0].server_argv()[-5:] == ["--gogc=adaptive", "--gogc-window=3000ms", "--gogc-interval=500ms",
                                             "--gogc-min=20", "--gogc-max=150"]
    refused('[[servers]]\nserver = "xferd-go"\n[servers.flags]\ngogc = "adaptiv"',
            ["servers[0].flags.gogc", '"adaptive"'])


GO_COMMAND = '[[servers]]\nserver = "command"\ncommand = ["build/bin/xferd-go", "--grpc-addr", "127.0.0.1:{port}"]\n'


def test_a_size_axis_names_its_cells_as_the_file_spells_it() -> None:
    """gomemlimit = ["off", "24MiB"]: the cell is named gomemlimit=24MiB (not the byte count), the process is given
    the checked value, and a baseline is accepted in the file's spelling and in the checked one."""
    axis = 'gomemlimit = ["off", "24MiB"]\n'
    exp = parse('[experiment]\nbaseline = "cmd/grpc/gomemlimit=24MiB"\naa = true\n' + GO_COMMAND + axis)
    assert [c.name for c in exp.cells] == ["cmd/grpc/gomemlimit=off", "cmd/grpc/gomemlimit=24MiB",
                                           "cmd/grpc/gomemlimit=24MiB (A/A)"]
    assert exp.baseline == "cmd/grpc/gomemlimit=24MiB"
    cell = exp.cell("cmd/grpc/gomemlimit=24MiB")
    assert cell.axes == {"gomemlimit": "24MiB"} and cell.flags == {"gomemlimit": "25165824"}
    assert command.runtime_env(cell.flags, {})["GOMEMLIMIT"] == "25165824"
    canonical = parse('[experiment]\nbaseline = "cmd/grpc/gomemlimit=25165824"\n' + GO_COMMAND + axis)
    assert canonical.baseline == "cmd/grpc/gomemlimit=24MiB"
    refused('[experiment]\nbaseline = "cmd/grpc/gomemlimit=1GiB"\n' + GO_COMMAND + axis,
            ["experiment.baseline = 'cmd/grpc/gomemlimit=1GiB'", "cmd/grpc/gomemlimit=24MiB"])


def test_xferd_go_memlimit_and_a_duration_keep_the_files_spelling() -> None:
    e = parse('[experiment]\nbaseline = "go/grpc/memlimit=268435456/drain-timeout=2000ms"\n' + GO
              + '[servers.flags]\nmemlimit = ["off", "256MiB"]\ndrain-timeout = ["2s", "1m"]\n')
    assert [c.name for c in e.cells] == [
        "go/grpc/memlimit=off/drain-timeout=2s", "go/grpc/memlimit=off/drain-timeout=1m",
        "go/grpc/memlimit=256MiB/drain-timeout=2s", "go/grpc/memlimit=256MiB/drain-timeout=1m",
    ]
    assert e.baseline == "go/grpc/memlimit=256MiB/drain-timeout=2s"  # written as the checked values spell it
    argv = e.cell("go/grpc/memlimit=256MiB/drain-timeout=1m").server_argv()
    assert argv[-2:] == ["--memlimit=268435456", "--drain-timeout=60000ms"]
    templated = parse(GO + 'name = "go-{memlimit}"\n[servers.flags]\nmemlimit = ["off", "256MiB"]\n')
    assert [c.name for c in templated.cells] == ["go-off", "go-256MiB"]
