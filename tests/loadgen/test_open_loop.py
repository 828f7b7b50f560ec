"""Open loop (--xfer-rate) against xferd-go: the schedule is kept, and latency counts from the intended start.

(a) R arrivals/s for T s give about R x T Echo calls and never meaningfully more: an open-loop user that
    ran ahead of its clock would make the rate a lie.
(b) Coordinated omission: an open-loop and a closed-loop run at once against one server, frozen (SIGSTOP)
    for STALL s mid-run (one stall serves both). Open loop must record
    every call scheduled during the stall with the delay it suffered (about R x (STALL - THRESH) calls
    above THRESH); a closed loop only records the one call per user that was in flight.
Counts come from the client histogram (xfer_client_request_duration_seconds) that Locust dumps at exit.
The runs go through the session's `runs` (tests/loadgen/harness.py), two at a time, each with its own server.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.loadgen.harness import Runs, in_background, runs_for
from tests.loadgen.support import (
    ROOT,
    Sample,
    failed,
    fetch,
    free_port,
    locust_cmd,
    parse_prom,
    run_locust,
    summary_wall,
    total,
)
from tests.support.servers import running_server

ECHO_ONLY = ["--headless", "--xfer-mix", "echo:1", "--only-summary"]


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return runs_for(request, tmp_path_factory)


def _dump(folder: Path) -> list[Sample]:
    (path,) = folder.glob("local-*.prom")
    return parse_prom(path.read_text())


def _slower_than(samples: list[Sample], seconds: float) -> float:
    """Echo calls that took longer than `seconds` (a bucket bound), from the cumulative buckets."""
    at_most = [v for n, lab, v in samples if n == "xfer_client_request_duration_seconds_bucket"
               and lab.get("method") == "Echo" and lab["le"] != "+Inf" and math.isclose(float(lab["le"]), seconds)]
    assert len(at_most) == 1, f"no bucket bound at {seconds}s"
    return total(samples, "xfer_client_request_duration_seconds_count", method="Echo") - at_most[0]


# ---- (a) the schedule --------------------------------------------------------------------------------

# R x T = 200 calls, as many as 40/s for 5 s gave: the same relative slack, in less than half the time.
RATE, RUN_S, USERS = 100, 2, 10


def _rate_run(tmp: Path, rate: str) -> tuple[subprocess.CompletedProcess[str], list[Sample]]:
    with running_server("xferd-go", ["--store=mem"]) as server:
        r = run_locust([*ECHO_ONLY, "--xfer-metrics-port", "0", "--host", server.target("grpc"), "-u", str(USERS),
                        "-r", str(USERS), "-t", f"{RUN_S}s", "--xfer-rate", rate, "--xfer-metrics-dump", str(tmp)],
                       timeout=RUN_S + 60)
    return r, (_dump(tmp) if r.returncode == 0 else [])


@pytest.mark.parametrize("rate", [f"{RATE}", f"poisson:{RATE}"])
@in_background(_rate_run)
def test_rate_is_kept(runs: Runs, request: pytest.FixtureRequest, rate: str) -> None:
    r, client = runs[request.node]
    assert r.returncode == 0, r.stderr[-3000:]
    calls = total(client, "xfer_client_requests_total", method="Echo")
    assert failed(client) == 0
    expected = RATE * (summary_wall(r.stderr) + 0.1)  # + the summary's rounding
    # Constant gaps: each user's first call comes at a random point of its first gap, so at most one call
    # per user beyond R x T. Poisson counts vary: 6 standard deviations more (odds ~1e-9).
    slack = USERS + (6 * math.sqrt(expected) if rate.startswith("poisson") else 0)
    assert calls <= expected + slack, (calls, expected, slack)
    # Below: a busy machine may start the users late or cut the last calls short; half is a sure floor.
    assert calls >= 0.5 * RATE * RUN_S, (calls, expected)


# ---- (b) coordinated omission --------------------------------------------------------------------------

STALL_S, THRESH_S, STALL_RATE, STALL_USERS = 1.5, 0.5, 100, 5
# Each run: load seen (about 0.5 s), the stall, and room for a start up to a couple of seconds later than
# the other's (both runs are frozen by the same stall; each must outlast it).
STALL_RUN_S = 6
LOOPS = {  # what each run adds to the echo users
    "open": ["--xfer-rate", str(STALL_RATE)],
    # One call in flight per user (gRPC users keep --xfer-grpc-inflight calls each; 1 makes it one per user).
    "closed": ["--xfer-grpc-inflight", "1"],
}
LOADED = 50  # answered Echo calls a run has made when its load is under way (0.5 s at STALL_RATE)


@dataclass
class Stalled:
    clients: dict[str, list[Sample]]  # each loop's client metrics, dumped at exit
    stalled: float  # how long the freeze really lasted, s


def _stall_run(tmp: Path) -> Stalled:
    """Runs an open-loop and a closed-loop Locust at once against one fresh server, freezes the server for
    STALL_S once both have load under way (seen on their own /metrics), and returns each one's dumped metrics."""
    with running_server("xferd-go", ["--store=mem"]) as server:
        procs: dict[str, subprocess.Popen[str]] = {}
        urls: dict[str, str] = {}
        try:
            for loop, rate_args in LOOPS.items():
                port = free_port()
                urls[loop] = f"http://127.0.0.1:{port}/metrics"
                (tmp / loop).mkdir()
                procs[loop] = subprocess.Popen(
                    locust_cmd(*ECHO_ONLY, "--xfer-metrics-port", str(port), "--host", server.target("grpc"),
                               "-u", str(STALL_USERS), "-r", "100", "-t", f"{STALL_RUN_S}s",
                               "--xfer-metrics-dump", str(tmp / loop), *rate_args),
                    cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
            # Bounded by time, not a guessed sleep: each run's own count of answered calls.
            deadline = time.monotonic() + 60
            for loop, url in urls.items():
                while True:
                    try:
                        answered = total(parse_prom(fetch(url)), "xfer_client_requests_total", method="Echo")
                    except OSError:  # not listening yet
                        answered = 0
                    if answered >= LOADED:
                        break
                    assert time.monotonic() < deadline, f"no load from the {loop} loop"
                    assert procs[loop].poll() is None, f"the {loop} loop's Locust ended before its load was seen"
                    time.sleep(0.05)
            t0 = time.monotonic()
            os.kill(server.proc.pid, signal.SIGSTOP)
            try:
                time.sleep(STALL_S)  # the stall itself, not a wait for readiness
            finally:
                os.kill(server.proc.pid, signal.SIGCONT)
            stalled = time.monotonic() - t0
            for loop, proc in procs.items():
                assert proc.poll() is None, f"the {loop} loop's Locust ended during the stall: its run is too short"
            errs = {loop: proc.communicate(timeout=STALL_RUN_S + 60)[1] for loop, proc in procs.items()}
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    for loop, proc in procs.items():
        assert proc.returncode == 0, f"{loop}: {errs[loop][-3000:]}"
    clients = {loop: _dump(tmp / loop) for loop in LOOPS}
    for loop, client in clients.items():
        assert failed(client) == 0, loop
    return Stalled(clients, stalled)


@in_background(_stall_run, shared="stall")
def test_open_loop_records_the_stall_for_every_delayed_call(runs: Runs, request: pytest.FixtureRequest) -> None:
    run = runs[request.node]
    # Calls scheduled in the first (stall - THRESH) s of the freeze each waited > THRESH from their intended
    # start: about R x (STALL - THRESH) = 100 of them. Half is a generous floor, and still far above the
    # closed loop's one per user below.
    slow = _slower_than(run.clients["open"], THRESH_S)
    assert slow >= 0.5 * STALL_RATE * (STALL_S - THRESH_S), (slow, run.stalled)
    assert slow > 2 * STALL_USERS, slow


@in_background(_stall_run, shared="stall")
def test_closed_loop_records_the_stall_once_per_user(runs: Runs, request: pytest.FixtureRequest) -> None:
    run = runs[request.node]
    # Each user had one call in flight when the server froze; it waited out the stall and nothing else was
    # sent meanwhile, so the stall shows in about one call per user (x2: room for a hiccup of Locust's own).
    slow = _slower_than(run.clients["closed"], THRESH_S)
    assert 1 <= slow <= 2 * STALL_USERS, (slow, run.stalled)
