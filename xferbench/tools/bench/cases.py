"""What each figure measures. A case runs one round: its subjects and their anchor, the anchor first in odd
rounds and last in even ones, so a drift of the machine over the sitting favours neither; every figure is the
round's subject / anchor, and `Ctx.add` keeps it with the load at that moment."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from xferbench.config import servers
from xferbench.run import process
from xferbench.tools.bench import tools
from xferbench.tools.bench.lab import BenchLab
from xferbench.tools.bench.quiet import BUSY_CORES, Others
from xferbench.tools.bench.record import Samples

FILE = "16MiB"  # frame transfers: big enough for many chunks per call sequence, small enough for a disk store
FRAME = ("--conns", "2", "--inflight", "4", "--chunk", "1MiB", "--file-size", FILE)


# The servers each case measures, chosen from the registry (xferbench/config/servers.py) by what an entry can do,
# never by its name; the figures' names carry the names the entries give.
def _kinds(fits: Callable[[servers.ServerSpec], bool]) -> tuple[str, ...]:
    return tuple(sorted(s.name for s in servers.SERVERS.values() if fits(s)))


def _one(what: str, fits: Callable[[servers.ServerSpec], bool]) -> str:
    """The first fitting kind by name (the registry has one of each today)."""
    found = _kinds(fits)
    if not found:
        raise LookupError(f"no server in xferbench/config/servers.py is {what}")
    return found[0]


# Every full server of the frame transport, in name order (which fixes the order of the figures in a record).
FRAME_SERVERS = _kinds(lambda s: s.conformance and "frame" in s.transports)
# The full server of gRPC and its anchor, the reference kind that serves Echo alone (grpc-go's defaults).
GRPC_SERVER = _one("a full gRPC server", lambda s: s.conformance and "grpc" in s.transports)
GRPC_ANCHOR = _one("a gRPC reference server", lambda s: not s.conformance and "grpc" in s.transports and "echo" in s.calls)
# The server every generator drives: both transports at once.
BOTH_SERVER = _one("a server of gRPC and frame", lambda s: {"grpc", "frame"} <= set(s.transports))
# The allocator case's subjects: the kind that takes an allocator by flag, and the one with a buffer pool.
ALLOC_SERVER = _one("a frame server with --alloc", lambda s: "alloc" in s.flags and "frame" in s.transports)
POOL_SERVER = _one("a frame server with --pool", lambda s: "pool" in s.flags and "frame" in s.transports)

ANCHOR = {"mem": "iperf3", "disk": "iperf3 -F"}  # a disk store's ceiling: iperf3's server writing a file
# Offered rates of the allocator case, in frame calls/s: the server busy for two fifths of its core or more, and
# far below what it can serve. Its CPU time is its cgroup's nanosecond clock, so a half-length window (20 runs a
# round: the case would otherwise take half the bench) is limited by the machine's noise, not by the clock
# (/proc's 10 ms ticks made every ratio a multiple of a few percent).
WARM_S = 0.3  # each method's unmeasured run on a fresh server (_warm)
ALLOC_LOAD: dict[str, tuple[str, ...]] = {
    "echo": ("--method", "echo", "--size", "256", "--rate", "6000"),
    "upload": ("--method", "upload", "--chunk", "256KiB", "--file-size", "1MiB", "--rate", "800"),
    "download": ("--method", "download", "--chunk", "256KiB", "--name", "gen:1MiB:1", "--rate", "800"),
    "meta": ("--method", "meta", "--rate", "3000"),
}


@dataclass
class Ctx:
    window_s: float
    tmp: Path
    smoke: bool
    say: Callable[[str], None]
    samples: dict[str, Samples] = field(default_factory=dict)
    others: Others = field(default_factory=Others)
    lab: BenchLab | None = None  # up from the lab case's first round to the sitting's end (close)

    def lab_route(self) -> tools.Route:
        if self.lab is None:
            self.lab = BenchLab.up(self.tmp)
        return self.lab.route

    def close(self) -> None:
        lab, self.lab = self.lab, None
        if lab is not None:
            lab.down()

    def add(self, name: str, value: float, better: str = "higher", unit: str = "ratio") -> None:
        if value <= 0:
            raise tools.BenchError(f"{name}: measured {value}")
        s = self.samples.setdefault(name, Samples(name, unit, better))
        others = self.others.cores()  # since the previous figure: this one's runs and their set-up
        s.add(value, others)
        self.say(f"{name} = {value:.3f}" + (f"  busy (others used {others:.2f} cores)" if others > BUSY_CORES else ""))


def ordered(r: int, items: tuple[str, ...]) -> tuple[str, ...]:
    """Items in order in odd rounds, reversed in even ones."""
    return items if r % 2 else tuple(reversed(items))


def _store(ctx: Ctx, store: str, tag: str) -> tuple[str, Path | None]:
    if store == "mem":
        return "--store=mem", None
    d = ctx.tmp / f"store-{tag}"
    d.mkdir()
    return f"--store=disk:{d}", d


def _moved(srv: process.Server, addr: str, window_s: float, *args: str, route: tools.Route = tools.LOOPBACK
           ) -> tools.Moved:
    """One xferload transfer run: its MB/s, and the server's CPU (its cgroup's clock, read around the run) per GiB
    of every call it answered (warm-up included, as its CPU is)."""
    c0 = tools.cpu_seconds(srv)
    out = tools.xferload(addr, window_s, *args, route=route)
    c1 = tools.cpu_seconds(srv)
    calls = int(out["calls"])
    if calls <= 0 or not out["bytes"]:
        raise tools.BenchError(f"xferload {' '.join(args)} moved nothing")
    gib = float(out["bytes"]) * (calls + int(out.get("warmup_calls", 0))) / calls / (1 << 30)
    return tools.Moved(float(out["mb_per_s"]), (c1 - c0) / gib)


def frame(ctx: Ctx, r: int) -> None:
    """Frame uploads (mem and disk store) and downloads (a stored file, gen: content) of both servers, by
    xferload, ÷ iperf3 (for the disk store ÷ iperf3 -s -F FILE); and for the memory store's uploads and stored
    downloads, the server's CPU per GiB ÷ iperf3's server CPU per GiB received, the kernel's floor for moving
    the bytes: on loopback the client and the kernel set the rate, the cost is the server's own."""
    w = ctx.window_s
    stores = ("mem",) if ctx.smoke else ("mem", "disk")
    ceil: dict[str, tools.Moved] = {}

    def anchors() -> None:
        ceil["mem"] = tools.iperf3(w)
        if "disk" in stores:
            out = ctx.tmp / "iperf3.out"
            ceil["disk"] = tools.iperf3(w, out)
            out.unlink(missing_ok=True)

    got: list[tuple[str, tools.Moved, str]] = []
    if r % 2:
        anchors()
    for name in ordered(r, FRAME_SERVERS):
        for store in stores:
            flag, d = _store(ctx, store, f"{name}-{r}")
            srv = tools.start(name, flag)
            try:
                addr = srv.addr("frame")
                got.append((f"upload {store} {name}", _moved(srv, addr, w, "--method", "upload", *FRAME), store))
                if store == "mem" and not ctx.smoke:
                    one = tools.xferload(addr, w, "--method", "download", "--max-calls", "1", *FRAME)
                    for what, file in (("stored", one["name"]), ("gen", f"gen:{FILE}:1")):
                        moved = _moved(srv, addr, w, "--method", "download", "--name", file, *FRAME)
                        got.append((f"download {what} {name}", moved, "mem"))
            finally:
                srv.stop()
                if d is not None:
                    shutil.rmtree(d, ignore_errors=True)
    if not r % 2:
        anchors()
    for what, moved, store in got:
        ctx.add(f"frame {what} / {ANCHOR[store]}", moved.mb_per_s / ceil[store].mb_per_s)
    for what, moved, store in got:
        if store == "mem" and "gen" not in what:
            ctx.add(f"frame {what} cpu/GiB / iperf3 -s cpu/GiB", moved.cpu_per_gib_s / ceil[store].cpu_per_gib_s,
                    better="lower")


