"""The sweep: every cell x repeat in interleaved order, one row per run, written as it is measured.

One run: start the server on free ports (ready line), register it with the metrics source, start Locust
headless, scrape both sides every second for warm-up + duration, compute the row from the snapshots of the
measured window, stop Locust and the server. A run that fails (server does not start, dies, Locust exits)
gets a failed row with the stderr tail and the sweep goes on; Ctrl-C (or SIGTERM) stops the sweep, and
what was measured is still written.
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
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from xferbench import capacity, figures, soak
from xferbench.experiment import Experiment, Load, slug
from xferbench.matrix import ORDER_SEED, Run, round_runs, round_units, schedule
from xferbench.process import READY_TIMEOUT_S, Locust, Server, ServerStartError, free_port, kill_all, locust_argv
from xferbench.report.summary import summarize
from xferbench.scrape import Snapshot, scrape
from xferbench.sources import MetricsSource, ScrapeSource
from xferbench.toxiproxy import Toxiproxy, ToxiproxyError, network_toxics

UNDERSERVED = capacity.ACHIEVED_MIN  # an open loop served below 95% of its rate did not get the load it asked for
LOCUST_TAIL_MARGIN_S = 15.0  # Locust's own -t is a safety net past the runner's window


class CellFailed(RuntimeError):
    def __init__(self, message: str, tail: list[str]) -> None:
        super().__init__(message)
        self.tail = tail


@dataclass
class SweepResult:
    run_dir: Path
    rows: list[dict[str, Any]]
    interrupted: bool


class NullProgress:
    def start_sweep(self, exp: Experiment, runs: list[Run], run_dir: Path) -> None: ...
    def add_runs(self, runs: list[Run]) -> None: ...
    def start_run(self, run: Run) -> None: ...
    def phase(self, run: Run, text: str) -> None: ...
    def live(self, run: Run, elapsed: float, total: float, qps: float | None, p95: float | None) -> None: ...
    def end_run(self, run: Run, row: dict[str, Any]) -> None: ...
    def end_sweep(self) -> None: ...


def utc_stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def machine_info() -> dict[str, Any]:
    return {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "mem_bytes": psutil.virtual_memory().total,
    }


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


def _install_sigterm() -> Any:
    def handler(signum, frame):  # SIGTERM behaves like Ctrl-C: stop cleanly, write what was measured
        raise KeyboardInterrupt

    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        return None


@dataclass(frozen=True)
class UntilCI:
    """`--until-ci 5% --budget 10m`: add rounds until every ranked ratio's 95% interval is within ±target
    (half-width, as a fraction), or the next round would not fit in the budget."""

    target: float
    budget_s: float
    max_repeats: int = 50


def sweep(
    exp: Experiment,
    run_dir: Path,
    source: MetricsSource | None = None,
    progress: Any = None,
    on_row: Any = None,
    until_ci: UntilCI | None = None,
) -> SweepResult:
    """Runs the whole experiment into run_dir, round by round; returns the rows (also in runs.jsonl)."""
    source = source or ScrapeSource()
    progress = progress or NullProgress()
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "timeseries").mkdir(exist_ok=True)
    (run_dir / "logs").mkdir(exist_ok=True)
    meta = _meta(exp, source)
    (run_dir / "experiment.json").write_text(json.dumps(meta, indent=2))
    rows: list[dict[str, Any]] = []
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
                    unit_rows, interrupted = _run_unit(exp, unit, run_dir, source, progress)
                    for run, row in zip(unit, unit_rows, strict=True):
                        rows.append(row)
                        out.write(json.dumps(row) + "\n")
                        out.flush()
                        progress.end_run(run, row)
                        if on_row:
                            on_row(row)
                    if interrupted:
                        break
                if interrupted:
                    break
    finally:
        progress.end_sweep()
        if old is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, old)
        meta["finished_at"] = dt.datetime.now(dt.UTC).isoformat()
        meta["interrupted"] = interrupted
        meta["rounds"] = max((r["repeat"] for r in rows), default=0)
        (run_dir / "experiment.json").write_text(json.dumps(meta, indent=2))
    return SweepResult(run_dir, rows, interrupted)


def _run_unit(
    exp: Experiment, unit: list[Run], run_dir: Path, source: MetricsSource, progress: Any
) -> tuple[list[dict[str, Any]], bool]:
    """One run, or a duet's two runs at once (each with its own metrics source, started together at a
    barrier so their measured windows coincide). Returns the rows and whether Ctrl-C stopped it."""
    if len(unit) == 1:
        try:
            return [run_one(exp, unit[0], run_dir, source, progress)], False
        except KeyboardInterrupt:
            return [_interrupted_row(exp, unit[0], source)], True
    barrier = threading.Barrier(len(unit))
    rows: list[dict[str, Any] | None] = [None] * len(unit)
    sources = [source, *(source.twin() for _ in unit[1:])]

    def go(i: int) -> None:
        rows[i] = run_one(exp, unit[i], run_dir, sources[i], progress, barrier)

    threads = [threading.Thread(target=go, args=(i,), name=f"duet-{i}") for i in range(len(unit))]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except KeyboardInterrupt:
        barrier.abort()
        kill_all()  # the duet's servers and Locusts: each thread then ends its run as failed
        for t in threads:
            t.join()
        return [_interrupted_row(exp, run, source) for run in unit], True
    return [r if r is not None else _interrupted_row(exp, run, source) for r, run in zip(rows, unit, strict=True)], False


def _interrupted_row(exp: Experiment, run: Run, source: MetricsSource) -> dict[str, Any]:
    row = _base_row(exp, run, source)
    row.update(status="interrupted", error="stopped by Ctrl-C / SIGTERM")
    return row


def _meta(exp: Experiment, source: MetricsSource) -> dict[str, Any]:
    pin = exp.pinning
    return {
        "experiment": exp.name,
        "description": exp.description,
        "path": str(exp.path) if exp.path else None,
        "repeats": exp.repeats,
        "warmup_s": exp.warmup_s,
        "baseline": exp.baseline,
        "aa_cell": exp.aa_cell,
        "duet": exp.duet,
        "alpha": exp.alpha,
        "soak": {"growth_max": exp.soak.growth_max, "held_slack": exp.soak.held_slack} if exp.soak else None,
        "order_seed": ORDER_SEED,
        "pinning": {"mode": pin.mode, "server": list(pin.server), "generator": list(pin.generator), "text": pin.describe()},
        "cells": [c.name for c in exp.cells],
        "cell_configs": {c.name: c.config() for c in exp.cells},
        "source": source.name,
        "started_at": dt.datetime.now(dt.UTC).isoformat(),
        "machine": machine_info(),
        "network": exp.network.to_json() if exp.network else None,
    }


def _more_rounds(meta: dict[str, Any], rows: list[dict[str, Any]], until: UntilCI | None, repeat: int,
                 elapsed_s: float) -> bool:
    """Whether --until-ci wants another round; records the answer and why in meta["until_ci"]."""
    if until is None:
        return False
    s = summarize(meta, rows)
    widths = [ci_half_width(v.comparison) for v in s.verdicts if v.metric == s.rank_metric]
    widest = max((w for w in widths if w is not None), default=None)
    per_round = elapsed_s / (repeat - 1)
    state = {"target": until.target, "budget_s": until.budget_s, "widest": widest, "rounds": repeat - 1,
             "metric": s.rank_metric}
    if widths and all(w is not None and w <= until.target for w in widths):
        meta["until_ci"] = {**state, "met": True, "why": "every ranked interval is within the target"}
        return False
    if elapsed_s + per_round > until.budget_s or repeat > until.max_repeats:
        meta["until_ci"] = {**state, "met": False,
                            "why": "the budget would be exceeded by another round" if repeat <= until.max_repeats
                            else f"{until.max_repeats} rounds reached"}
        return False
    return True


def ci_half_width(c: Any) -> float | None:
    """A ratio interval's half-width as a fraction (on the log scale: [0.95, 1.05] → about 0.05)."""
    if c.lo is None or c.hi is None or c.lo <= 0:
        return None
    return math.exp((math.log(c.hi) - math.log(c.lo)) / 2) - 1


