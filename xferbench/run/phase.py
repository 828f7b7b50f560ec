"""One load phase: the load generator against the running server for warm-up + duration, both sides
sampled once a second, and the figures of the measured window (after the warm-up tick)."""

from __future__ import annotations

import contextlib
import math
import threading
import time
from dataclasses import dataclass, field

import psutil

from xferbench.analysis.row import Figures
from xferbench.config import Load, tls
from xferbench.measure import figures, procfs, profile, steps, tree
from xferbench.measure.scrape import Snapshot
from xferbench.measure.targets import Unregister
from xferbench.run import hostwindow
from xferbench.run.generators import Generator, LoadHost, LocustGenerator, RemoteLoad, generator_class
from xferbench.run.live import CellFailed, Live, affinity
from xferbench.run.outputs import profile_figures, start_profile, write_series
from xferbench.run.process import READY_TIMEOUT_S, ServerStartError, free_port
from xferbench.run.serverstart import load_listener, run_tls_files

GEN_TAIL_MARGIN_S = 15.0  # the generator's own time bound (Locust -t, xferload --duration): a safety net


@dataclass
class Phase:
    """One load phase: its load generator, and what was sampled while it ran."""

    gen: Generator
    stem: str
    total_s: float  # warm-up + measured
    client: list[Snapshot] = field(default_factory=list)
    t0: float = field(default_factory=time.time)  # wall clock when the load started
    warm_tick: int = 0  # the tick that ends the warm-up
    t_warm: float = 0.0  # monotonic time of that tick
    cpu_self0: float | None = None  # the runner's and the generator's CPU seconds at that tick
    cpu_gen0: float | None = None
    gen_cpus0: tuple[float, float] | None = None  # idle and stolen seconds of the generator's CPUs then
    profiler: profile.Started | None = None  # sampling the server's CPU over the measured window
    time_wait: list[int] = field(default_factory=list)  # TIME_WAIT sockets on the server's port, each tick
    gen_ticks: list[steps.Tick] = field(default_factory=list)  # the generator CPUs' idle time at every tick
    proc: list[tree.Sample] = field(default_factory=list)  # the server's whole process tree at every tick
    hosts0: dict[str, hostwindow.Sample | None] | None = None  # with [hosts]: each host's counters at the warm tick


def _self_cpu() -> float:
    t = psutil.Process().cpu_times()
    return t.user + t.system


