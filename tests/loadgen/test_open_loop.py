"""Open loop (--xfer-rate) against xferd-go: the schedule is kept, and latency counts from the intended start.

(a) R arrivals/s for T s give about R x T Echo calls and never meaningfully more: an open-loop user that
    ran ahead of its clock would make the rate a lie.
(b) Coordinated omission: the server is frozen (SIGSTOP) for STALL s mid-run. Open loop must record
    every call scheduled during the stall with the delay it suffered (about R x (STALL - THRESH) calls
    above THRESH); a closed loop only records the one call per user that was in flight.
Counts come from the client histogram (xfer_client_request_duration_seconds) that Locust dumps at exit.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.loadgen.support import ROOT, Sample, failed, fetch, locust_cmd, parse_prom, run_locust, summary_wall, total
from tests.support.servers import RunningServer, running_server

ECHO_ONLY = ["--headless", "--xfer-mix", "echo:1", "--xfer-metrics-port", "0", "--only-summary"]


@pytest.fixture(scope="module")
def go_server() -> Iterator[RunningServer]:
    with running_server("xferd-go", ["--store=mem"]) as s:
        yield s


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

RATE, RUN_S, USERS = 40, 5, 10


@pytest.mark.parametrize("rate", [f"{RATE}", f"poisson:{RATE}"])
def test_rate_is_kept(go_server: RunningServer, tmp_path: Path, rate: str) -> None:
    r = run_locust([*ECHO_ONLY, "--host", go_server.target("grpc"), "-u", str(USERS), "-r", str(USERS),
                    "-t", f"{RUN_S}s", "--xfer-rate", rate, "--xfer-metrics-dump", str(tmp_path)],
                   timeout=RUN_S + 60)
    assert r.returncode == 0, r.stderr[-3000:]
    client = _dump(tmp_path)
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

STALL_S, THRESH_S, STALL_RATE, STALL_USERS, STALL_RUN_S = 1.5, 0.5, 100, 5, 8


def _run_with_stall(tmp_path: Path, rate_args: list[str]) -> tuple[list[Sample], float]:
    """Runs Echo users against a fresh server, freezes it for STALL_S once load is seen on its /metrics,
    and returns the client's dumped metrics and how long the freeze really lasted."""
    with running_server("xferd-go", ["--store=mem"]) as server:
        proc = subprocess.Popen(
            locust_cmd(*ECHO_ONLY, "--host", server.target("grpc"), "-u", str(STALL_USERS),
                       "-r", "100", "-t", f"{STALL_RUN_S}s", "--xfer-metrics-dump", str(tmp_path),
                       *rate_args),
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        try:
            # Load is under way (all users spawned at once; at R/s, 0.5 s worth of calls) once the server
            # has answered this many Echo calls; bounded by time, not a guessed sleep.
            deadline = time.monotonic() + 60
            while total(parse_prom(fetch(server.metrics_url)), "xfer_requests_total", method="Echo") < 50:
                assert time.monotonic() < deadline and proc.poll() is None, "no load reached the server"
                time.sleep(0.05)
            t0 = time.monotonic()
            os.kill(server.proc.pid, signal.SIGSTOP)
            try:
                time.sleep(STALL_S)  # the stall itself, not a wait for readiness
            finally:
                os.kill(server.proc.pid, signal.SIGCONT)
            stalled = time.monotonic() - t0
            assert proc.poll() is None, "Locust ended during the stall: the run is too short to judge"
            _out, err = proc.communicate(timeout=STALL_RUN_S + 60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, err[-3000:]
    client = _dump(tmp_path)
    assert failed(client) == 0
    return client, stalled


def test_open_loop_records_the_stall_for_every_delayed_call(tmp_path: Path) -> None:
    client, stalled = _run_with_stall(tmp_path, ["--xfer-rate", str(STALL_RATE)])
    # Calls scheduled in the first (stall - THRESH) s of the freeze each waited > THRESH from their intended
    # start: about R x (STALL - THRESH) = 100 of them. Half is a generous floor, and still far above the
    # closed loop's one per user below.
    slow = _slower_than(client, THRESH_S)
    assert slow >= 0.5 * STALL_RATE * (STALL_S - THRESH_S), (slow, stalled)
    assert slow > 2 * STALL_USERS, slow


def test_closed_loop_records_the_stall_once_per_user(tmp_path: Path) -> None:
    # One call in flight per user (gRPC users keep --xfer-grpc-inflight calls each; 1 makes it one per user).
    client, stalled = _run_with_stall(tmp_path, ["--xfer-grpc-inflight", "1"])
    # Each user had one call in flight when the server froze; it waited out the stall and nothing else was
    # sent meanwhile, so the stall shows in about one call per user (x2: room for a hiccup of Locust's own).
    slow = _slower_than(client, THRESH_S)
    assert 1 <= slow <= 2 * STALL_USERS, (slow, stalled)