def _base_row(exp: Experiment, run: Run, source: MetricsSource) -> dict[str, Any]:
    cell = run.cell
    return {
        "experiment": exp.name,
        "cell": cell.name,
        "repeat": run.repeat,
        "order": run.order,
        "pair": run.pair,
        "server": cell.server,
        "transport": cell.transport,
        "axes": cell.axes,
        "config": cell.config(),
        "status": "ok",
        "error": None,
        "stderr_tail": None,
        "warnings": [],
        "source": source.name,
        "started_at": dt.datetime.now(dt.UTC).isoformat(),
        "warmup_s": exp.warmup_s,
        "duration_s": None,
        "ready": None,
        "build_info": None,
    }


@dataclass
class _Cell:
    """What one run's load phases share: the running server and where their figures go."""

    exp: Experiment
    run: Run
    run_dir: Path
    stem: str
    server: Server
    source: MetricsSource
    shadow: MetricsSource | None
    progress: Any
    barrier: threading.Barrier | None = None
    client_addr: str | None = None  # where Locust connects: the [network] proxy, else the server itself
    watch: soak.Watch | None = None  # the leak check, in a soak


def run_one(
    exp: Experiment,
    run: Run,
    run_dir: Path,
    source: MetricsSource,
    progress: Any,
    barrier: threading.Barrier | None = None,
) -> dict[str, Any]:
    """One cell, one repeat: start the server, drive it (one load phase, or a capacity search of several),
    stop it. Returns the row; a failure anywhere makes a failed row, never an exception. `barrier`: a duet
    partner's load starts when this one's does."""
    cell = run.cell
    row = _base_row(exp, run, source)
    stem = f"{cell.slug}.r{run.repeat}" + (f".with-{slug(run.pair.split('/', 1)[1])}" if "/" in run.pair else "")
    server: Server | None = None
    proxy: Toxiproxy | None = None
    begun = False
    try:
        progress.phase(run, "starting server")
        try:
            server = Server(
                cell.server,
                cell.server_argv(),
                cell.server_env(),
                log_path=run_dir / "logs" / f"{stem}.server.log",
                cpus=exp.pinning.server or None,
            )
        except ServerStartError as e:
            raise CellFailed(str(e), e.tail) from None
        row["ready"] = server.ready
        row["pids"] = {"server": server.proc.pid}
        row["cpus"] = {"server": _affinity(server.proc.pid)}
        client_addr = None
        if exp.network is not None:
            proxy, client_addr = _network_proxy(exp, cell, server, run_dir / "logs" / f"{stem}.toxiproxy.log")
            row["network"] = {**exp.network.to_json(), "proxy": client_addr}
            row["pids"]["toxiproxy"] = proxy.proc.pid
        try:
            metrics_addr = server.addr("metrics")
        except KeyError as e:
            raise CellFailed(str(e.args[0]), list(server.tail)) from None
        source.begin(metrics_addr, {"xferbench_cell": cell.name, "server": cell.server})
        begun = True
        # With PromQL, the built-in scraper runs alongside, so every row can be checked against it.
        shadow = ScrapeSource() if source.name != "scrape" else None
        if shadow is not None:
            shadow.begin(metrics_addr, {})
        ctx = _Cell(exp, run, run_dir, stem, server, source, shadow, progress, barrier, client_addr=client_addr)
        if exp.soak is not None and cell.load.mode != "capacity":
            ctx.watch = soak.Watch(server.proc.pid, f"http://{metrics_addr}/metrics", exp.soak)
            ctx.watch.before()  # the idle server, before any client connects
        if cell.load.mode == "capacity":
            _capacity(ctx, row)
        else:
            row.update(_load_phase(ctx, cell.load, stem, row))
        if ctx.watch is not None:
            _soak_end(ctx.watch, row)
        _warnings(row, cell)
    except Exception as e:
        if barrier is not None:
            barrier.abort()  # the duet partner must not wait for a load that will never start
        row["status"] = "failed"
        if isinstance(e, CellFailed):
            row["error"], tail = str(e), e.tail
        else:
            row["error"] = f"{type(e).__name__}: {e}"
            tail = list(server.tail) if server is not None else []
        row["stderr_tail"] = tail[-20:]
    finally:
        if proxy is not None:
            proxy.stop()
        if server is not None:
            code = server.stop()
            if row["status"] == "ok" and code not in (0, None):
                row["warnings"].append(f"{cell.server} exited with status {code} on SIGTERM")
        if begun:
            with contextlib.suppress(Exception):
                source.end()
    return row


