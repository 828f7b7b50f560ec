"""CPU attribution on real runs (xferbench/measure/profile/): the runner samples the real server during its measured
window — xferd-c with perf, xferd-go through its pprof endpoint — and each row carries the shares of its
CPU samples per bucket, with the folded stacks and a flame graph in the run folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.runs import experiment_file, one_round
from xferbench.analysis.row import RunRow
from xferbench.measure.profile.classify import BUCKETS, classify, parse_folded, split_frame
from xferbench.run import sweep

POOL_FUNCTIONS = {"pool_alloc", "pool_free", "pool_thread_flush", "cache_get", "local_put", "drain_remote",
                  "flush_batch", "size_class", "class_block", "class_cap"}


def _run(tmp_path: Path, text: str) -> list[RunRow]:
    exp = experiment_file(tmp_path / "exp.toml", text)
    assert exp.profile
    res = sweep.sweep(exp, tmp_path / "run")
    for r in res.rows:
        assert r.ok, (r.cell, r.error, r.stderr_tail)
    return res.rows


def _check_profile(row: RunRow, run_dir: Path, min_samples: int) -> dict[str, float]:
    assert row.cpu_profile is not None, row.cell
    shares = row.cpu_profile["shares"]
    assert set(shares) == set(BUCKETS)
    assert sum(shares.values()) == pytest.approx(1.0, abs=0.01)
    assert row.cpu_profile["samples"] >= min_samples, row.cpu_profile
    assert row.flamegraph is not None and (run_dir / row.flamegraph).stat().st_size > 0
    return dict(shares)


def _folded(run_dir: Path, row: RunRow) -> dict[str, int]:
    assert row.flamegraph is not None
    stem = Path(row.flamegraph).name.rsplit(".", 1)[0]
    return parse_folded((run_dir / "profiles" / f"{stem}.folded").read_text())


def head(name: str, repeats: int = 1) -> str:
    """Profiled rounds, each cell alone, 1 s warm-up; [load] open for the test's keys."""
    return one_round(name).replace("repeats = 1", f"repeats = {repeats}").replace(
        "[load]", "profile = true\nwarmup_s = 1\n[load]", 1)


# Small echo calls (256 B) against xferd-c: its allocator is about 1% of its CPU there, a few samples a
# window on this busy machine, so two rounds of 5 s keep "none at all" out of reach.
C_LOAD = 'users = 8\nspawn_rate = 8\nduration_s = 5\n'
C_HEAD = head("profile-c", repeats=2) + C_LOAD + 'mix = "echo:1"\n'


def _innermost_user_frame(stack: str) -> str:
    """The symbol of a stack's innermost frame outside the kernel (perf's kernel frames sit below it)."""
    for frame in reversed(stack.split(";")):
        sym, obj = split_frame(frame)
        if not obj.startswith("[") and sym != "[unknown]":
            return sym
    return ""


def _names_xferd_c(stack: str) -> bool:
    """Whether a stack has a named frame of the xferd-c binary (one of its own functions)."""
    return any(obj == "xferd-c" and sym != "[unknown]" for sym, obj in map(split_frame, stack.split(";")))


# In make test-slow (20 s: two profiled rounds): make test keeps perf's path on xferd-c with the pool test below.
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_xferd_c_glibc_small_echo_has_an_allocator_share(tmp_path: Path) -> None:
    text = C_HEAD + '[[servers]]\nserver = "xferd-c"\n[servers.flags]\nalloc = "glibc"\n'
    rows = _run(tmp_path, text)
    shares = [_check_profile(r, tmp_path / "run", min_samples=50) for r in rows]
    assert sum(s["allocator"] for s in shares) > 0, shares
    assert all(s["syscall+net"] > 0 for s in shares), shares  # an echo server's time is mostly its sockets
    for graph in (rows[0].flamegraph or "", "profiles/c_frame.svg"):  # a run's, and the cell's of both runs
        svg = (tmp_path / "run" / graph).read_text()
        assert svg.lstrip().startswith("<?xml") and "</svg>" in svg, graph


@pytest.mark.timeout(300)
def test_xferd_c_pool_functions_are_allocator(tmp_path: Path) -> None:
    """One round: 64 KiB uploads in 1 KiB chunks keep pool.c busy, about 20 samples a 5 s window whose innermost
    frame outside the kernel is a pool function (15 to 27 in four windows measured here, of 1,260 to 2,680)."""
    text = head("profile-c") + C_LOAD + 'mix = "upload:1,echo:1"\nsizes = "64KiB"\nchunk = "1KiB"\n' + (
        '[[servers]]\nserver = "xferd-c"\n[servers.flags]\nalloc = "pool"\n')
    rows = _run(tmp_path, text)
    assert len(rows) == 1
    in_pool: dict[str, int] = {}
    named = total = 0
    for row in rows:
        _check_profile(row, tmp_path / "run", min_samples=50)
        for stack, n in _folded(tmp_path / "run", row).items():
            if _innermost_user_frame(stack) in POOL_FUNCTIONS:
                in_pool[stack] = n
            total += n
            named += n if _names_xferd_c(stack) else 0
    assert in_pool, "no sample's innermost frame outside the kernel is a pool.c function"
    for stack in in_pool:
        assert classify(stack.split(";")) == "allocator", stack
    # The stacks reach xferd-c's own functions (perf.CALL_GRAPH): 99.95% and 100% of the samples in the windows
    # measured here with DWARF unwinding, against 47% with frame pointers and 8.6% before xferd-c had them.
    assert named / total >= 0.9, f"{named} of {total} samples have a frame of xferd-c"


@pytest.mark.slow  # two 8 s windows; make test profiles xferd-c
@pytest.mark.timeout(400)
def test_xferd_go_pool_off_spends_more_in_allocator_and_gc(tmp_path: Path) -> None:
    """1 MiB uploads: without its pool xferd-go allocates every chunk buffer anew (235x the bytes per call,
    BENCHMARKS.md), a large effect (about 40% against 20% of its samples here). pprof samples at 100 Hz and
    the server is at a third of a core, so 8 s windows give each share a few hundred samples."""
    text = (head("profile-go")
            + 'users = 4\nspawn_rate = 4\nduration_s = 8\nmix = "upload:1"\nsizes = "1MiB"\nchunk = "1MiB"\n'
            '[[servers]]\nserver = "xferd-go"\n[servers.flags]\npool = ["on", "off"]\n')
    rows = _run(tmp_path, text)
    by_pool = {r.axes["pool"]: _check_profile(r, tmp_path / "run", min_samples=50) for r in rows}
    on, off = (by_pool[k]["allocator"] + by_pool[k]["gc"] for k in ("on", "off"))
    assert off > on, by_pool
