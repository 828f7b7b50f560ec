"""Locust's event hooks for loadgen: options, start-up checks, runs, the master/worker messages, the
summary and --xfer-check's exit code. `install(events)` wires them; the locustfile calls it once."""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import gevent
from locust.runners import MasterRunner, WorkerRunner
from prometheus_client import generate_latest

from loadgen import _call_user, _cluster, _endpoint, _profiles, _tls
from loadgen._checks import EXIT_CHECK_FAILED, RunFigures, verdict
from loadgen._options import Config, config_from, register
from loadgen._process import XferProcess, begin, current
from loadgen._summary import RunSummary, render
from loadgen._users import check_host
from loadgen._webui import refuse_bad_swarm

log = logging.getLogger("xfer")
EXIT_BAD_OPTION = 2
MIX_CLASSES = {"upload": "UploadUser", "download": "DownloadUser", "echo": "EchoUser", "meta": "MetaUser"}
CALL_CLASS = "CallUser"  # --xfer-call: the one class that runs, whatever --xfer-mix says
HELLO_WAIT_S = 10.0  # how long a master holds a run for a connected worker that has not said hello


def _fail_start(message: str) -> None:
    sys.stderr.write(f"locust: error: {message}\n")
    sys.exit(EXIT_BAD_OPTION)


# ---- start-up -------------------------------------------------------------------------------------------

def start_checks(opts: Any, host: str | None, role: str = "local") -> tuple[Config, str | None]:
    """The options' Config and the host's transport (None on a worker, or with neither a host nor
    --headless: the web UI asks for the host later), checked as a whole before any user starts. ValueError
    names what is wrong; argparse has already refused each malformed value on its own."""
    cfg = config_from(opts)
    transport = None
    headless = bool(getattr(opts, "headless", False))
    if role != "worker" and (host or headless):
        transport = check_host(host)
    _tls.start_check(cfg)  # before --xfer-call's check, which may ask the server over TLS
    _call_user.start_check(cfg, host, transport)  # with --xfer-call and a host: finds the method, checks --xfer-data
    if host and transport and (why := _tls.caveat(cfg, host, transport)):
        log.warning("%s", why)
    if (role != "worker" and headless and cfg.profile in _profiles.NEEDS_RUN_TIME
            and not getattr(opts, "run_time", None)):
        raise ValueError(f"--xfer-profile {cfg.profile} needs -t/--run-time (its shape is scaled to the run time)")
    if cfg.steps and cfg.profile != "step":
        raise ValueError(f"--xfer-steps is for --xfer-profile step, not {cfg.profile}")
    return cfg, transport


def _on_init(environment: Any, runner: Any, web_ui: Any = None, **_kw: Any) -> None:
    role = "master" if isinstance(runner, MasterRunner) else "worker" if isinstance(runner, WorkerRunner) else "local"
    xfer = begin(role, environment)
    try:
        xfer.config, transport = start_checks(environment.parsed_options, environment.host, role)
        if transport:
            xfer.transport = transport
        xfer.user_classes = list(environment.user_classes)
        _apply_mix(xfer)
    except ValueError as e:
        _fail_start(str(e))
    try:
        _endpoint.start(xfer)
    except ValueError as e:
        _fail_start(str(e))
    if role == "worker":
        runner.register_message("xfer_share", _on_share)
        # Its /metrics URL at once, not with its first stats report (Locust's, every 3 s): whoever scrapes the
        # workers waits for the master to list them all, and on starved CPUs a short run could end first.
        runner.send_message("xfer_hello", {"metrics_url": xfer.metrics_url})
    if role == "master":
        runner.register_message("xfer_final", _on_final)
        runner.register_message("xfer_hello", _on_hello)
    if web_ui is not None:
        web_ui.app.before_request(refuse_bad_swarm)


