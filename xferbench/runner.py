"""The sweep: every cell x repeat in interleaved order, one row per run, written as it is measured.

One run (`run_one`) is four steps on one `RunRow`: start (the server on free ports, up at its ready line;
the [network] proxy; the metrics source on it), measure (the load generator, Locust or xferload
(xferbench/generator.py), both sides scraped every second for warm-up + duration, the row's figures from
the snapshots of the measured window; or the steps of a capacity search), collect (the soak's counts, the
warnings), and stop. A run that fails (server does not start, dies, the generator exits) gets a failed row
with the stderr tail and the sweep goes on; Ctrl-C (or
SIGTERM) stops the sweep, and what was measured is still written.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import itertools
import json
import math
import os
import platform
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import psutil

from xferbench import capacity, commandserver, figures, procfs, profile, servers, soak, stats, steps
from xferbench.experiment import Cell, Experiment, Load, slug
from xferbench.generator import Generator, generator_class
from xferbench.matrix import ORDER_SEED, Run, round_runs, round_units, schedule
from xferbench.process import READY_TIMEOUT_S, Server, ServerStartError, free_port, kill_all
from xferbench.progress_protocol import NullProgress
from xferbench.row import RunRow
from xferbench.runmeta import FILE, Machine, Network, Pinning, RunMeta, SoakGoal, UntilCIState
from xferbench.scrape import Snapshot
from xferbench.sources import MetricsSource, ScrapeSource
from xferbench.toxiproxy import Toxiproxy, ToxiproxyError, network_toxics

if TYPE_CHECKING:  # the docker SDK is imported only when an experiment runs containers
    import docker

    from xferbench.containers.backend import ContainerServer

UNDERSERVED = capacity.ACHIEVED_MIN  # an open loop served below 95% of its rate did not get the load it asked for
GEN_TAIL_MARGIN_S = 15.0  # the generator's own time bound (Locust -t, xferload --duration): a safety net


class CellFailed(RuntimeError):
    """A run that cannot go on; `tail` holds the last output lines of the process that explains why."""

    def __init__(self, message: str, tail: list[str]) -> None:
        super().__init__(message)
        self.tail = tail


@dataclass
class SweepResult:
    run_dir: Path
    rows: list[RunRow]
    interrupted: bool

    @property
    def failed(self) -> list[RunRow]:
        return [r for r in self.rows if r.status == "failed"]


def utc_stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def machine_info() -> Machine:
    return Machine(platform.node(), platform.platform(), platform.python_version(), os.cpu_count(),
                   psutil.virtual_memory().total)


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


def _install_sigterm() -> signal.Handlers | Callable[[int, FrameType | None], Any] | int | None:
    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt  # SIGTERM behaves like Ctrl-C: stop cleanly, write what was measured

    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        return None


# The run so far (its meta and rows) → the rank metric and each cell's comparison with the baseline on it.
Ranked = Callable[[RunMeta, list[RunRow]], tuple[str, list[stats.Comparison]]]


@dataclass(frozen=True)
class UntilCI:
    """`--until-ci 5% --budget 10m`: add rounds until every ranked ratio's 95% interval is within ±target
    (half-width, as a fraction), or the next round would not fit in the budget."""

    target: float
    budget_s: float
    ranked: Ranked  # the report's summary, passed in by the CLI: the runner sits below the report, never imports it
    max_repeats: int = 50


def sweep(
    exp: Experiment,
    run_dir: Path,
    source: MetricsSource | None = None,
    progress: NullProgress | None = None,
    on_row: Callable[[RunRow], None] | None = None,
    until_ci: UntilCI | None = None,
) -> SweepResult:
    """Runs the whole experiment into run_dir, round by round; returns the rows (also in runs.jsonl)."""
    source = source or ScrapeSource()
    progress = progress or NullProgress()
    engine = container_engine(exp)  # before anything is written: no engine, no run (EngineError)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "timeseries").mkdir(exist_ok=True)
    (run_dir / "logs").mkdir(exist_ok=True)
    meta = _meta(exp, source)
    meta.write(run_dir / FILE)
    rows: list[RunRow] = []
    interrupted = False
    old = _install_sigterm()
    progress.start_sweep(exp, schedule(exp), run_dir)
    started = time.monotonic()
    try:
        with open(run_dir / "runs.jsonl", "w", encoding="utf-8") as out:
            for repeat in itertools.count(1):
                if repeat > exp.repeats:
                    more = _more_rounds(meta, rows, until_ci, repeat, time.monotonic() - started)
                    if not more:
                        break
                    progress.add_runs(round_runs(exp, repeat, len(rows)))
                for unit in round_units(exp, repeat, len(rows)):
                    for run in unit:
                        progress.start_run(run)
                    unit_rows, interrupted = _run_unit(exp, unit, run_dir, source, progress, engine)
                    for run, row in zip(unit, unit_rows, strict=True):
                        rows.append(row)
                        out.write(json.dumps(row.to_json()) + "\n")
                        out.flush()
                        progress.end_run(run, row)
                        if on_row:
                            on_row(row)
                    if interrupted:
                        break
                if interrupted:
                    break
    except KeyboardInterrupt:
        interrupted = True  # a second Ctrl-C during a duet's cleanup: the run must not read as complete
        raise
    finally:
        progress.end_sweep()
        if exp.profile:
            _merge_profiles(run_dir, rows)
        if old is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, old)
        meta.finished_at = dt.datetime.now(dt.UTC).isoformat()
        meta.interrupted = interrupted
        meta.rounds = max((r.repeat for r in rows), default=0)
        meta.write(run_dir / FILE)
    return SweepResult(run_dir, rows, interrupted)


def container_engine(exp: Experiment) -> docker.DockerClient | None:
    """backend = "docker": a client of the engine (started when needed), after removing the containers of
    runners that died without cleaning up. Raises containers.engine.EngineError saying why there is none."""
    if exp.backend != "docker":
        return None
    from xferbench.containers import backend, engine

    client = engine.ensure()
    backend.remove_orphans(client)
    _ensure_default_images(exp, client)
    return client


def _ensure_default_images(exp: Experiment, client: docker.DockerClient) -> None:
    """Build (once; later only when their inputs change) the `xferbench images build` images of the cells
    that use a server's default image; an image named by `image =` or $XFERBENCH_IMAGE_* is the user's."""
    from xferbench.containers import backend, images

    def say(b: images.Built) -> None:
        if b.built:
            print(f"xferbench: built {b.tag} ({b.seconds:.0f} s)", file=sys.stderr, flush=True)

    names = sorted({image.name for c in exp.cells
                    if (image := servers.get(c.server).image) and backend.image_for(c) == images.tag(image.name)})
    if names:
        images.ensure(client, names, on_build=say)


def kill_everything() -> None:
    """Every child process and every container this runner started (Ctrl-C in a duet, SIGTERM)."""
    kill_all()
    if "xferbench.containers.backend" in sys.modules:
        from xferbench.containers import backend

        backend.kill_all()


def _merge_profiles(run_dir: Path, rows: list[RunRow]) -> None:
    """Per cell, one flame graph of all its profiled runs' samples (profile.cell_graph)."""
    runs: dict[str, list[str]] = {}
    for r in rows:
        if r.ok and r.flamegraph and (r.cpu_profile or {}).get("samples"):
            runs.setdefault(slug(r.cell), []).append(str(Path(r.flamegraph).with_suffix(".folded")))
    with contextlib.suppress(OSError, ValueError):  # the per-run graphs stand without it
        profile.merge_cells(run_dir, runs)


