"""CPU attribution on real runs (xferbench/profile/): the runner samples the real server during its measured
window — xferd-c with perf, xferd-go through its pprof endpoint — and each row carries the shares of its
CPU samples per bucket, with the folded stacks and a flame graph in the run folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.runner.conftest import experiment_file, one_round
from xferbench import runner
from xferbench.profile.classify import BUCKETS, classify, parse_folded, split_frame
from xferbench.row import RunRow

POOL_FUNCTIONS = {"pool_alloc", "pool_free", "pool_thread_flush", "cache_get", "local_put", "drain_remote",
                  "flush_batch", "size_class", "class_block", "class_cap"}


def _run(tmp_path: Path, text: str) -> list[RunRow]:
    exp = experiment_file(tmp_path / "exp.toml", text)
    assert exp.profile
    res = runner.sweep(exp, tmp_path / "run")
    for r in res.rows:
        assert r.ok, (r.cell, r.error, r.stderr_tail)
    return res.rows


def _check_profile(row: RunRow, run_dir: Path) -> dict[str, float]:
    assert row.cpu_profile is not None, row.cell
    shares = row.cpu_profile["shares"]
    assert set(shares) == set(BUCKETS)
    assert sum(shares.values()) == pytest.approx(1.0, abs=0.01)
    assert row.cpu_profile["samples"] >= 100, row.cpu_profile  # a few seconds of a busy server at 999 Hz / 100 Hz
    assert row.flamegraph is not None and (run_dir / row.flamegraph).stat().st_size > 0
    return dict(shares)


def _folded(run_dir: Path, row: RunRow) -> dict[str, int]:
    assert row.flamegraph is not None
    stem = Path(row.flamegraph).name.rsplit(".", 1)[0]
    return parse_folded((run_dir / "profiles" / f"{stem}.folded").read_text())


def head(name: str) -> str:
    """One profiled round, each cell alone, 1 s warm-up; [load] open for the test's keys."""
    return one_round(name).replace("[load]", "profile = true\nwarmup_s = 1\n[load]", 1)


C_HEAD = head("profile-c") + 'users = 4\nspawn_rate = 4\nduration_s = 3\nmix = "echo:1"\n'


@pytest.mark.timeout(300)
def test_xferd_c_glibc_small_echo_has_an_allocator_share(tmp_path: Path) -> None:
    text = C_HEAD + (
        '[[servers]]\nserver = "xferd-c"\n[servers.flags]\nalloc = "glibc"\n')
    (row,) = _run(tmp_path, text)
    shares = _check_profile(row, tmp_path / "run")
    assert shares["allocator"] > 0, shares
    assert shares["syscall+net"] > 0, shares  # an echo server's time is mostly in its sockets
    svg = (tmp_path / "run" / (row.flamegraph or "")).read_text()
    assert svg.lstrip().startswith("<?xml") and "</svg>" in svg


@pytest.mark.timeout(300)
def test_xferd_c_pool_functions_are_allocator(tmp_path: Path) -> None:
    text = C_HEAD.replace('mix = "echo:1"', (
        'mix = "upload:1,echo:1"\nsizes = "64KiB"\nchunk = "4KiB"\nverify = "off"')) + (
        '[[servers]]\nserver = "xferd-c"\n[servers.flags]\nalloc = "pool"\n')
    (row,) = _run(tmp_path, text)
    _check_profile(row, tmp_path / "run")
    folded = _folded(tmp_path / "run", row)
    in_pool = {s: n for s, n in folded.items() if split_frame(s.split(";")[-1])[0] in POOL_FUNCTIONS}
    assert in_pool, "no sample's innermost frame is a pool.c function: " + ", ".join(sorted(folded)[:5])
    for stack in in_pool:
        assert classify(stack.split(";")) == "allocator", stack


@pytest.mark.timeout(400)
def test_xferd_go_pool_off_spends_more_in_allocator_and_gc(tmp_path: Path) -> None:
    """1 MiB uploads: without its pool xferd-go allocates every chunk buffer anew (235x the bytes per call,
    BENCHMARKS.md), a large effect; 4 s windows at pprof's 100 Hz give a few hundred samples each."""
    text = (head("profile-go")
            + 'users = 4\nspawn_rate = 4\nduration_s = 4\nmix = "upload:1"\nsizes = "1MiB"\nchunk = "1MiB"\n'
            '[[servers]]\nserver = "xferd-go"\n[servers.flags]\npool = ["on", "off"]\n')
    rows = _run(tmp_path, text)
    by_pool = {r.axes["pool"]: _check_profile(r, tmp_path / "run") for r in rows}
    on, off = (by_pool[k]["allocator"] + by_pool[k]["gc"] for k in ("on", "off"))
    assert off > on, by_pool