def lab(ctx: Ctx, r: int) -> None:
    """Frame uploads of every frame server across the lab's path (xferload on one namespace host, the server on
    another: two veth pairs and a bridge) ÷ iperf3 over the same path. Beside the loopback figures of `frame`, what
    a path with interfaces does to each server's share of the ceiling."""
    w, route = ctx.window_s, ctx.lab_route()
    ceiling = tools.iperf3(w, route=route) if r % 2 else None
    got: dict[str, tools.Moved] = {}
    for name in ordered(r, FRAME_SERVERS[:1] if ctx.smoke else FRAME_SERVERS):
        srv = tools.start(name, "--store=mem", route=route)
        try:
            got[name] = _moved(srv, srv.addr("frame"), w, "--method", "upload", *FRAME, route=route)
        finally:
            srv.stop()
    ceiling = ceiling or tools.iperf3(w, route=route)
    for name, moved in got.items():
        ctx.add(f"lab frame upload {name} / iperf3 (lab path)", moved.mb_per_s / ceiling.mb_per_s)


def grpc(ctx: Ctx, r: int) -> None:
    """xferd-go's gRPC Upload and Download ÷ iperf3, driven by grpcxfer (4 streams of 8 MiB in 1 MiB chunks:
    ghz, with its dynamic messages, tops out first), and its Echo ÷ bare grpc-go's (ghz -c 16, 256 B)."""
    w = ctx.window_s
    echo: dict[str, float] = {}
    up = down = 0.0
    ceiling = tools.iperf3(w).mb_per_s if r % 2 else 0.0
    for name in ordered(r, (GRPC_SERVER, GRPC_ANCHOR)):
        # The in-memory store where the kind has one (its registry entry's flags): bare-echo stores nothing.
        srv = tools.start(name, *(["--store=mem"] if "store" in servers.get(name).flags else []))
        try:
            addr = srv.addr("grpc")
            echo[name] = tools.ghz(
                addr, w, "--call", "xfer.v1.FileTransfer.Echo", "-D", str(ctx.tmp / "echo.json"), "-c", "16"
            )
            if name == GRPC_SERVER and not ctx.smoke:
                up = tools.grpcxfer(addr, w, "upload")
                down = tools.grpcxfer(addr, w, "download")
        finally:
            srv.stop()
    ctx.add(f"grpc echo {GRPC_SERVER} / bare grpc-go", echo[GRPC_SERVER] / echo[GRPC_ANCHOR])
    if not ctx.smoke:
        ceiling = ceiling or tools.iperf3(w).mb_per_s
        ctx.add(f"grpc upload {GRPC_SERVER} / iperf3 (grpcxfer)", up / ceiling)
        ctx.add(f"grpc download {GRPC_SERVER} / iperf3 (grpcxfer)", down / ceiling)


