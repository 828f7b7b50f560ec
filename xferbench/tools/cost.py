"""`xferbench cost`: instructions per request of xferd-c per allocator, counted by callgrind.

Timed figures on a shared 2-core machine carry noise; instruction counts barely do. This replays a fixed,
sequential request script (one call in flight, so the server's batching is the same every time) against
xferd-c running under `valgrind --tool=callgrind`, and for each kind of call reads the instructions the whole
server executed (every thread) between a counter reset and a dump. Each kind is replayed `repeats` times in the
same server; the median is the figure and the spread is printed beside it, so a reader sees how exact it is.

What it shows: the allocator's *work* per request, by function, with no scheduler or neighbour noise.
What it cannot show: time. Callgrind runs one thread at a time, so lock contention, cache misses, false
sharing and page faults (where allocators differ most under load) are invisible here; the timed experiments
(`xferbench run experiments/allocators.toml`) measure those. The two rankings side by side say which part of
a timed gap is instructions and which is the machine.

The allocator library comes from the server's own report (`malloc_lib=` in its ready line, from a plain start),
and is preloaded under valgrind by us: xferd-c's own re-exec through /proc/self/exe would exec valgrind's tool.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from py_client import meta
from py_client.frame_client import FrameClient
from py_client.sizes import parse_size
from xferbench.config import ALLOCATORS, servers
from xferbench.measure.profile import classify
from xferbench.run.process import Server

DEFAULT_SCRIPT = "echo:400,meta:200,upload:8,download:8"
ECHO_BYTES = 256
# Meta: loadgen's defaults (--xfer-meta-entries 64, --xfer-meta-size 8-64), drawn from a fixed seed.
META_ENTRIES, META_SIZE = 64, (8, 64)
DUMP_TIMEOUT_S = 120.0
IDLE_WINDOW_S = 2.0
# One I/O thread and one worker keep the hand-off path the same in every replay (the listeners come from the
# kind's registry entry: every one on a free loopback port).
THREADS = {"io-threads": 1, "workers": 1}


class CostError(RuntimeError):
    """A cost run that cannot go on; the message says why."""


def _fits(s: servers.ServerSpec) -> bool:
    return {"alloc", *THREADS} <= set(s.flags) and "frame" in s.transports


def measured_kind() -> servers.ServerSpec:
    """The kind of server cost measures, by its registry entry's capabilities: an allocator chosen by flag
    (`alloc`), the frame transport and the thread flags. Its entry gives the binary, listeners and ready word."""
    kind = next((s for s in servers.SERVERS.values() if _fits(s)), None)
    if kind is None:
        raise CostError("no server of xferbench/config/servers.py takes --alloc, --io-threads and --workers over frame")
    return kind


@dataclass(frozen=True)
class Step:
    kind: str
    calls: int  # operations of this kind per replay


@dataclass
class KindCost:
    kind: str
    operations: int
    calls_per_operation: int
    instructions_per_operation: float  # the median over replays
    spread: float  # (max - min) / median over replays
    buckets: dict[str, float] = field(default_factory=dict)  # share of instructions, from the median replay
    top_allocator_functions: list[tuple[str, float]] = field(default_factory=list)


@dataclass
class AllocatorCost:
    alloc: str
    detected: str
    library: str
    idle_instructions_per_s: float
    kinds: list[KindCost]


def parse_script(text: str) -> list[Step]:
    """'echo:400,upload:8' -> steps; a clear error names the bad item."""
    steps = []
    for item in text.split(","):
        kind, _, count = item.partition(":")
        if kind not in _REPLAYS:
            raise CostError(f"script item {item!r}: kind must be one of {', '.join(_REPLAYS)}")
        if not count.isdigit() or int(count) <= 0:
            raise CostError(f"script item {item!r}: want KIND:COUNT with a positive whole COUNT")
        steps.append(Step(kind, int(count)))
    return steps


# --- the replays: each makes `n` operations of one kind, sequentially -----------------------------------


@dataclass(frozen=True)
class Sizes:
    file: int
    chunk: int

    def chunks(self) -> int:
        return -(-self.file // self.chunk)


def _echo(c: FrameClient, n: int, sizes: Sizes, tag: str) -> int:
    payload = b"e" * ECHO_BYTES
    for _ in range(n):
        if c.echo(payload) != payload:
            raise CostError("Echo answered a different payload")
    return 1


def _meta(c: FrameClient, n: int, sizes: Sizes, tag: str) -> int:
    entries = meta.prepare(meta.random_entries(META_ENTRIES, *META_SIZE, random.Random(META_ENTRIES)))
    for _ in range(n):
        c.meta(entries)
    return 1


def _upload(c: FrameClient, n: int, sizes: Sizes, tag: str) -> int:
    data = bytes(range(256)) * (sizes.file // 256) + b"u" * (sizes.file % 256)
    for i in range(n):
        c.upload(f"cost-{tag}-{i}", data, chunk_size=sizes.chunk)
    return sizes.chunks() + 2  # begin, chunks, commit


def _download(c: FrameClient, n: int, sizes: Sizes, tag: str) -> int:
    for _ in range(n):
        c.download("cost-seed", chunk_size=sizes.chunk)
    return sizes.chunks()


_REPLAYS: dict[str, Callable[[FrameClient, int, Sizes, str], int]] = {
    "echo": _echo,
    "meta": _meta,
    "upload": _upload,
    "download": _download,
}


# --- callgrind ------------------------------------------------------------------------------------------


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if not path:
        raise CostError(f"{tool} not found: install Debian's valgrind package (scripts/bootstrap.sh does)")
    return path


def _argv(spec: servers.ServerSpec, binary: str, alloc: str) -> list[str]:
    return [binary, *spec.port0_flags, *(f"--{k}={v}" for k, v in THREADS.items()), f"--alloc={alloc}"]


def _detect_library(spec: servers.ServerSpec, binary: str, alloc: str) -> str:
    """The allocator library the server itself preloads for `alloc` ('' for glibc and pool), from its ready line."""
    server = Server(spec.name, _argv(spec, binary, alloc), dict(os.environ), ready_word=spec.ready_word)
    try:
        lib = server.ready.get("malloc_lib", "")
    finally:
        server.stop()
    return "" if alloc in ("glibc", "pool") else lib


@contextmanager
def callgrind_server(spec: servers.ServerSpec, binary: str, alloc: str, out_dir: Path) -> Iterator[tuple[Server, str]]:
    lib = _detect_library(spec, binary, alloc)
    env = dict(os.environ)
    if lib:
        env["LD_PRELOAD"] = lib
        env["XFERD_C_PRELOADED"] = alloc  # xferd-c's own mark of a preload done: it then does not re-exec
    argv = [_need("valgrind"), "--tool=callgrind", "--fair-sched=yes", f"--callgrind-out-file={out_dir}/callgrind.out.%p",
            *_argv(spec, binary, alloc)]
    server = Server(spec.name, argv, env, log_path=out_dir / "server.log", ready_timeout_s=60.0, ready_word=spec.ready_word)
    try:
        yield server, lib
    finally:
        server.stop()


def _control(pid: int, flag: str) -> None:
    subprocess.run([_need("callgrind_control"), flag, str(pid)], check=True, capture_output=True,
                   timeout=DUMP_TIMEOUT_S)


# "  1,234 ( 5.67%)  file.c:function (1,480x) [object]": the call count only appears with some dumps.
_FN_LINE = re.compile(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(\S.*?)(?:\s+\([\d,]+x\))?(?:\s+\[(.*)\])?$")


# callgrind_annotate lists each thread's entry frames with the thread's whole cost; their own is negligible.
_THREAD_ROOTS = frozenset({"clone", "clone3", "start_thread"})


def read_dump(path: Path) -> tuple[int, dict[tuple[str, str], int]]:
    """Total instructions and exclusive instructions per (function, object) of one callgrind dump."""
    out = subprocess.run([_need("callgrind_annotate"), "--auto=no", "--threshold=100", str(path)],
                         check=True, capture_output=True, text=True, timeout=DUMP_TIMEOUT_S).stdout
    total = 0
    per_fn: dict[tuple[str, str], int] = {}
    for line in out.splitlines():
        m = _FN_LINE.match(line)
        if not m:
            continue
        ir = int(m.group(1).replace(",", ""))
        name = m.group(2)
        if name == "PROGRAM TOTALS":
            total = ir
            continue
        fn = name.rsplit(":", 1)[-1]  # "file:function" -> function
        if fn in _THREAD_ROOTS:
            continue
        per_fn[(fn, m.group(3) or "")] = per_fn.get((fn, m.group(3) or ""), 0) + ir
    if total <= 0:
        raise CostError(f"{path}: callgrind_annotate reported no PROGRAM TOTALS")
    return total, per_fn


def _newest_dump(out_dir: Path, before: set[Path]) -> Path:
    new = sorted(set(out_dir.glob("callgrind.out.*")) - before, key=lambda p: p.stat().st_mtime)
    if not new:
        raise CostError(f"callgrind wrote no dump in {out_dir}")
    return new[-1]


@contextmanager
def counted(server: Server, out_dir: Path) -> Iterator[Callable[[], tuple[int, dict[tuple[str, str], int], float]]]:
    """Counters zeroed on entry and dumped on exit; the callable then gives (instructions, per function, seconds)."""
    pid = server.pid
    before = set(out_dir.glob("callgrind.out.*"))
    _control(pid, "--zero")
    t0 = time.monotonic()
    result: list[tuple[int, dict[tuple[str, str], int], float]] = []
    yield lambda: result[0]
    _control(pid, "--dump")
    seconds = time.monotonic() - t0
    total, per_fn = read_dump(_newest_dump(out_dir, before))
    result.append((total, per_fn, seconds))


def idle_rate(server: Server, out_dir: Path) -> float:
    """Instructions per second the server executes with no calls (its timers: timeouts, expiry, /metrics)."""
    with counted(server, out_dir) as got:
        time.sleep(IDLE_WINDOW_S)
    total, _, seconds = got()
    return total / seconds


def measure(server: Server, step: Step, sizes: Sizes, out_dir: Path, replay: int, idle_per_s: float
            ) -> tuple[float, int, dict[tuple[str, str], int]]:
    """One replay of one step: (the calls' instructions, calls per operation, per-function instructions).
    The idle rate times the replay's duration is taken off: timer work grows with wall time under valgrind,
    not with calls, and would otherwise be the noise in a short replay."""
    with FrameClient(server.addr("frame"), inflight=1) as client, counted(server, out_dir) as got:
        calls = _REPLAYS[step.kind](client, step.calls, sizes, f"{step.kind}-{replay}")
    total, per_fn, seconds = got()
    return max(0.0, total - idle_per_s * seconds), calls, per_fn


def cost_of(spec: servers.ServerSpec, binary: str, alloc: str, steps: Sequence[Step], sizes: Sizes, repeats: int,
            out_dir: Path) -> AllocatorCost:
    out_dir.mkdir(parents=True, exist_ok=True)
    with callgrind_server(spec, binary, alloc, out_dir) as (server, lib):
        detected = server.ready.get("malloc", "")
        if detected != ("glibc" if alloc == "pool" else alloc):
            raise CostError(f"--alloc {alloc}: the server under valgrind reports malloc={detected!r}")
        with FrameClient(server.addr("frame"), inflight=1) as seed:
            seed.upload("cost-seed", b"d" * sizes.file, chunk_size=sizes.chunk)
        idle = idle_rate(server, out_dir)
        kinds = [_kind_cost(server, step, sizes, repeats, out_dir, idle) for step in steps]
    return AllocatorCost(alloc, detected, lib, idle, kinds)


def _kind_cost(server: Server, step: Step, sizes: Sizes, repeats: int, out_dir: Path, idle: float) -> KindCost:
    runs = [measure(server, step, sizes, out_dir, r, idle) for r in range(repeats)]
    per_op = [total / step.calls for total, _, _ in runs]
    med = statistics.median(per_op)
    _, calls, per_fn = runs[per_op.index(sorted(per_op)[len(per_op) // 2])]
    # Each function's own instructions, as one-frame stacks for the profiler's bucket table.
    frames = {f"{fn} ({obj})" if obj else fn: ir for (fn, obj), ir in per_fn.items()}
    counted_ir = sum(frames.values())
    shares = classify.attribute(frames).shares
    by_fn: dict[str, int] = {}
    for frame, ir in frames.items():
        if classify.frame_bucket(frame) == "allocator":
            fn = classify.split_frame(frame)[0]
            by_fn[fn] = by_fn.get(fn, 0) + ir
    alloc_fns = sorted(((fn, ir / counted_ir) for fn, ir in by_fn.items()), key=lambda x: -x[1])
    return KindCost(step.kind, step.calls, calls, med, (max(per_op) - min(per_op)) / med, shares, alloc_fns[:5])


# --- the command -----------------------------------------------------------------------------------------


def render(results: Sequence[AllocatorCost], console: Console, name: str) -> None:
    table = Table(title=f"{name} instructions per operation (callgrind; median of replays, spread beside)")
    for col in ("allocator", "kind", "instructions/op", "per call", "spread", "allocator share", "÷ glibc"):
        table.add_column(col, justify="left" if col in ("allocator", "kind") else "right")
    base = {k.kind: k.instructions_per_operation for r in results if r.alloc == "glibc" for k in r.kinds}
    for r in results:
        for k in r.kinds:
            ratio = f"{k.instructions_per_operation / base[k.kind]:.3f}" if k.kind in base else "—"
            table.add_row(r.alloc, k.kind, f"{k.instructions_per_operation:,.0f}",
                          f"{k.instructions_per_operation / k.calls_per_operation:,.0f}", f"{k.spread:.2%}",
                          f"{k.buckets.get('allocator', 0.0):.1%}", ratio)
    console.print(table)
    console.print("Instructions, not time: callgrind runs one thread at a time, so contention and cache effects "
                  "do not show here; the timed experiments measure those.")


def cmd_cost(args: argparse.Namespace) -> int:
    console = Console()
    try:
        steps = parse_script(args.script)
        sizes = Sizes(parse_size(args.file_size), parse_size(args.chunk))
        allocs = args.alloc.split(",")
        bad = [a for a in allocs if a not in ALLOCATORS]
        if bad:
            raise CostError(f"--alloc {','.join(bad)}: want a comma list of {', '.join(ALLOCATORS)}")
        out = Path(args.out or tempfile.mkdtemp(prefix="xferbench-cost-"))
        spec = measured_kind()
        binary = args.binary or spec.default_binary()
        results = [cost_of(spec, binary, a, steps, sizes, args.repeats, out / a) for a in allocs]
    except (CostError, ValueError) as e:
        console.print(f"[red]xferbench cost: {e}[/red]")
        return 2
    (out / "cost.json").write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n")
    render(results, console, spec.name)
    console.print(f"figures: {out / 'cost.json'}")
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    try:  # the help names the measured kind; a registry without one fails the command, not the CLI
        kind = measured_kind()
        name, binary_help = kind.name, f"{kind.name} binary (default ${kind.binary_env}, else {kind.binary})"
    except CostError:
        name, binary_help = "the server", "the server's binary"
    p = sub.add_parser("cost", help=f"instructions per request of {name} per allocator (callgrind)",
                       description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--alloc", default=",".join(ALLOCATORS), help="comma list (default: all)")
    p.add_argument("--script", default=DEFAULT_SCRIPT,
                   help=f"KIND:COUNT,... of {', '.join(_REPLAYS)} (default {DEFAULT_SCRIPT})")
    p.add_argument("--repeats", type=int, default=3, help="replays of each kind; the median is kept (default 3)")
    p.add_argument("--file-size", default="1MiB", help="upload and download file size (default 1MiB)")
    p.add_argument("--chunk", default="256KiB", help="chunk and Read length (default 256KiB)")
    p.add_argument("--binary", help=binary_help)
    p.add_argument("--out", help="folder for cost.json and the callgrind dumps (default: a new temp folder)")
    p.set_defaults(fn=cmd_cost)