def _run_unit(
    exp: Experiment, unit: list[Run], run_dir: Path, source: MetricsSource, progress: NullProgress,
    engine: docker.DockerClient | None = None,
) -> tuple[list[RunRow], bool]:
    """One run, or a duet's two runs at once (each with its own metrics source, started together at a
    barrier so their measured windows coincide). Returns the rows and whether Ctrl-C stopped it."""
    if len(unit) == 1:
        try:
            return [run_one(exp, unit[0], run_dir, source, progress, engine=engine)], False
        except KeyboardInterrupt:
            return [_interrupted_row(exp, unit[0], source)], True
    barrier = threading.Barrier(len(unit))
    rows: list[RunRow | None] = [None] * len(unit)
    sources = [source, *(source.twin() for _ in unit[1:])]

    def go(i: int) -> None:
        rows[i] = run_one(exp, unit[i], run_dir, sources[i], progress, barrier, engine)

    threads = [threading.Thread(target=go, args=(i,), name=f"duet-{i}") for i in range(len(unit))]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except KeyboardInterrupt:
        barrier.abort()
        kill_everything()  # the duet's servers and Locusts: each thread then ends its run as failed
        for t in threads:
            t.join()
        return [_interrupted_row(exp, run, source) for run in unit], True
    return [r if r is not None else _interrupted_row(exp, run, source) for r, run in zip(rows, unit, strict=True)], False


