"""A baseline per [[servers]] table: `baseline` as a list names one cell of every table, each cell is judged
against its own table's, a duet pairs it with that one, and a list that misses a table is refused
(xferbench/config/baselines.py)."""

from __future__ import annotations

import tomllib

import pytest

from xferbench import config as xe
from xferbench.run.matrix import schedule

TWO_TABLES = """
[experiment]
repeats = 2
duet = {duet}
aa = {aa}
baseline = {baseline}

[load]
rate = "50"

[[servers]]
server = "xferd-c"
label = "small"
[servers.flags]
alloc = ["glibc", "jemalloc"]
[servers.load]
transport = "frame"

[[servers]]
server = "xferd-go"
label = "big"
[servers.flags]
gogc = [100, 400]
"""
LIST = '["small/frame/alloc=glibc", "big/grpc/gogc=100"]'


def parse(baseline: str = LIST, duet: bool = False, aa: bool = False) -> xe.Experiment:
    text = TWO_TABLES.format(baseline=baseline, duet=str(duet).lower(), aa=str(aa).lower())
    return xe.parse(tomllib.loads(text), "t.toml", "t")


def test_each_cell_is_judged_against_its_own_tables_baseline() -> None:
    exp = parse()
    assert exp.baseline == "small/frame/alloc=glibc"  # the first table's, what an A/A check copies
    assert exp.baseline_of("small/frame/alloc=jemalloc") == "small/frame/alloc=glibc"
    assert exp.baseline_of("big/grpc/gogc=400") == "big/grpc/gogc=100"
    assert exp.baseline_cells == {"small/frame/alloc=glibc", "big/grpc/gogc=100"}


def test_one_baseline_stays_every_cells() -> None:
    exp = parse('"big/grpc/gogc=400"')
    assert exp.baselines == {}
    assert exp.baseline_of("small/frame/alloc=jemalloc") == "big/grpc/gogc=400"


def test_a_duet_runs_each_cell_beside_its_own_tables_baseline() -> None:
    exp = parse(duet=True)
    for r in schedule(exp):
        pair = [x.cell.name for x in schedule(exp) if x.pair == r.pair]
        assert len(pair) == 2, pair
        other = next(n for n in pair if n not in exp.baseline_cells)
        assert exp.baseline_of(other) in pair, pair
    # two cells beside their baselines a round, and no baseline beside another
    assert len(schedule(exp)) == 2 * 2 * 2


def test_the_aa_copy_is_of_the_first_tables_baseline() -> None:
    exp = parse(aa=True)
    assert exp.aa_cell == "small/frame/alloc=glibc (A/A)"
    assert exp.baseline_of(exp.aa_cell) == "small/frame/alloc=glibc"


@pytest.mark.parametrize(
    ("baseline", "needles"),
    [
        ('["small/frame/alloc=glibc"]', ["names none of its cells", "servers[1]", "big/grpc/gogc=100"]),
        ('["small/frame/alloc=glibc", "small/frame/alloc=jemalloc", "big/grpc/gogc=100"]',
         ["names 2 of its cells", "servers[0]"]),
        ('["small/frame/alloc=glibc", "big/grpc/gogc=9"]',
         ["experiment.baseline[1] = 'big/grpc/gogc=9'", "expected one of"]),
        ("[]", ["expected a cell's name, or a list of one cell of each [[servers]] table"]),
        ("7", ["experiment.baseline = 7"]),
    ],
)
def test_a_list_that_misses_or_doubles_a_table_is_refused(baseline: str, needles: list[str]) -> None:
    with pytest.raises(xe.ExperimentError) as ei:
        parse(baseline)
    for n in needles:
        assert n in str(ei.value), str(ei.value)


def test_a_duet_with_a_table_of_its_baseline_alone_is_refused() -> None:
    alone = LIST.replace("big/grpc/gogc=100", "big/grpc")
    text = TWO_TABLES.format(baseline=alone, duet="true", aa="false").replace("gogc = [100, 400]", "gogc = [100]")
    with pytest.raises(xe.ExperimentError, match="its table's only cell, so no duet would run it"):
        xe.parse(tomllib.loads(text), "t.toml", "t")
    # by default such a run is simply not a duet
    auto = text.replace("duet = true\n", "")
    assert not xe.parse(tomllib.loads(auto), "t.toml", "t").duet


def test_tls_experiment_judges_each_workload_against_its_plaintext_cell() -> None:
    exp = xe.load_file("experiments/tls.toml")
    bases = exp.baseline_cells
    assert len(bases) == 4 and all("tls=off" in b for b in bases), bases
    for c in exp.cells:
        assert c.name.split("/")[0] == exp.baseline_of(c.name).split("/")[0], c.name
