"""One run (`run_one`) in four steps on one `RunRow`: start (the server on free ports, up at its ready line;
the [network] proxy; the metrics source on it), measure (one load phase, phase.py, or the steps of a
capacity search), collect (the soak's counts, the warnings), and stop. A run that fails gets a failed row
with the stderr tail; Ctrl-C (or SIGTERM) is raised on."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xferbench.analysis import metrics
from xferbench.analysis.row import RunRow
from xferbench.analysis.runmeta import Placement
from xferbench.config import Cell, Experiment
from xferbench.measure import capacity, figures, soak
from xferbench.measure.sources import MetricsSource, ScrapeSource
from xferbench.run.live import CellFailed, Live, affinity, new_row
from xferbench.run.matrix import Run
from xferbench.run.phase import load_phase
from xferbench.run.process import ServerStartError
from xferbench.run.progress_protocol import NullProgress
from xferbench.run.serverstart import network_proxy, start_server

if TYPE_CHECKING:  # the docker SDK is imported only when an experiment runs containers
    import docker

UNDERSERVED = capacity.ACHIEVED_MIN  # an open loop served below 95% of its rate did not get the load it asked for


def run_one(
    exp: Experiment,
    run: Run,
    run_dir: Path,
    source: MetricsSource,
    progress: NullProgress,
    barrier: threading.Barrier | None = None,
    engine: docker.DockerClient | None = None,
    placement: Placement | None = None,
) -> RunRow:
    """One cell, one repeat: start, measure, collect, and stop whatever was started. A failure anywhere makes
    a failed row, never an exception. `barrier`: a duet partner's load starts when this one's does.
    `engine`: the container engine of backend = "docker" (container_engine()). `placement`: the host check's, when
    the experiment has [hosts]."""
    live = Live(exp, run, run_dir, new_row(exp, run, source), source, progress, barrier, engine, placement=placement)
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


def start(live: Live) -> None:
    """The server (up once its ready line is read), the [network] proxy in front of it, the metrics
    source(s) on it, and in a soak the idle server's counts."""
    exp, cell, row = live.exp, live.run.cell, live.row
    live.progress.phase(live.run, "starting server" + (" container" if exp.backend == "docker" else ""))
    try:
        live.server = start_server(live)
    except ServerStartError as e:
        raise CellFailed(str(e), e.tail) from None
    server = live.server
    row.ready = server.ready
    row.pids = {"server": server.pid}  # on another host ([[servers]] host): its pid there
    # another host's pid says nothing of this machine's CPUs
    row.cpus = {"server": affinity(server.pid) if cell.host is None else None}
    if exp.network is not None:
        live.proxy, live.client_addr = network_proxy(exp, cell, server, live.log("toxiproxy"))
        row.network = {**exp.network.to_json(), "proxy": live.client_addr}
        row.pids["toxiproxy"] = live.proxy.proc.pid
    if not cell.kind.metrics:
        live.source = ScrapeSource()  # never begun: no server series, only the /proc figures
        return
    try:
        metrics_addr = cell.kind.metrics_at(server.addr)  # a command's whole URL (any path, https); ours host:port
    except KeyError as e:
        raise CellFailed(str(e.args[0]), list(server.tail)) from None
    live.source.also = cell.kind.requests.names if cell.kind.requests else ()
    live.source.begin(metrics_addr, {"xferbench_cell": cell.name, "server": cell.server})
    live.begun = True
    if live.source.name != "scrape":
        live.shadow = ScrapeSource()
        live.shadow.also = live.source.also
        live.shadow.begin(metrics_addr, {})
    if exp.soak is not None and cell.load.mode != "capacity":
        live.watch = soak.Watch(server.pid, f"http://{metrics_addr}/metrics", exp.soak)
        live.watch.before()  # the idle server, before any client connects


def measure(live: Live) -> None:
    """The load: one phase, or the steps of a capacity search."""
    load = live.run.cell.load
    if load.mode == "capacity":
        _capacity(live)
    else:
        live.row.set_figures(load_phase(live, load, live.stem))