def _interrupted_row(exp: Experiment, run: Run, source: MetricsSource) -> RunRow:
    row = new_row(exp, run, source)
    row.status, row.error = "interrupted", "stopped by Ctrl-C / SIGTERM"
    return row


def _meta(exp: Experiment, source: MetricsSource) -> RunMeta:
    pin = exp.pinning
    return RunMeta(
        experiment=exp.name,
        description=exp.description,
        path=str(exp.path) if exp.path else None,
        repeats=exp.repeats,
        warmup_s=exp.warmup_s,
        baseline=exp.baseline,
        aa_cell=exp.aa_cell,
        duet=exp.duet,
        alpha=exp.alpha,
        soak=SoakGoal(exp.soak.growth_max, exp.soak.held_slack) if exp.soak else None,
        order_seed=ORDER_SEED,
        pinning=Pinning(pin.mode, list(pin.server), list(pin.generator), pin.describe()),
        cells=[c.name for c in exp.cells],
        cell_configs={c.name: c.config() for c in exp.cells},
        source=source.name,
        started_at=dt.datetime.now(dt.UTC).isoformat(),
        machine=machine_info(),
        network=Network(**exp.network.to_json()) if exp.network else None,
        profile=exp.profile,
        backend=exp.backend,
    )


def _more_rounds(meta: RunMeta, rows: list[RunRow], until: UntilCI | None, repeat: int,
                 elapsed_s: float) -> bool:
    """Whether --until-ci wants another round; records the answer and why in meta.until_ci."""
    if until is None:
        return False
    metric, comparisons = until.ranked(meta, rows)
    widths = [ci_half_width(c) for c in comparisons]
    widest = max((w for w in widths if w is not None), default=None)
    per_round = elapsed_s / (repeat - 1)

    def stop(met: bool, why: str) -> bool:
        meta.until_ci = UntilCIState(until.target, until.budget_s, widest, repeat - 1, metric, met, why)
        return False

    if widths and all(w is not None and w <= until.target for w in widths):
        return stop(True, "every ranked interval is within the target")
    if elapsed_s + per_round > until.budget_s or repeat > until.max_repeats:
        return stop(False, "the budget would be exceeded by another round" if repeat <= until.max_repeats
                    else f"{until.max_repeats} rounds reached")
    return True


def ci_half_width(c: stats.Comparison) -> float | None:
    """A ratio interval's half-width as a fraction (on the log scale: [0.95, 1.05] → about 0.05)."""
    if c.lo is None or c.hi is None or c.lo <= 0:
        return None
    return math.exp((math.log(c.hi) - math.log(c.lo)) / 2) - 1


def new_row(exp: Experiment, run: Run, source: MetricsSource) -> RunRow:
    """A run's row before anything started: which run it is, and "ok" until something fails."""
    cell = run.cell
    return RunRow(
        cell=cell.name,
        server=cell.server,
        transport=cell.transport,
        experiment=exp.name,
        repeat=run.repeat,
        order=run.order,
        pair=run.pair,
        axes=dict(cell.axes),
        config=cell.config(),
        source=source.name,
        started_at=dt.datetime.now(dt.UTC).isoformat(),
        warmup_s=exp.warmup_s,
    )


@dataclass
class _Live:
    """One run from start to stop: its row, and what starting it set up for measuring, collecting and
    stopping."""

    exp: Experiment
    run: Run
    run_dir: Path
    row: RunRow
    source: MetricsSource
    progress: NullProgress
    barrier: threading.Barrier | None = None
    engine: docker.DockerClient | None = None  # backend = "docker"
    server: Server | ContainerServer | None = None
    proxy: Toxiproxy | None = None
    shadow: MetricsSource | None = None  # with PromQL, the built-in scraper alongside, to check every row
    client_addr: str | None = None  # where the generator connects: the [network] proxy, else the server itself
    watch: soak.Watch | None = None  # the leak check, in a soak
    begun: bool = False  # the metrics source has begun, so it must end

    @property
    def stem(self) -> str:
        """`<cell>.r<repeat>`, and `.with-<partner>` in a duet: the name of the run's logs and series."""
        run = self.run
        duet = f".with-{slug(run.pair.split('/', 1)[1])}" if "/" in run.pair else ""
        return f"{run.cell.slug}.r{run.repeat}{duet}"

    def log(self, what: str, stem: str | None = None) -> Path:
        return self.run_dir / "logs" / f"{stem or self.stem}.{what}.log"

    @property
    def running_server(self) -> Server | ContainerServer:
        assert self.server is not None, "the server is started first"
        return self.server


