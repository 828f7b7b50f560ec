"""CPU attribution of a command server (`server = "command"` with `profile = true`) on real processes: the
server started as the runner starts it (xferbench/run/commandserver.py), sampled by the profiler its cell chose
(xferbench/measure/profile: start_server) while a gRPC client loads it, its samples put in buckets. A Python gRPC
server under a preloaded jemalloc (perf, DWARF), xferd-go with a pprof address (pprof) and without one
(perf, frame pointers), a pprof address that serves no profile, and one profiled sweep."""

from __future__ import annotations

import sys
import threading
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.support.runs import experiment_file
from xfer.v1 import file_transfer_pb2 as pb
from xfer.v1 import file_transfer_pb2_grpc as pb_grpc
from xferbench import config as xe
from xferbench.config.command import Command
from xferbench.measure import profile
from xferbench.measure.profile.classify import parse_folded
from xferbench.run import commandserver, sweep
from xferbench.run.commandserver import CommandServer

ROOT = Path(__file__).resolve().parents[2]
ECHO_SERVER = ROOT / "tests" / "support" / "echo_grpc.py"
WINDOW_S = 3.0
PAYLOAD = b"x" * (64 << 10)  # large enough that every copy of it is a malloc, not Python's small-object pool

PY_JEMALLOC = f"""
command = ["{sys.executable}", "{ECHO_SERVER}", "{{port}}"]
ready = {{ log = "^serving on [0-9]+$" }}
alloc = "jemalloc"
[servers.env]
PYTHONPATH = "{ROOT}"
"""
GO = """
command = ["build/bin/xferd-go", "--grpc-addr", "127.0.0.1:{port}", "--frame-addr", "127.0.0.1:0",
           "--metrics-addr", "127.0.0.1:{metrics_port}"]
"""


def _cell(entry: str) -> xe.Cell:
    text = '[experiment]\nname = "p"\nprofile = true\n[load]\ntransport = "grpc"\n[[servers]]\nserver = "command"\n'
    exp = xe.parse(tomllib.loads(text + entry), "p.toml")
    return exp.cells[0]


@contextmanager
def _running(cell: xe.Cell, run_dir: Path) -> Iterator[CommandServer]:
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    server = commandserver.start(cell, run_dir / "logs" / "server.log", None)
    try:
        yield server
    finally:
        server.stop()