def _tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its live children (Locust --processes forks)."""
    total = 0.0
    with contextlib.suppress(psutil.Error):
        p = psutil.Process(pid)
        for q in [p, *p.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                t = q.cpu_times()
                total += t.user + t.system
    return total


def load_phase(live: Live, load: Load, stem: str, search_step: bool = False) -> Figures:
    """The load generator against the running server for warm-up + duration, scraping both sides every
    second; the figures of the measured window. Raises CellFailed (a window without one completed call too,
    unless it is a step of a capacity search, where that is the step's answer); the generator is stopped
    whatever happens."""
    phase = _start_generator(live, load, stem)
    unwatch: list[Unregister] = []
    try:
        try:
            phase.gen.wait_ready()
        except ServerStartError as e:
            raise CellFailed(str(e), e.tail) from None
        unwatch = [live.source.watch_client(addr, {"xferbench_cell": live.run.cell.name, **labels})
                   for addr, labels in phase.gen.metrics_targets()]
        if live.barrier is not None:
            try:
                live.barrier.wait(timeout=READY_TIMEOUT_S)
            except threading.BrokenBarrierError:
                raise CellFailed("the duet partner failed before its load started", phase.gen.tail()) from None
        _sample(live, phase, profiled=live.exp.profile and not search_step)
        out = _phase_figures(live, phase, search_step)
        if live.run.cell.load.levels and not search_step:
            out["steps"] = [level.to_json() for level in _step_figures(live, phase)]
        if phase.profiler is not None:
            out.update(profile_figures(live, phase.profiler))
            phase.profiler = None
        return out
    finally:
        if phase.profiler is not None:
            phase.profiler.sampler.stop()
        for each in unwatch:
            each()  # a last scrape, then the target goes (Prometheus keeps the series); before the stop
        phase.gen.stop(grace_s=5.0)
        if phase.gen.stats is not None:
            live.row.locust_stats = phase.gen.stats
        _write_phase_series(live, phase, search_step)


def _start_generator(live: Live, load: Load, stem: str) -> Phase:
    """The cell's load generator (load.driver), pinned to the generator's CPUs."""
    cell = live.run.cell
    total = live.exp.warmup_s + load.duration_s
    kind = generator_class(load.driver)
    live.progress.phase(live.run, f"starting {kind.name}" + (f" at {load.rate}/s" if load.rate else ""))
    host = f"{cell.transport}://{live.client_addr or live.running_server.addr(load_listener(cell))}"
    args = (host, load, free_port(), total + GEN_TAIL_MARGIN_S, live.log(kind.name, stem))
    cpus = live.exp.pinning.generator or None
    files = run_tls_files(live)
    secure = tls.client(load.tls, files) if files is not None else None
    if load.hosts:  # its workers on other hosts (the schema allows hosts with Locust only)
        assert issubclass(kind, LocustGenerator)
        try:
            gen: Generator = kind(*args, cpus=cpus, remote_load=_remote_load(live, load), tls=secure)
        except ServerStartError as e:
            raise CellFailed(str(e), e.tail) from None
    else:
        gen = kind(*args, cpus=cpus, tls=secure)
    assert live.row.pids is not None and live.row.cpus is not None  # start() set them
    live.row.pids[kind.name] = gen.proc.pid
    live.row.cpus["generator"] = affinity(gen.proc.pid)
    return Phase(gen, stem, total)


def _remote_load(live: Live, load: Load) -> RemoteLoad:
    """Where a load on other hosts runs: the master bound to this machine's address as the hosts reach it, and each
    host's address, both as the host check found them (the run's placement)."""
    placement = live.placement
    if placement is None or placement.server_address is None:
        raise CellFailed("load.hosts: the run has no placement from the host check (xferbench/run/hostcheck.py)", [])
    found = {f.name: f.address for f in placement.hosts}
    hosts = []
    for name in load.hosts:
        address = found.get(name)
        if not address:
            raise CellFailed(f"load.hosts: the host check found no address for {name}", [])
        hosts.append(LoadHost(live.exp.hosts[name], address))
    return RemoteLoad(placement.server_address, tuple(hosts))


def _sample(live: Live, phase: Phase, profiled: bool = False) -> None:
    """One tick a second for warm-up + duration: both processes must live; the generator and the metrics
    sources are scraped; at the end of the warm-up the runner's and the generator's CPU times are noted, and with
    `profiled` the server's CPU sampling starts for the measured window."""
    server, gen = live.running_server, phase.gen
    phase.t0 = time.time()
    m0 = time.monotonic()
    ticks = math.ceil(phase.total_s)
    tw_ports = _load_ports(live)
    phase.warm_tick = min(math.ceil(live.exp.warmup_s), ticks - 1) if ticks > 1 else 0
    phase.t_warm = m0
    prev: Snapshot | None = None
    for k in range(ticks + 1):
        delay = m0 + k - time.monotonic()
        if delay > 0:
            server.wait(delay)  # returns early if the server exits
        server.sample()  # a container's cgroup figures: the last reading before an OOM kill is the one kept
        _both_alive(live, gen, time.monotonic() - m0)
        snap = gen.scrape()
        if (tw := procfs.time_wait(tw_ports)) is not None:
            phase.time_wait.append(tw)
        _gen_tick(live, phase)
        if (proc := tree.sample(server.tree)) is not None:
            phase.proc.append(proc)
        _tick_sources(live)
        if k == phase.warm_tick:
            phase.cpu_self0, phase.cpu_gen0, phase.t_warm = _self_cpu(), _tree_cpu(gen.proc.pid), time.monotonic()
            phase.gen_cpus0 = procfs.cpu_idle_steal(live.exp.pinning.generator) if live.exp.pinning.generator else None
            gen.window_start()
            if live.placement is not None:
                phase.hosts0 = hostwindow.edge(live)
            if profiled:
                phase.profiler = start_profile(live, phase.stem, ticks - k)
        if snap is not None:
            phase.client.append(snap)
            qps, p95 = figures.live(prev, snap)
            prev = snap
            live.progress.live(live.run, time.monotonic() - m0, phase.total_s, qps, p95)


def _both_alive(live: Live, gen: Generator, at_s: float) -> None:
    """Raises CellFailed when the server or the generator has exited."""
    server = live.running_server
    if not server.alive():
        raise CellFailed(f"{server.name} {server.exit_text()} during the run (at {at_s:.1f}s)", list(server.tail))
    if not gen.alive():
        raise CellFailed(f"{gen.exit_text()} during the run", gen.tail())


def _tick_sources(live: Live) -> None:
    """The server-side sources' scrape of this tick: the metrics source, the soak's watch, the shadow."""
    if live.begun:
        live.source.tick()
    if live.watch is not None:
        live.watch.tick()
    if live.shadow is not None:
        live.shadow.tick()


def _load_ports(live: Live) -> set[int]:
    """The ports the load connects to: the server's for the cell's transport, and the [network] proxy's."""
    addrs = [live.running_server.addr(load_listener(live.run.cell)), live.client_addr or ""]
    return {int(a.rpartition(":")[2]) for a in addrs if a.rpartition(":")[2].isdigit()}


def _gen_tick(live: Live, phase: Phase) -> None:
    """The generator CPUs' idle and stolen time now: a stepped run's per-level saturation check needs it."""
    if live.exp.pinning.generator and live.run.cell.load.levels:
        idle = procfs.cpu_idle_steal(live.exp.pinning.generator)
        if idle is not None:
            phase.gen_ticks.append((time.time(), *idle))