def run_one(
    exp: Experiment,
    run: Run,
    run_dir: Path,
    source: MetricsSource,
    progress: NullProgress,
    barrier: threading.Barrier | None = None,
    engine: docker.DockerClient | None = None,
) -> RunRow:
    """One cell, one repeat: start, measure, collect, and stop whatever was started. A failure anywhere makes
    a failed row, never an exception. `barrier`: a duet partner's load starts when this one's does.
    `engine`: the container engine of backend = "docker" (container_engine())."""
    live = _Live(exp, run, run_dir, new_row(exp, run, source), source, progress, barrier, engine)
    try:
        start(live)
        measure(live)
        collect(live)
    except Exception as e:
        if barrier is not None:
            barrier.abort()  # the duet partner must not wait for a load that will never start
        if (ctrl_c := _interruption(e)) is not None:
            raise ctrl_c from None  # a cleanup step failed while Ctrl-C unwound: still an interruption
        if isinstance(e, CellFailed):
            live.row.fail(str(e), e.tail)
        else:
            live.row.fail(f"{type(e).__name__}: {e}", list(live.server.tail) if live.server is not None else [])
    finally:
        stop(live)
    return live.row


def _interruption(e: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C (or SIGTERM) that an exception raised during its unwinding replaced, if any."""
    seen: BaseException | None = e.__context__
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return seen
        seen = seen.__context__
    return None


def start(live: _Live) -> None:
    """The server (up once its ready line is read), the [network] proxy in front of it, the metrics
    source(s) on it, and in a soak the idle server's counts."""
    exp, cell, row = live.exp, live.run.cell, live.row
    live.progress.phase(live.run, "starting server" + (" container" if exp.backend == "docker" else ""))
    try:
        live.server = _start_server(live)
    except ServerStartError as e:
        raise CellFailed(str(e), e.tail) from None
    server = live.server
    row.ready = server.ready
    row.pids = {"server": server.proc.pid}
    row.cpus = {"server": _affinity(server.proc.pid)}
    if exp.network is not None:
        live.proxy, live.client_addr = _network_proxy(exp, cell, server, live.log("toxiproxy"))
        row.network = {**exp.network.to_json(), "proxy": live.client_addr}
        row.pids["toxiproxy"] = live.proxy.proc.pid
    if cell.command is not None and cell.command.metrics is None:
        live.source = ScrapeSource()  # never begun: no server series, only the /proc figures
        return
    try:
        metrics_addr = server.addr(servers.get(cell.server).metrics_key)
    except KeyError as e:
        raise CellFailed(str(e.args[0]), list(server.tail)) from None
    live.source.begin(metrics_addr, {"xferbench_cell": cell.name, "server": cell.server})
    live.begun = True
    if live.source.name != "scrape":
        live.shadow = ScrapeSource()
        live.shadow.begin(metrics_addr, {})
    if exp.soak is not None and cell.load.mode != "capacity":
        live.watch = soak.Watch(server.proc.pid, f"http://{metrics_addr}/metrics", exp.soak)
        live.watch.before()  # the idle server, before any client connects


def _start_server(live: _Live) -> Server | ContainerServer:
    exp, cell = live.exp, live.run.cell
    if cell.command is not None:
        return commandserver.start(cell, live.log("server"), exp.pinning.server or None)
    if exp.backend != "docker":
        return Server(cell.server, cell.server_argv(), cell.server_env(), log_path=live.log("server"),
                      cpus=exp.pinning.server or None, ready_word=servers.get(cell.server).ready_word)
    from xferbench.containers.backend import ContainerServer

    if live.engine is None:
        live.engine = container_engine(exp)
    assert live.engine is not None
    server = ContainerServer(live.engine, cell, log_path=live.log("server"), cpus=exp.pinning.server,
                             run_label=live.run_dir.name)
    live.row.container = server.describe()
    return server


def _exit_text(server: Server | ContainerServer) -> str:
    """How a server that died went: "exited with status 2", or a container's "was OOM-killed (...)"."""
    reason = getattr(server, "exit_reason", None)
    return str(reason()) if reason is not None else f"exited with status {server.proc.returncode}"


def measure(live: _Live) -> None:
    """The load: one phase, or the steps of a capacity search."""
    load = live.run.cell.load
    if load.mode == "capacity":
        _capacity(live)
    else:
        live.row.set_figures(_load_phase(live, load, live.stem))


def collect(live: _Live) -> None:
    """After the load, the server still up: the soak's counts and verdict, then the row's warnings."""
    if live.watch is not None:
        live.row.set_figures(live.watch.after())
        live.row.soak_verdict, live.row.soak_flags = soak.verdict(live.row, live.watch.goal)
    live.row.warnings += warnings(live.row, live.run.cell)


def stop(live: _Live) -> None:
    """Stops what start() started: the proxy, then the server (the row learns how it exited), then releases
    the metrics source (with PromQL: removes the server's target)."""
    if live.proxy is not None:
        live.proxy.stop()
    if live.server is not None:
        code = live.server.stop()
        if live.row.ok and code not in (0, None):
            live.row.warnings.append(f"{live.run.cell.server} exited with status {code} on SIGTERM")
        _container_figures(live)
    if live.begun:
        with contextlib.suppress(Exception):
            live.source.end()


def _container_figures(live: _Live) -> None:
    """A container's cgroup figures into the row, and whether the kernel OOM-killed it (also when the run
    failed: that is when they matter most)."""
    if live.server is None or live.exp.backend != "docker":
        return
    from xferbench.containers.backend import ContainerServer

    server = live.server
    if not isinstance(server, ContainerServer):
        return
    live.row.set_figures(server.figures)
    live.row.ctr_oom_killed = server.oom_killed
    if server.oom_kills is not None:
        live.row.ctr_oom_kills = server.oom_kills  # the count as the container ended, after any last reading


def _network_proxy(exp: Experiment, cell: Cell, server: Server | ContainerServer, log_path: Path) -> tuple[Toxiproxy, str]:
    """[network]: a toxiproxy-server in front of the cell's transport listener, carrying the experiment's
    toxics; returns it and the address Locust connects to instead. It runs on the load generator's CPUs: it
    is the client's side of the wire and must not take the server's CPU time."""
    try:
        proxy = Toxiproxy(log_path=log_path, cpus=exp.pinning.generator or None)
    except ServerStartError as e:
        raise CellFailed(str(e), e.tail) from None
    try:
        listen = proxy.create_proxy(cell.transport, server.addr(cell.transport))
        assert exp.network is not None
        for toxic in network_toxics(exp.network):
            proxy.add_toxic(cell.transport, toxic)
    except (ToxiproxyError, KeyError) as e:
        tail = proxy.tail()
        proxy.stop()
        raise CellFailed(f"toxiproxy: {e}", tail) from None
    return proxy, listen


def _affinity(pid: int) -> list[int] | None:
    """The CPUs a process may really run on, read back from the kernel (not what was asked for)."""
    try:
        return sorted(os.sched_getaffinity(pid))
    except OSError:
        return None


# ---------------------------------------------------------------------------------------------- one load phase


@dataclass
class _Phase:
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
    proc: list[procfs.Sample] = field(default_factory=list)  # the server's /proc/PID at every tick


def _load_phase(live: _Live, load: Load, stem: str, search_step: bool = False) -> dict[str, Any]:
    """The load generator against the running server for warm-up + duration, scraping both sides every
    second; the figures of the measured window. Raises CellFailed (a window without one completed call too,
    unless it is a step of a capacity search, where that is the step's answer); the generator is stopped
    whatever happens."""
    phase = _start_generator(live, load, stem)
    unwatch = None
    try:
        try:
            phase.gen.wait_ready()
        except ServerStartError as e:
            raise CellFailed(str(e), e.tail) from None
        unwatch = live.source.watch_client(f"127.0.0.1:{phase.gen.metrics_port}",
                                           {"xferbench_cell": live.run.cell.name})
        if live.barrier is not None:
            try:
                live.barrier.wait(timeout=READY_TIMEOUT_S)
            except threading.BrokenBarrierError:
                raise CellFailed("the duet partner failed before its load started", phase.gen.tail()) from None
        _sample(live, phase, profiled=live.exp.profile and not search_step)
        out = _phase_figures(live, phase, search_step)
        if live.run.cell.load.levels and not search_step:
            out["steps"] = _step_figures(live, phase)
        if phase.profiler is not None:
            out.update(_profile_figures(live, phase.profiler))
            phase.profiler = None
        return out
    finally:
        if phase.profiler is not None:
            phase.profiler.sampler.stop()
        if unwatch is not None:
            unwatch()  # a last scrape, then the target goes (Prometheus keeps the series); before the stop
        phase.gen.stop(grace_s=5.0)
        if phase.gen.stats is not None:
            live.row.locust_stats = phase.gen.stats
        _write_phase_series(live, phase, search_step)


def _start_generator(live: _Live, load: Load, stem: str) -> _Phase:
    """The cell's load generator (load.driver), pinned to the generator's CPUs."""
    cell = live.run.cell
    total = live.exp.warmup_s + load.duration_s
    kind = generator_class(load.driver)
    live.progress.phase(live.run, f"starting {kind.name}" + (f" at {load.rate}/s" if load.rate else ""))
    host = f"{cell.transport}://{live.client_addr or live.running_server.addr(cell.transport)}"
    gen = kind(host, load, free_port(), total + GEN_TAIL_MARGIN_S, live.log(kind.name, stem),
               cpus=live.exp.pinning.generator or None)
    assert live.row.pids is not None and live.row.cpus is not None  # start() set them
    live.row.pids[kind.name] = gen.proc.pid
    live.row.cpus["generator"] = _affinity(gen.proc.pid)
    return _Phase(gen, stem, total)


def _sample(live: _Live, phase: _Phase, profiled: bool = False) -> None:
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
            # A bounded wait that returns early if the server exits.
            with contextlib.suppress(Exception):
                server.proc.wait(timeout=delay)
        sample = getattr(server, "sample", None)
        if sample is not None:
            sample()  # a container's cgroup figures: the last reading before an OOM kill is the one kept
        if not server.alive():
            raise CellFailed(
                f"{server.name} {_exit_text(server)} during the run (at {time.monotonic() - m0:.1f}s)",
                list(server.tail),
            )
        if not gen.alive():
            raise CellFailed(f"{gen.name} exited with status {gen.proc.returncode} during the run", gen.tail())
        snap = gen.scrape()
        if (tw := procfs.time_wait(tw_ports)) is not None:
            phase.time_wait.append(tw)
        _gen_tick(live, phase)
        if (proc := procfs.sample(server.proc.pid)) is not None:
            phase.proc.append(proc)
        if live.begun:
            live.source.tick()
        if live.watch is not None:
            live.watch.tick()
        if live.shadow is not None:
            live.shadow.tick()
        if k == phase.warm_tick:
            phase.cpu_self0, phase.cpu_gen0, phase.t_warm = _self_cpu(), _tree_cpu(gen.proc.pid), time.monotonic()
            phase.gen_cpus0 = procfs.cpu_idle_steal(live.exp.pinning.generator) if live.exp.pinning.generator else None
            if profiled:
                phase.profiler = _start_profile(live, phase, ticks - k)
        if snap is not None:
            phase.client.append(snap)
            qps, p95 = figures.live(prev, snap)
            prev = snap
            live.progress.live(live.run, time.monotonic() - m0, phase.total_s, qps, p95)


def _load_ports(live: _Live) -> set[int]:
    """The ports the load connects to: the server's for the cell's transport, and the [network] proxy's."""
    addrs = [live.running_server.addr(live.run.cell.transport), live.client_addr or ""]
    return {int(a.rpartition(":")[2]) for a in addrs if a.rpartition(":")[2].isdigit()}


def _gen_tick(live: _Live, phase: _Phase) -> None:
    """The generator CPUs' idle and stolen time now: a stepped run's per-level saturation check needs it."""
    if live.exp.pinning.generator and live.run.cell.load.levels:
        idle = procfs.cpu_idle_steal(live.exp.pinning.generator)
        if idle is not None:
            phase.gen_ticks.append((time.time(), *idle))


def _step_figures(live: _Live, phase: _Phase) -> list[dict[str, Any]]:
    """A stepped load: one window per level out of this one run (xferbench/steps.py)."""
    load = live.run.cell.load
    server = live.source.snapshots(phase.t0, phase.client[-1].t) if phase.client else []
    out = steps.per_step(phase.client, server, phase.gen_ticks, load.levels, load.settle_s)
    live.row.warnings += steps.warnings(out)
    return out


def _phase_figures(live: _Live, phase: _Phase, search_step: bool) -> dict[str, Any]:
    """The row's figures from the snapshots of the measured window (after the warm-up tick)."""
    elapsed_w = time.monotonic() - phase.t_warm
    out: dict[str, Any] = {"runner_cpu_cores": _per_second(_self_cpu(), phase.cpu_self0, elapsed_w)}
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
    out.update(figures.server_figures(figures.window(srv_whole, t_a, t_b), srv_whole, out["client_requests"]))
    out.update(procfs.window_figures(phase.proc, t_a, t_b, out["client_requests"]))
    out.update(figures.connection_figures(win_c, figures.window(srv_whole, t_a, t_b), phase.time_wait))
    if live.watch is not None and not search_step:
        out.update(live.watch.window(srv_whole, phase.t0, t_a, t_b))
    if live.shadow is not None:
        sw = live.shadow.snapshots(phase.t0, t_b)
        out["scrape_check"] = figures.server_figures(figures.window(sw, t_a, t_b), sw)
    if out.get("gen_cpu_cores") is None:
        out["gen_cpu_cores"] = gen_cpu_psutil
    out["gen_cpu_cores_psutil"] = gen_cpu_psutil
    gen_cpus = procfs.cpu_idle_steal(live.exp.pinning.generator) if phase.gen_cpus0 is not None else None
    if phase.gen_cpus0 is not None and gen_cpus is not None:
        out["gen_cpus_idle_cores"] = _per_second(gen_cpus[0], phase.gen_cpus0[0], elapsed_w)
        out["gen_cpus_steal_cores"] = _per_second(gen_cpus[1], phase.gen_cpus0[1], elapsed_w)
    if srv_whole:
        out["build_info"] = srv_whole[-1].label_values("xfer_build_info")
    out["timeseries"] = f"timeseries/{phase.stem}.csv"
    if not out.get("client_qps") and not search_step:
        raise CellFailed("no request completed in the measured window", phase.gen.tail())
    return out


def _start_profile(live: _Live, phase: _Phase, seconds: float) -> profile.Started:
    """The server's CPU sampling from now (the warm-up's end) for the rest of the measured window."""
    server, kind = live.running_server, live.run.cell.server
    try:
        return profile.start(kind, server.proc.pid, server.addr(servers.get(kind).metrics_key), seconds,
                             live.run_dir, phase.stem)
    except profile.ProfileError as e:
        raise CellFailed(str(e), []) from None


def _profile_figures(live: _Live, started: profile.Started) -> dict[str, Any]:
    """The window's CPU attribution and flame graph. A profiled run without its profile fails: a
    comparison must never mix profiled windows with unprofiled ones."""
    try:
        shares, graph, notes = profile.finish(started, live.run_dir, f"{live.run.cell.name} r{live.run.repeat}")
    except profile.ProfileError as e:
        raise CellFailed(str(e), []) from None
    live.row.warnings += notes
    return {"cpu_profile": shares, "flamegraph": graph}


def _per_second(now: float, then: float | None, elapsed_s: float) -> float | None:
    return (now - then) / elapsed_s if then is not None and elapsed_s > 0 else None


def _write_phase_series(live: _Live, phase: _Phase, search_step: bool) -> None:
    """What was sampled, even from a phase that failed: the per-second series, and a soak's own. A series
    that cannot be written costs the row a warning, not its figures."""
    if not phase.client:
        return
    try:
        server = live.source.snapshots(phase.t0 - 1, phase.client[-1].t)
        _write_series(live.run_dir, phase.stem, phase.client, server, phase.t0)
        if live.row.timeseries is None:
            live.row.timeseries = f"timeseries/{phase.stem}.csv"
        if live.watch is not None and not search_step:
            live.watch.write_series(live.run_dir / "timeseries" / f"{phase.stem}.soak.csv", server, phase.t0)
            live.row.soak_series = f"timeseries/{phase.stem}.soak.csv"
    except Exception as e:
        live.row.warnings.append(f"time series of {phase.stem} not written: {type(e).__name__}: {e}")


def _capacity(live: _Live) -> None:
    """Capacity mode: one load phase per step of the search, on the one server; the row carries the
    capacity, every step, and the figures of the best passing step (its cost per request at capacity)."""
    load = live.run.cell.load
    row = live.row
    k = 0

    def measure_step(rate: float) -> capacity.Step:
        nonlocal k
        k += 1
        fig = _load_phase(live, load.at_rate(rate), f"{live.stem}.step{k}", search_step=True)
        return capacity.Step(
            rate, fig.get("client_qps"), fig.get("client_p99_s"), fig.get("client_failure_rate"),
            fig.get("gen_cpu_cores"), fig.get("gen_cpus_idle_cores"), figures=fig,
        )

    res = capacity.search(
        measure_step, load.rate_per_second or 0.0, load.slo_p99 or 0.0, load.slo_failures, figures.GEN_SATURATED_CORES
    )
    row.capacity_status = res.status
    row.capacity_steps = [s.to_json() for s in res.steps]
    best = res.best
    if best is not None:
        row.set_figures(best.figures)  # its timeseries too
    row.capacity_rps = res.capacity_rps
    if res.status == capacity.GENERATOR_BOUND:
        row.warnings.append(
            f"capacity search stopped: the load generator saturated at {res.steps[-1].rate:.0f} req/s before the "
            "server; the capacity is a lower bound"
        )
    elif res.status != capacity.FOUND:
        row.warnings.append(f"capacity search: {res.status}")


def warnings(row: RunRow, cell: Cell) -> list[str]:
    """What the reader of a finished run must know before trusting its figures."""
    w = []
    gen, idle = row.gen_cpu_cores, row.gen_cpus_idle_cores
    if gen is not None and cell.load.processes > 1:  # Locust distributed: the mean of its worker processes
        gen /= cell.load.processes
    if figures.generator_saturated(gen, idle):
        if gen is not None and gen > figures.GEN_SATURATED_CORES:
            each = " per Locust process" if cell.load.processes > 1 else ""
            why = f"{gen:.2f} cores{each} (> {figures.GEN_SATURATED_CORES:g} cores)"
        else:
            why = (f"its CPUs {idle or 0:.2f} cores idle (< {figures.GEN_IDLE_MIN_CORES:g}), "
                   f"{row.gen_cpus_steal_cores or 0:.2f} stolen, {row.gen_cpu_cores or 0:.2f} cores its own")
        w.append(f"load generator saturated: {why}; the figures may describe the generator rather than the server")
    if row.client_failures:
        w.append(f"{int(row.client_failures)} failed requests")
    if cell.load.mode == "open" and row.client_qps is not None:
        offered = cell.load.rate_per_second or 0.0
        if row.client_qps < UNDERSERVED * offered:
            w.append(
                f"offered {offered:g} req/s but {row.client_qps:.1f} were served: the server or the generator fell "
                "behind, so latencies include queueing; lower load.rate"
            )
    want = cell.flags.get("alloc")
    if want:
        got = (row.build_info or {}).get("allocator") or (row.ready or {}).get("alloc")
        if got and got != want:
            w.append(f"asked for allocator {want}, the server reports {got}")
    if row.server_qps is None:
        w.append("no server request metrics in the window")
    return w


def _write_series(run_dir: Path, stem: str, client: list[Snapshot], server: list[Snapshot], t0: float) -> None:
    rows = figures.series(client, server, t0)
    with open(run_dir / "timeseries" / f"{stem}.csv", "w", newline="", encoding="utf-8") as f:
        wr = csv.DictWriter(f, fieldnames=figures.SERIES_COLUMNS)
        wr.writeheader()
        for r in rows:
            wr.writerow({k: ("" if v is None else v) for k, v in r.items()})
    with open(run_dir / "timeseries" / f"{stem}.snapshots.jsonl", "w", encoding="utf-8") as f:
        for side, snaps in (("client", client), ("server", server)):
            for s in snaps:
                f.write(json.dumps({"side": side, **s.to_json()}) + "\n")