def collect(live: Live) -> None:
    """After the load, the server still up: the soak's counts and verdict, then the row's warnings."""
    if live.watch is not None:
        live.row.set_figures(live.watch.after())
        live.row.soak_verdict, live.row.soak_flags = soak.verdict(live.row, live.watch.goal)
    live.row.warnings += warnings(live.row, live.run.cell)


def stop(live: Live) -> None:
    """Stops what start() started: the proxy, then the server (the row learns how it exited, and a
    container's own figures, also when the run failed: that is when they matter most), then releases the
    metrics source (with PromQL: removes the server's target)."""
    if live.proxy is not None:
        live.proxy.stop()
    if live.server is not None:
        code = live.server.stop()
        if live.row.ok and code not in live.run.cell.kind.clean_exits:  # a user's may end by the signal itself
            live.row.warnings.append(f"{live.run.cell.server} exited with status {code} on SIGTERM")
        live.row.set_figures(live.server.row_figures())
    if live.begun:
        with contextlib.suppress(Exception):
            live.source.end()


def _capacity(live: Live) -> None:
    """Capacity mode: one load phase per step of the search, on the one server; the row carries the
    capacity, every step, and the figures of the best passing step (its cost per request at capacity)."""
    load = live.run.cell.load
    row = live.row
    k = 0

    def measure_step(rate: float) -> capacity.Step:
        nonlocal k
        k += 1
        fig = load_phase(live, load.at_rate(rate), f"{live.stem}.step{k}", search_step=True)
        return capacity.Step(
            rate,
            fig.get("client_qps"),
            fig.get("client_p99_s"),
            fig.get("client_failure_rate"),
            fig.get("gen_cpu_cores"),
            fig.get("gen_cpus_idle_cores"),
            figures=fig,
        )

    res = capacity.search(
        measure_step, load.rate_per_second or 0.0, load.slo_p99 or 0.0, load.slo_failures, metrics.GEN_SATURATED_CORES
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


def _host_saturation(hosts: dict[str, dict[str, Any]]) -> list[str]:
    """The saturation check per load host (generators.LocustGenerator.host_figures): its Locust workers' mean CPU,
    or its CPUs' idle time."""
    out = []
    for name, h in hosts.items():
        if not h.get("saturated"):
            continue
        each, idle = h.get("gen_cpu_cores_per_process"), h.get("cpus_idle_cores")
        if each is not None and each > metrics.GEN_SATURATED_CORES:
            why = f"{each:.2f} cores per Locust worker (> {metrics.GEN_SATURATED_CORES:g} cores)"
        else:
            why = f"its CPUs {idle or 0:.2f} cores idle (< {metrics.GEN_IDLE_MIN_CORES:g})"
        out.append(f"load generator saturated on {name} ({h.get('address')}): {why}; the figures may describe the "
                   "generator rather than the server")
    return out


def warnings(row: RunRow, cell: Cell) -> list[str]:
    """What the reader of a finished run must know before trusting its figures."""
    w = []
    gen, idle = row.gen_cpu_cores, row.gen_cpus_idle_cores
    if gen is not None and cell.load.processes > 1:  # Locust distributed: the mean of its worker processes
        gen /= cell.load.processes
    if row.load_hosts is not None:  # its workers on other hosts: each host's own check, the master here aside
        w += _host_saturation(row.load_hosts)
    elif figures.generator_saturated(gen, idle):
        if gen is not None and gen > metrics.GEN_SATURATED_CORES:
            each = " per Locust process" if cell.load.processes > 1 else ""
            why = f"{gen:.2f} cores{each} (> {metrics.GEN_SATURATED_CORES:g} cores)"
        else:
            why = (
                f"its CPUs {idle or 0:.2f} cores idle (< {metrics.GEN_IDLE_MIN_CORES:g}), "
                f"{row.gen_cpus_steal_cores or 0:.2f} stolen, {row.gen_cpu_cores or 0:.2f} cores its own"
            )
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
    if row.server_qps is None and cell.kind.metrics:
        w.append("no server request metrics in the window")
    return w