def _step_figures(live: Live, phase: Phase) -> list[steps.Level]:
    """A stepped load: one window per level out of this one run (xferbench/measure/steps.py)."""
    load = live.run.cell.load
    server = live.source.snapshots(phase.t0, phase.client[-1].t) if phase.client else []
    out = steps.per_step(phase.client, server, phase.gen_ticks, load.levels, load.settle_s)
    live.row.warnings += steps.warnings(out)
    return out


def _phase_figures(live: Live, phase: Phase, search_step: bool) -> Figures:
    """The row's figures from the snapshots of the measured window (after the warm-up tick)."""
    elapsed_w = time.monotonic() - phase.t_warm
    out: Figures = {"runner_cpu_cores": _per_second(_self_cpu(), phase.cpu_self0, elapsed_w)}
    gen_cpu_psutil = _per_second(_tree_cpu(phase.gen.proc.pid), phase.cpu_gen0, elapsed_w)
    win_c = [s for s in phase.client if s.t >= phase.t0 + phase.warm_tick - 0.5]
    if len(win_c) < 2:
        raise CellFailed(
            f"fewer than two client metric scrapes in the measured window (is {phase.gen.name}'s metrics port serving?)",
            phase.gen.tail(),
        )
    t_a, t_b = win_c[0].t, win_c[-1].t
    srv_whole = live.source.snapshots(phase.t0, t_b)
    out["duration_s"] = round(t_b - t_a, 3)
    out.update(figures.client_figures(win_c))
    rq = live.run.cell.kind.requests  # the server's own request series (a command's); None: ours
    out.update(figures.server_figures(figures.window(srv_whole, t_a, t_b), srv_whole, out.get("client_requests"), rq))
    served = live.running_server.tree
    cost, warned = figures.cost_figures(tree.window_figures(phase.proc, t_a, t_b, tree.cpu_step_s(served)), out,
                                        served.clock)
    live.row.warnings += warned
    out.update(cost)
    out.update(figures.connection_figures(win_c, figures.window(srv_whole, t_a, t_b), phase.time_wait))
    if live.run.cell.load.tls != "off":
        out.update(figures.tls_figures(figures.window(srv_whole, t_a, t_b), win_c, out))
    if live.watch is not None and not search_step:
        out.update(live.watch.window(srv_whole, phase.t0, t_a, t_b))
    if live.shadow is not None:
        sw = live.shadow.snapshots(phase.t0, t_b)
        out["scrape_check"] = figures.server_figures(figures.window(sw, t_a, t_b), sw, requests=rq)
    if out.get("gen_cpu_cores") is None:
        out["gen_cpu_cores"] = gen_cpu_psutil
    out["gen_cpu_cores_psutil"] = gen_cpu_psutil
    gen_cpus = procfs.cpu_idle_steal(live.exp.pinning.generator) if phase.gen_cpus0 is not None else None
    if phase.gen_cpus0 is not None and gen_cpus is not None:
        out["gen_cpus_idle_cores"] = _per_second(gen_cpus[0], phase.gen_cpus0[0], elapsed_w)
        out["gen_cpus_steal_cores"] = _per_second(gen_cpus[1], phase.gen_cpus0[1], elapsed_w)
    phase.gen.window_end()
    if (hosts := phase.gen.host_figures(t_a, t_b)) is not None:
        out["load_hosts"] = hosts
    if phase.hosts0 is not None:
        out["hosts"] = hostwindow.figures(live, phase.hosts0, hostwindow.edge(live), phase.gen)
    if srv_whole:
        out["build_info"] = srv_whole[-1].label_values("xfer_build_info")
    out["timeseries"] = f"timeseries/{phase.stem}.csv"
    if not out.get("client_qps") and not search_step:
        raise CellFailed("no request completed in the measured window", phase.gen.tail())
    return out


def _per_second(now: float, then: float | None, elapsed_s: float) -> float | None:
    return (now - then) / elapsed_s if then is not None and elapsed_s > 0 else None


def _write_phase_series(live: Live, phase: Phase, search_step: bool) -> None:
    """What was sampled, even from a phase that failed: the per-second series, and a soak's own. A series
    that cannot be written costs the row a warning, not its figures."""
    if not phase.client:
        return
    try:
        server = live.source.snapshots(phase.t0 - 1, phase.client[-1].t)
        write_series(live.run_dir, phase.stem, phase.client, server, phase.t0, live.run.cell.kind.requests, phase.proc)
        if live.row.timeseries is None:
            live.row.timeseries = f"timeseries/{phase.stem}.csv"
        if live.watch is not None and not search_step:
            live.watch.write_series(live.run_dir / "timeseries" / f"{phase.stem}.soak.csv", server, phase.t0)
            live.row.soak_series = f"timeseries/{phase.stem}.soak.csv"
    except Exception as e:
        live.row.warnings.append(f"time series of {phase.stem} not written: {type(e).__name__}: {e}")