def _network_proxy(exp: Experiment, cell: Any, server: Server, log_path: Path) -> tuple[Toxiproxy, str]:
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


def _load_phase(ctx: _Cell, load: Load, stem: str, row: dict[str, Any], search_step: bool = False) -> dict[str, Any]:
    """Locust against the running server for warm-up + duration, scraping both sides every second; the
    figures of the measured window. Raises CellFailed (a window without one completed call too, unless it is
    a step of a capacity search, where that is the step's answer); Locust is stopped whatever happens."""
    exp, run, server, source, shadow = ctx.exp, ctx.run, ctx.server, ctx.source, ctx.shadow
    cell = run.cell
    total = exp.warmup_s + load.duration_s
    port = free_port()
    ctx.progress.phase(run, "starting locust" + (f" at {load.rate}/s" if load.rate else ""))
    locust = Locust(
        locust_argv(f"{cell.transport}://{ctx.client_addr or server.addr(cell.transport)}", load, port,
                    total + LOCUST_TAIL_MARGIN_S),
        port,
        ctx.run_dir / "logs" / f"{stem}.locust.log",
        cpus=exp.pinning.generator or None,
    )
    client: list[Snapshot] = []
    t0 = time.time()
    try:
        row["pids"]["locust"] = locust.proc.pid
        row["cpus"]["generator"] = _affinity(locust.proc.pid)
        try:
            locust.wait_ready()
        except ServerStartError as e:
            raise CellFailed(str(e), e.tail) from None
        if ctx.barrier is not None:
            try:
                ctx.barrier.wait(timeout=READY_TIMEOUT_S)
            except threading.BrokenBarrierError:
                raise CellFailed("the duet partner failed before its load started", locust.tail()) from None

        t0 = time.time()
        m0 = time.monotonic()
        ticks = math.ceil(total)
        warm_tick = min(math.ceil(exp.warmup_s), ticks - 1) if ticks > 1 else 0
        cpu_self0 = cpu_gen0 = None
        tw = m0
        prev: Snapshot | None = None
        for k in range(ticks + 1):
            delay = m0 + k - time.monotonic()
            if delay > 0:
                # A bounded wait that returns early if the server exits.
                with contextlib.suppress(Exception):
                    server.proc.wait(timeout=delay)
            if not server.alive():
                raise CellFailed(
                    f"{cell.server} exited with status {server.proc.returncode} during the run "
                    f"(at {time.monotonic() - m0:.1f}s)",
                    list(server.tail),
                )
            if not locust.alive():
                raise CellFailed(f"locust exited with status {locust.proc.returncode} during the run", locust.tail())
            snap = scrape(locust.metrics_url, timeout=0.8)
            source.tick()
            if ctx.watch is not None:
                ctx.watch.tick()
            if shadow is not None:
                shadow.tick()
            if k == warm_tick:
                cpu_self0, cpu_gen0, tw = _self_cpu(), _tree_cpu(locust.proc.pid), time.monotonic()
            if snap is not None:
                client.append(snap)
                qps, p95 = figures.live(prev, snap)
                prev = snap
                ctx.progress.live(run, time.monotonic() - m0, total, qps, p95)
        elapsed_w = time.monotonic() - tw
        out: dict[str, Any] = {}
        out["runner_cpu_cores"] = (_self_cpu() - cpu_self0) / elapsed_w if cpu_self0 is not None and elapsed_w > 0 else None
        gen_cpu_psutil = (
            (_tree_cpu(locust.proc.pid) - cpu_gen0) / elapsed_w if cpu_gen0 is not None and elapsed_w > 0 else None
        )

        win_c = [s for s in client if s.t >= t0 + warm_tick - 0.5]
        if len(win_c) < 2:
            raise CellFailed(
                "fewer than two client metric scrapes in the measured window (is loadgen's --xfer-metrics-port serving?)",
                locust.tail(),
            )
        t_a, t_b = win_c[0].t, win_c[-1].t
        srv_whole = source.snapshots(t0, t_b)
        out["duration_s"] = round(t_b - t_a, 3)
        out.update(figures.client_figures(win_c))
        out.update(figures.server_figures(figures.window(srv_whole, t_a, t_b), srv_whole))
        if ctx.watch is not None and not search_step:
            out.update(ctx.watch.window(srv_whole, t0, t_a, t_b))
        if shadow is not None:
            sw = shadow.snapshots(t0, t_b)
            out["scrape_check"] = figures.server_figures(figures.window(sw, t_a, t_b), sw)
        if out.get("gen_cpu_cores") is None:
            out["gen_cpu_cores"] = gen_cpu_psutil
        out["gen_cpu_cores_psutil"] = gen_cpu_psutil
        if srv_whole:
            out["build_info"] = srv_whole[-1].label_values("xfer_build_info")
        out["timeseries"] = f"timeseries/{stem}.csv"
        if not out.get("client_qps") and not search_step:
            raise CellFailed("no request completed in the measured window", locust.tail())
        return out
    finally:
        locust.stop(grace_s=5.0)
        if client:
            with contextlib.suppress(Exception):
                _write_series(ctx.run_dir, stem, client, source.snapshots(t0 - 1, float("inf")), t0)
                row.setdefault("timeseries", f"timeseries/{stem}.csv")
        if ctx.watch is not None and not search_step:
            with contextlib.suppress(Exception):
                ctx.watch.write_series(ctx.run_dir / "timeseries" / f"{stem}.soak.csv",
                                       source.snapshots(t0 - 1, float("inf")), t0)
                row["soak_series"] = f"timeseries/{stem}.soak.csv"