def _apply_mix(xfer: XferProcess) -> None:
    """Sets the user classes' weights from --xfer-mix (or CallUser's alone with --xfer-call) and drops the
    disabled ones."""
    call = bool(xfer.config.call)
    for cls in xfer.user_classes:
        if cls.__name__ == CALL_CLASS:
            cls.weight = 1 if call else 0
        for method, name in MIX_CLASSES.items():
            if cls.__name__ == name:
                cls.weight = 0 if call else xfer.config.mix[method]
    kept = [c for c in xfer.user_classes if c.weight > 0 or c.fixed_count > 0]
    if not kept:
        raise ValueError("--xfer-mix leaves no user class with a weight above 0 among "
                         + ", ".join(c.__name__ for c in xfer.user_classes))
    xfer.environment.user_classes[:] = kept


def _on_share(environment: Any, msg: Any, **_kw: Any) -> None:
    xfer = current()
    xfer.worker_count = max(1, int(msg.data.get("workers", 1)))
    xfer.clock.number = int(msg.data.get("run", xfer.clock.number))


# ---- runs ----------------------------------------------------------------------------------------------------

def _on_test_start(environment: Any, **_kw: Any) -> None:
    xfer = current()
    # Workers get the master's --xfer-* values with every spawn message, and the web UI can change them
    # between runs: read them again.
    try:
        xfer.config = config_from(environment.parsed_options)
        if environment.host:
            xfer.transport = check_host(environment.host)
        # Locust reads the weights when it dispatches users, after this event. Workers spawn what the master
        # dispatches, so only it needs them.
        if xfer.role != "worker":
            _apply_mix(xfer)
    except ValueError as e:
        log.error("%s", e)
        raise
    xfer.recorder.new_run()
    xfer.idle_classes = ()
    if xfer.role == "worker":
        xfer.clock.start(xfer.clock.number)  # the number the master sent with xfer_share
    else:
        xfer.clock.start(xfer.clock.number + 1)
    if xfer.role == "master":
        xfer.workers.new_run(xfer.clock.number)
        runner = environment.runner
        workers = [w.id for w in runner.clients.ready + runner.clients.running + runner.clients.spawning]
        _await_hellos(xfer, workers)
        runner.send_message("xfer_share", {"workers": max(1, len(workers)), "run": xfer.clock.number})
    xfer.payload()


def _await_hellos(xfer: XferProcess, workers: list[str]) -> None:
    """Holds the run until every connected worker has said hello or shown it runs another locustfile, for at most
    HELLO_WAIT_S, and names those whose calls xfer's figures will miss.

    Locust counts a worker ready once it connects, before its init event. A worker descheduled between the two
    (a loaded machine) then reads the master's ack, xfer_share and spawn in one go: xfer_share before its init
    registers it (lost: the worker takes the whole --xfer-rate), spawn before its process exists (its
    test_start fails and it serves no metrics). Its hello is the last act of its init."""
    deadline = time.monotonic() + HELLO_WAIT_S
    while (silent := xfer.workers.silent(workers)) and time.monotonic() < deadline:
        gevent.sleep(0.05)  # the master's message loop takes the hellos and reports meanwhile
    if foreign := [w for w in workers if w in xfer.workers.foreign]:
        log.warning("%d of %d workers run another locustfile than loadgen/ (their reports carry no xfer figures), "
                    "so their calls are missing from xfer's figures: %s", len(foreign), len(workers), ", ".join(foreign))
    if silent:
        log.warning("%d of %d workers said no hello within %.0f s (still starting?), so they may take this run "
                    "before loadgen's start-up: %s", len(silent), len(workers), HELLO_WAIT_S, ", ".join(silent))


def _on_spawning_complete(user_count: int, **_kw: Any) -> None:
    """Warns when the user count leaves a class of the mix without a user (Locust says nothing)."""
    xfer = current()
    if xfer.role == "worker":
        return
    runner = xfer.environment.runner
    counts = getattr(runner, "target_user_classes_count", {}) or {}
    enabled = [c.__name__ for c in xfer.environment.user_classes if c.weight > 0]
    xfer.idle_classes = tuple(name for name in enabled if counts.get(name, 0) == 0)
    full = int(getattr(xfer.environment.parsed_options, "num_users", 0) or 0)
    if xfer.idle_classes and user_count >= full:
        log.warning("%s never ran: %d users cannot run every class of --xfer-mix (%s); raise -u to at least %d",
                    ", ".join(xfer.idle_classes), user_count, ", ".join(enabled), len(enabled))


