"""Locust through Toxiproxy: connections reset under load become counted, typed failures, and the users
recover once the fault is gone.

Locust runs headless against the proxy of every (server, transport). Once calls succeed, a `reset_peer` toxic
(reset at the first byte the server sends) cuts every connection; once failures are counted, it is removed,
and calls succeed again before the run ends. Failures carry the clients' codes (no other exception reached
Locust: no traceback in its output) and `--xfer-check failures==0` turns them into exit status 3.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.loadgen.support import ROOT, failed, fetch, free_port, locust_cmd, parse_prom, total
from tests.support.toxiproxy import ProxiedServer, Toxic

# Room for gRPC's reconnect back-off (about 1 s after a failed attempt) before the run ends. The run ends by
# itself: a SIGINT would end the users' greenlets with KeyboardInterrupt tracebacks of its own.
RUN_S = 8
EXIT_CHECK_FAILED = 3
FAULT_CODES = {"unavailable", "deadline_exceeded"}  # what a reset connection may surface as
# grpc.aio's one mislabel (grpc/grpc#36066): a client-streaming write that fails as the call ends sets the call's
# status to INTERNAL "Internal error from Core", hiding the transport's UNAVAILABLE. Seen here on Upload about
# once in ten resets under CPU load; any other INTERNAL is still a failure of this test.
GRPCIO_WRITE_MISLABEL = re.compile(r"grpc Upload: internal: Internal error from Core$")


def _wait_for(what: str, cond: Callable[[], bool], proc: subprocess.Popen[str], timeout_s: float) -> None:
    """Polls cond every 0.1 s until it holds; fails if Locust exits first or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert proc.poll() is None, f"locust exited ({proc.returncode}) before {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout_s:g}s"
        time.sleep(0.1)


def _error_report(output: str) -> str:
    """Locust's error report (each failure's message and count), to tell what an unexpected code stood for."""
    start = output.rfind("Error report")
    return output[start:][:3000] if start >= 0 else output[-3000:]


def _unexplained_internal(report: str) -> list[str]:
    """The error report's INTERNAL failures other than grpc.aio's mislabelled client-stream write."""
    lines = [" ".join(line.split()[1:]) for line in report.splitlines() if ": internal: " in line]
    return [line for line in lines if not GRPCIO_WRITE_MISLABEL.search(line)]


@pytest.mark.timeout(90)
def test_reset_under_load_is_counted_and_recovered(proxied: ProxiedServer, tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"

    def count(**labels: str) -> float:
        try:
            return total(parse_prom(fetch(url, timeout=2)), "xfer_client_requests_total", **labels)
        except OSError:
            return 0.0

    def count_failed() -> float:
        try:
            return failed(parse_prom(fetch(url, timeout=2)))
        except OSError:
            return 0.0

    proc = subprocess.Popen(
        locust_cmd("--headless", "--host", proxied.target, "-u", "4", "-r", "4", "-t", f"{RUN_S}s",
                   "--xfer-mix", "upload:1,download:1,echo:1", "--xfer-sizes", "256KiB", "--xfer-chunk", "64KiB",
                   "--xfer-timeout", "2", "--xfer-metrics-port", str(port), "--xfer-metrics-dump", str(tmp_path),
                   "--xfer-check", "failures==0", "--only-summary"),
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        _wait_for("successful calls", lambda: count(code="ok") > 0, proc, 30)
        toxic = proxied.add(Toxic("reset_peer", {"timeout": 0}, "downstream"))
        try:
            _wait_for("failed calls under the reset", lambda: count_failed() > 0, proc, 5)
        finally:
            proxied.remove(toxic)
        ok_before = count(code="ok")
        _wait_for("successful calls after the reset was removed", lambda: count(code="ok") > ok_before, proc, 8)
        out, err = proc.communicate(timeout=RUN_S + 30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()

    assert proc.returncode == EXIT_CHECK_FAILED, err[-3000:]
    both = out + err
    assert "Traceback" not in both, both[max(0, both.find("Traceback") - 300) :][:4000]
    (dump,) = tmp_path.glob("local-*.prom")
    samples = parse_prom(dump.read_text())
    codes = {lab["code"] for n, lab, v in samples if n == "xfer_client_errors_total" and v > 0}
    report = _error_report(both)
    allowed = FAULT_CODES | ({"internal"} if not _unexplained_internal(report) else set())
    assert codes and codes <= allowed, f"codes {sorted(codes)}; Locust's {report}"
    assert total(samples, "xfer_client_verifications_total", result="mismatch") == 0