def _profiled_window(cell: xe.Cell, server: CommandServer, run_dir: Path) -> tuple[dict[str, Any], dict[str, int]]:
    """Echo calls from two client threads for the window while the cell's profiler samples the server; the
    row's cpu_profile and the window's folded stacks."""
    started = profile.start_server(cell.kind, server.pid, server.addr, WINDOW_S, run_dir, "w")
    stop = threading.Event()
    calls: list[int] = []

    def load() -> None:
        with grpc.insecure_channel(server.addr("grpc")) as ch:
            stub, n = pb_grpc.FileTransferStub(ch), 0
            while not stop.is_set():
                assert stub.Echo(pb.EchoRequest(payload=PAYLOAD), timeout=10).payload == PAYLOAD
                n += 1
            calls.append(n)

    threads = [threading.Thread(target=load) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        shares, graph, _ = profile.finish(started, run_dir, "window")
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert sum(calls) > 0 and graph is not None
    folded = parse_folded((run_dir / "profiles" / "w.folded").read_text())
    return shares, folded


def test_a_python_server_under_jemalloc_shows_its_allocator(tmp_path: Path) -> None:
    cell = _cell(PY_JEMALLOC)
    assert isinstance(cell.kind, Command) and cell.kind.profiler.kind == "perf"
    with _running(cell, tmp_path) as server:
        shares, folded = _profiled_window(cell, server, tmp_path)
    assert shares["samples"] >= 100, shares
    assert shares["shares"]["allocator"] > 0, shares
    in_jemalloc = sum(n for stack, n in folded.items() if "(libjemalloc.so.2)" in stack)
    assert in_jemalloc > 0, "no sample has a frame in the preloaded jemalloc"
    # perf unwound through the interpreter: the stacks name python's own functions, not just their leaf.
    assert any("_PyEval_EvalFrameDefault" in stack for stack in folded), sorted(folded)[:5]


def test_xferd_go_with_a_pprof_address_is_sampled_there(tmp_path: Path) -> None:
    cell = _cell(GO + 'pprof = "http://127.0.0.1:{metrics_port}/debug/pprof"\n')
    assert isinstance(cell.kind, Command) and cell.kind.profiler.kind == "pprof"
    with _running(cell, tmp_path) as server:
        shares, folded = _profiled_window(cell, server, tmp_path)
    assert (tmp_path / "profiles" / "w.pprof").stat().st_size > 0  # what Go's handler answered
    assert not (tmp_path / "profiles" / "w.perf.data").exists()
    assert shares["samples"] > 0, shares
    assert any("google.golang.org/grpc" in stack for stack in folded), sorted(folded)[:5]


def test_xferd_go_without_one_is_sampled_by_perf_through_its_frame_pointers(tmp_path: Path) -> None:
    cell = _cell(GO)
    assert isinstance(cell.kind, Command) and cell.kind.profiler.unwind == "fp"
    with _running(cell, tmp_path) as server:
        shares, folded = _profiled_window(cell, server, tmp_path)
    assert shares["samples"] >= 100, shares
    # Unwound to the goroutine's root: perf's DWARF unwinding would stop at the first frame.
    total = sum(folded.values())
    rooted = sum(n for stack, n in folded.items() if stack.split(";")[0].startswith(("runtime.goexit",
                                                                                    "runtime.mstart")))
    assert rooted > 0.5 * total, (rooted, total)
    assert shares["shares"]["syscall+net"] > 0, shares


def test_a_pprof_address_that_serves_no_profile_fails_with_its_url(tmp_path: Path) -> None:
    # The Python server's gRPC port speaks HTTP/2 only: the GET of a profile cannot succeed there.
    cell = _cell(PY_JEMALLOC.replace("alloc =", 'pprof = "http://127.0.0.1:{port}/debug/pprof"\nalloc ='))
    with _running(cell, tmp_path) as server:
        started = profile.start_server(cell.kind, server.pid, server.addr, 1.0, tmp_path, "w")
        port = server.addr("grpc").rsplit(":", 1)[1]
        url = rf"http://127\.0\.0\.1:{port}/debug/pprof/profile\?seconds=1"
        with pytest.raises(profile.ProfileError, match=rf"GET {url}: no HTTP/1\.1 answer there \(BadStatusLine\)"):
            profile.finish(started, tmp_path, "window")


# In make test-slow: its parts are each checked in make test, the sampler against a real command server above and
# the runner's profiled window by tests/measure/test_profile.py; this one joins them (13 s).
@pytest.mark.slow
def test_a_profiled_sweep_of_a_command_server_attributes_its_allocator(tmp_path: Path) -> None:
    """End to end: `profile = true` and a command server under jemalloc, as `xferbench run` runs it."""
    text = (
        '[experiment]\nname = "cmd-profile"\nrepeats = 1\nduet = false\nwarmup_s = 1\nprofile = true\n'
        '[load]\nusers = 4\nspawn_rate = 4\nduration_s = 3\nmix = "echo:1"\nsizes = "64KiB"\ntransport = "grpc"\n'
        '[[servers]]\nserver = "command"\nlabel = "pyecho"\n' + PY_JEMALLOC
    )
    exp = experiment_file(tmp_path / "exp.toml", text)
    rows = sweep.sweep(exp, tmp_path / "run").rows
    assert len(rows) == 1 and rows[0].ok, (rows[0].error, rows[0].stderr_tail)
    row = rows[0]
    assert row.config["command"]["profiler"]["kind"] == "perf", row.config["command"]
    assert row.cpu_profile is not None and row.cpu_profile["samples"] >= 50, row.cpu_profile
    assert row.cpu_profile["shares"]["allocator"] > 0, row.cpu_profile
    assert row.flamegraph is not None and (tmp_path / "run" / row.flamegraph).stat().st_size > 0