def _on_test_stop(environment: Any, **_kw: Any) -> None:
    xfer = current()
    xfer.clock.stop()
    if xfer.role == "worker":
        environment.runner.send_message("xfer_final", _report(xfer, final=True))
    elif xfer.role == "local" or xfer.workers.all_final():
        _print_summary(xfer)


def _report(xfer: XferProcess, final: bool) -> dict[str, Any]:
    data = _cluster.report(xfer.recorder.total, xfer.recorder.run, xfer.clock, final)
    data["metrics_url"] = xfer.metrics_url
    return data


def _on_report_to_master(client_id: str, data: dict[str, Any], **_kw: Any) -> None:
    data["xfer"] = _report(current(), final=False)


def _on_worker_report(client_id: str, data: dict[str, Any], **_kw: Any) -> None:
    if "xfer" in data:
        current().workers.on_report(client_id, data["xfer"])
    else:  # every loadgen process adds its figures to each report (_on_report_to_master)
        current().workers.foreign.add(client_id)


def _on_hello(environment: Any, msg: Any, **_kw: Any) -> None:
    current().workers.on_report(msg.node_id, msg.data)  # its metrics_url


def _on_final(environment: Any, msg: Any, **_kw: Any) -> None:
    xfer = current()
    xfer.workers.on_report(msg.node_id, msg.data)
    if not xfer.clock.running and xfer.workers.all_final():
        _print_summary(xfer)


def _run_figures(xfer: XferProcess) -> RunFigures:
    if xfer.role == "master":
        return RunFigures(xfer.workers.run_snapshot(), xfer.clock.wall_s(), xfer.workers.busiest_cpu_cores())
    return RunFigures(xfer.recorder.run, xfer.clock.wall_s(), xfer.clock.cpu_s() / xfer.clock.wall_s())


def _print_summary(xfer: XferProcess) -> None:
    if xfer.summarised == xfer.clock.number or xfer.clock.number == 0:
        return
    xfer.summarised = xfer.clock.number
    run = _run_figures(xfer)
    text = render(RunSummary(xfer.role, xfer.clock.number, run.snap, run.wall_s, run.cpu_cores, xfer.idle_classes))
    print(text, file=sys.stderr, flush=True)


def _on_quitting(environment: Any, **_kw: Any) -> None:
    xfer = current()
    if xfer.role != "worker":
        _print_summary(xfer)  # a master whose workers' last reports did not all arrive
        if xfer.config.check:
            _judge(xfer, environment)
    if xfer.config.metrics_dump:
        folder = Path(xfer.config.metrics_dump)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{xfer.role}-{os.getpid()}.prom").write_bytes(generate_latest(xfer.registry))


def _judge(xfer: XferProcess, environment: Any) -> None:
    """--xfer-check on the last run decides the exit code: 3 when a check fails, else 0 unless user code
    raised (Locust's own rule would give 1 for any failed call, which the checks are there to judge)."""
    run = _run_figures(xfer)
    passed = True
    for check in xfer.config.check:
        ok, line = verdict(check, run)
        passed &= ok
        print(line, file=sys.stderr, flush=True)
    if not passed:
        log.error("--xfer-check failed: exit code %d", EXIT_CHECK_FAILED)
        environment.process_exit_code = EXIT_CHECK_FAILED
    elif not environment.runner.exceptions:
        environment.process_exit_code = 0


def install(events: Any) -> None:
    events.init_command_line_parser.add_listener(lambda parser, **_kw: register(parser))
    events.init.add_listener(_on_init)
    events.test_start.add_listener(_on_test_start)
    events.spawning_complete.add_listener(_on_spawning_complete)
    events.test_stop.add_listener(_on_test_stop)
    events.report_to_master.add_listener(_on_report_to_master)
    events.worker_report.add_listener(_on_worker_report)
    events.quitting.add_listener(_on_quitting)