def _generator(ctx: Ctx, gen: str, case: str, grpc_addr: str, frame_addr: str) -> float:
    """Echoes/s or uploads/s of one generator against the running xferd-go."""
    w = ctx.window_s
    if gen.startswith("ghz") and case == "echo":
        # ghz's 16 workers share one connection by default; Locust's 16 users hold one each. "ghz16" gives ghz
        # Locust's 16 connections, the like-for-like anchor (one connection batches writes that 16 cannot).
        conns = ("--connections", "16") if gen == "ghz16" else ()
        echo = ("--call", "xfer.v1.FileTransfer.Echo", "-D", str(ctx.tmp / "echo.json"), "-c", "16", *conns)
        return tools.ghz(grpc_addr, w, *echo)
    if gen == "ghz":
        return tools.ghz(grpc_addr, w, "--call", "xfer.v1.FileTransfer.Upload", "-B", str(ctx.tmp / "upload.bin"), "-c", "4")
    if gen == "locust" and case == "echo":
        return tools.locust(
            f"grpc://{grpc_addr}", w, "-u", "16", "-r", "16", "--xfer-mix", "echo:1", "--xfer-echo-size", "256"
        )
    if gen == "locust":
        return tools.locust(
            f"grpc://{grpc_addr}",
            w,
            "-u",
            "4",
            "-r",
            "4",
            "--xfer-mix",
            "upload:1",
            "--xfer-sizes",
            "8MiB",
            "--xfer-chunk",
            "1MiB",
        )
    if case == "echo":
        return float(
            tools.xferload(frame_addr, w, "--method", "echo", "--size", "256", "--conns", "2", "--inflight", "8")[
                "calls_per_s"
            ]
        )
    r = tools.xferload(
        frame_addr, w, "--method", "upload", "--chunk", "1MiB", "--file-size", "8MiB", "--conns", "2", "--inflight", "2"
    )
    return float(r["mb_per_s"]) * 1e6 / (8 << 20)


