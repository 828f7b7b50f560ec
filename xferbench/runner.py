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
import json
import math
import os
import platform
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from xferbench import figures
from xferbench.experiment import Experiment
from xferbench.matrix import Run, schedule
from xferbench.process import Locust, Server, ServerStartError, free_port, locust_argv
from xferbench.scrape import Snapshot, scrape
from xferbench.sources import MetricsSource, ScrapeSource

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


def sweep(
    exp: Experiment,
    run_dir: Path,
    source: MetricsSource | None = None,
    progress: Any = None,
    on_row: Any = None,
) -> SweepResult:
    """Runs the whole experiment into run_dir; returns the rows (also in runs.jsonl)."""
    source = source or ScrapeSource()
    progress = progress or NullProgress()
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "timeseries").mkdir(exist_ok=True)
    (run_dir / "logs").mkdir(exist_ok=True)
    runs = schedule(exp)
    meta = {
        "experiment": exp.name,
        "description": exp.description,
        "path": str(exp.path) if exp.path else None,
        "repeats": exp.repeats,
        "warmup_s": exp.warmup_s,
        "baseline": exp.baseline,
        "cells": [c.name for c in exp.cells],
        "cell_configs": {c.name: c.config() for c in exp.cells},
        "source": source.name,
        "started_at": dt.datetime.now(dt.UTC).isoformat(),
        "machine": machine_info(),
    }
    (run_dir / "experiment.json").write_text(json.dumps(meta, indent=2))
    rows: list[dict[str, Any]] = []
    interrupted = False
    old = _install_sigterm()
    progress.start_sweep(exp, runs, run_dir)
    try:
        with open(run_dir / "runs.jsonl", "w", encoding="utf-8") as out:
            for run in runs:
                progress.start_run(run)
                try:
                    row = run_one(exp, run, run_dir, source, progress)
                except KeyboardInterrupt:
                    interrupted = True
                    row = _base_row(exp, run, source)
                    row.update(status="interrupted", error="stopped by Ctrl-C / SIGTERM")
                rows.append(row)
                out.write(json.dumps(row) + "\n")
                out.flush()
                progress.end_run(run, row)
                if on_row:
                    on_row(row)
                if interrupted:
                    break
    finally:
        progress.end_sweep()
        if old is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, old)
        meta["finished_at"] = dt.datetime.now(dt.UTC).isoformat()
        meta["interrupted"] = interrupted
        (run_dir / "experiment.json").write_text(json.dumps(meta, indent=2))
    return SweepResult(run_dir, rows, interrupted)


def _base_row(exp: Experiment, run: Run, source: MetricsSource) -> dict[str, Any]:
    cell = run.cell
    return {
        "experiment": exp.name,
        "cell": cell.name,
        "repeat": run.repeat,
        "order": run.order,
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


def run_one(exp: Experiment, run: Run, run_dir: Path, source: MetricsSource, progress: Any) -> dict[str, Any]:
    cell = run.cell
    row = _base_row(exp, run, source)
    stem = f"{cell.slug}.r{run.repeat}"
    server: Server | None = None
    locust: Locust | None = None
    client: list[Snapshot] = []
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
        try:
            target = server.addr(cell.transport)
            metrics_addr = server.addr("metrics")
        except KeyError as e:
            raise CellFailed(str(e.args[0]), list(server.tail)) from None
        source.begin(metrics_addr, {"xferbench_cell": cell.name, "server": cell.server})
        begun = True
        # With PromQL, the built-in scraper runs alongside, so every row can be checked against it.
        shadow = ScrapeSource() if source.name != "scrape" else None
        if shadow is not None:
            shadow.begin(metrics_addr, {})
        total = exp.warmup_s + cell.load.duration_s
        port = free_port()
        progress.phase(run, "starting locust")
        locust = Locust(
            locust_argv(f"{cell.transport}://{target}", cell.load, port, total + LOCUST_TAIL_MARGIN_S),
            port,
            run_dir / "logs" / f"{stem}.locust.log",
            cpus=exp.pinning.generator or None,
        )
        row["pids"]["locust"] = locust.proc.pid
        try:
            locust.wait_ready()
        except ServerStartError as e:
            raise CellFailed(str(e), e.tail) from None

        t0 = time.time()
        m0 = time.monotonic()
        ticks = math.ceil(total)
        warm_tick = min(math.ceil(exp.warmup_s), ticks - 1) if ticks > 1 else 0
        cpu_self0 = cpu_gen0 = None
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
            if shadow is not None:
                shadow.tick()
            if k == warm_tick:
                cpu_self0, cpu_gen0, tw = _self_cpu(), _tree_cpu(locust.proc.pid), time.monotonic()
            if snap is not None:
                client.append(snap)
                qps, p95 = figures.live(prev, snap)
                prev = snap
                progress.live(run, time.monotonic() - m0, total, qps, p95)
        elapsed_w = time.monotonic() - tw
        runner_cpu = (_self_cpu() - cpu_self0) / elapsed_w if elapsed_w > 0 else None
        gen_cpu_psutil = (_tree_cpu(locust.proc.pid) - cpu_gen0) / elapsed_w if elapsed_w > 0 else None

        win_c = [s for s in client if s.t >= t0 + warm_tick - 0.5]
        if len(win_c) < 2:
            raise CellFailed(
                "fewer than two client metric scrapes in the measured window (is loadgen's --xfer-metrics-port serving?)",
                locust.tail(),
            )
        t_a, t_b = win_c[0].t, win_c[-1].t
        srv_whole = source.snapshots(t0, t_b)
        srv_win = figures.window(srv_whole, t_a, t_b)
        row["duration_s"] = round(t_b - t_a, 3)
        row.update(figures.client_figures(win_c))
        row.update(figures.server_figures(srv_win, srv_whole))
        if shadow is not None:
            sw = shadow.snapshots(t0, t_b)
            row["scrape_check"] = figures.server_figures(figures.window(sw, t_a, t_b), sw)
        row["runner_cpu_cores"] = runner_cpu
        if row.get("gen_cpu_cores") is None:
            row["gen_cpu_cores"] = gen_cpu_psutil
        row["gen_cpu_cores_psutil"] = gen_cpu_psutil
        if srv_whole:
            row["build_info"] = srv_whole[-1].label_values("xfer_build_info")
        _warnings(row, cell)
        _write_series(run_dir, stem, client, source.snapshots(t0 - 1, t_b + 1), t0)
        row["timeseries"] = f"timeseries/{stem}.csv"
        if not row.get("client_qps"):
            raise CellFailed("no request completed in the measured window", locust.tail())
    except Exception as e:
        row["status"] = "failed"
        if isinstance(e, CellFailed):
            row["error"], tail = str(e), e.tail
        else:
            row["error"] = f"{type(e).__name__}: {e}"
            tail = list(server.tail) if server is not None else []
        row["stderr_tail"] = tail[-20:]
        if client:
            with contextlib.suppress(Exception):
                _write_series(run_dir, stem, client, source.snapshots(0.0, float("inf")), client[0].t)
                row["timeseries"] = f"timeseries/{stem}.csv"
    finally:
        if locust is not None:
            locust.stop(grace_s=5.0)
        if server is not None:
            code = server.stop()
            if row["status"] == "ok" and code not in (0, None):
                row["warnings"].append(f"{cell.server} exited with status {code} on SIGTERM")
        if begun:
            with contextlib.suppress(Exception):
                source.end()
    return row


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