def _soak_end(watch: soak.Watch, row: dict[str, Any]) -> None:
    """After the load (Locust stopped, the server still up): what the server still holds, and the verdict."""
    row.update(watch.after())
    row["soak_verdict"], row["soak_flags"] = soak.verdict(row, watch.goal)


def _capacity(ctx: _Cell, row: dict[str, Any]) -> None:
    """Capacity mode: one load phase per step of the search, on the one server; the row carries the
    capacity, every step, and the figures of the best passing step (its cost per request at capacity)."""
    load = ctx.run.cell.load
    k = 0

    def measure(rate: float) -> capacity.Step:
        nonlocal k
        k += 1
        fig = _load_phase(ctx, load.at_rate(rate), f"{ctx.stem}.step{k}", row, search_step=True)
        return capacity.Step(
            rate, fig.get("client_qps"), fig.get("client_p99_s"), fig.get("client_failure_rate"),
            fig.get("gen_cpu_cores"), figures=fig,
        )

    res = capacity.search(
        measure, load.rate_per_second or 0.0, load.slo_p99 or 0.0, load.slo_failures, figures.GEN_SATURATED_CORES
    )
    row["capacity_status"] = res.status
    row["capacity_steps"] = [s.to_json() for s in res.steps]
    best = res.best
    if best is not None:
        row.update(best.figures)  # its timeseries too
    row["capacity_rps"] = res.capacity_rps
    if res.status == capacity.GENERATOR_BOUND:
        row["warnings"].append(
            f"capacity search stopped: the load generator saturated at {res.steps[-1].rate:.0f} req/s before the "
            "server; the capacity is a lower bound"
        )
    elif res.status != capacity.FOUND:
        row["warnings"].append(f"capacity search: {res.status}")


def _warnings(row: dict[str, Any], cell) -> None:
    w = row["warnings"]
    gen = row.get("gen_cpu_cores")
    if gen is not None and gen > figures.GEN_SATURATED_CORES:
        w.append(
            f"load generator saturated: {gen:.2f} cores (> {figures.GEN_SATURATED_CORES}); "
            "the figures may describe Locust rather than the server"
        )
    if row.get("client_failures"):
        w.append(f"{int(row['client_failures'])} failed requests")
    if cell.load.mode == "open" and row.get("client_qps") is not None:
        offered = cell.load.rate_per_second or 0.0
        if row["client_qps"] < UNDERSERVED * offered:
            w.append(
                f"offered {offered:g} req/s but {row['client_qps']:.1f} were served: the server or the generator fell "
                "behind, so latencies include queueing; lower load.rate"
            )
    want = cell.flags.get("alloc")
    if want:
        got = (row.get("build_info") or {}).get("allocator") or (row.get("ready") or {}).get("alloc")
        if got and got != want:
            w.append(f"asked for allocator {want}, the server reports {got}")
    if row.get("server_qps") is None:
        w.append("no server request metrics in the window")


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