def generators(ctx: Ctx, r: int) -> None:
    """One headless Locust process (gRPC) and xferload (frame), each ÷ ghz, on Echo 256 B with 16 callers and
    on 8 MiB uploads in 1 MiB chunks with 4, against one xferd-go with a memory store. On Echo, Locust also ÷
    ghz with as many connections as Locust's users hold."""
    cases = ("echo",) if ctx.smoke else ("echo", "upload")
    srv = tools.start(BOTH_SERVER, "--store=mem")
    try:
        for case in cases:
            gens = ("ghz", "ghz16", "locust", "xferload") if case == "echo" else ("ghz", "locust", "xferload")
            rate = {g: _generator(ctx, g, case, srv.addr("grpc"), srv.addr("frame")) for g in ordered(r, gens)}
            ctx.add(f"locust {case} / ghz", rate["locust"] / rate["ghz"])
            if case == "echo":
                ctx.add("locust echo / ghz, 16 connections", rate["locust"] / rate["ghz16"])
            ctx.add(f"xferload {case} / ghz", rate["xferload"] / rate["ghz"])
    finally:
        srv.stop()


def _cpu_per_call(srv: process.Server, window_s: float, load: tuple[str, ...]) -> float:
    """Server CPU seconds per frame call the client counted (setup and warm-up calls included: the server did
    them inside the same CPU reading)."""
    c0 = tools.cpu_seconds(srv)
    out = tools.xferload(srv.addr("frame"), window_s, "--conns", "2", "--inflight", "8", *load)
    c1 = tools.cpu_seconds(srv)
    calls = int(out["calls"]) + int(out.get("warmup_calls", 0)) + int(out.get("setup_calls", 0))
    if calls <= 0:
        raise tools.BenchError(f"xferload {' '.join(load)} made no calls")
    return (c1 - c0) / calls


def _warm(srv: process.Server, methods: tuple[str, ...]) -> None:
    """Each method once, unmeasured, on a fresh server: the allocator's first arenas, page faults and caches are
    paid here rather than in the first method's window, which they made the noisiest figure of the case."""
    for m in methods:
        tools.xferload(srv.addr("frame"), WARM_S, "--conns", "2", "--inflight", "8", *ALLOC_LOAD[m])


def allocators(ctx: Ctx, r: int) -> None:
    """xferd-c's server CPU per call for Echo, Upload, Download and Meta at fixed offered rates, per
    allocator, ÷ glibc's in the same round; and xferd-go's with its buffer pool off ÷ on."""
    allocs = ("glibc", "jemalloc") if ctx.smoke else servers.ALLOCATORS
    methods = ("echo",) if ctx.smoke else tuple(ALLOC_LOAD)
    cpu: dict[tuple[str, str], float] = {}
    for alloc in ordered(r, allocs):
        srv = tools.start(ALLOC_SERVER, "--store=mem", f"--alloc={alloc}")
        try:
            # The server says which allocator it found; a silent fallback to glibc would compare glibc with itself.
            if srv.ready.get("alloc") != alloc:
                raise tools.BenchError(f"{ALLOC_SERVER} --alloc={alloc} is ready with {srv.ready_line!r}")
            _warm(srv, methods)
            for m in methods:
                cpu[alloc, m] = _cpu_per_call(srv, max(1.0, ctx.window_s / 2), ALLOC_LOAD[m])
        finally:
            srv.stop()
    for alloc in allocs[1:]:
        for m in methods:
            ctx.add(f"{ALLOC_SERVER} cpu/call {m} {alloc} / glibc", cpu[alloc, m] / cpu["glibc", m], better="lower")
    if not ctx.smoke:
        _pool(ctx, r)


def _pool(ctx: Ctx, r: int) -> None:
    """A known difference, so that the history shows what a real change looks like beside the figures that did
    not move: xferd-go's server CPU per upload call with its sync.Pool chunk buffers off ÷ on (about 1.5x in
    quick.toml's duets: every chunk a fresh allocation for the GC to reclaim)."""
    cpu: dict[str, float] = {}
    for pool in ordered(r, ("on", "off")):
        srv = tools.start(POOL_SERVER, "--store=mem", f"--pool={pool}")
        try:
            _warm(srv, ("upload",))
            cpu[pool] = _cpu_per_call(srv, max(1.0, ctx.window_s / 2), ALLOC_LOAD["upload"])
        finally:
            srv.stop()
    ctx.add(f"{POOL_SERVER} cpu/call upload pool off / on", cpu["off"] / cpu["on"], better="lower")
