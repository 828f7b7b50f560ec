"""xferload's /metrics (--metrics-addr) against Locust's exporter, both real processes on one real server:
the same client families with the same labels and buckets for the same method; and a run stopped early with
SIGTERM finishes its calls in flight, prints its JSON, exits 0, and the server counted exactly its calls."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
from collections.abc import Callable, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.loadgen.support import fetch, free_port, locust_cmd, parse_prom, total
from tests.support.servers import ROOT, RunningServer, running_server
from tests.tools.test_xferload import XFERLOAD, frame_requests, requests_after

DEADLINE_S = 30.0
Families = dict[str, tuple[str, frozenset[str]]]  # name -> (type, label names)


def _poll(what: str, ok: Callable[[], bool], deadline_s: float = DEADLINE_S) -> None:
    end = time.monotonic() + deadline_s
    while not ok():
        if time.monotonic() > end:
            raise AssertionError(f"{what} within {deadline_s:.0f}s")
        time.sleep(0.1)


def _calls(url: str) -> float:
    try:
        return total(parse_prom(fetch(url, timeout=2)), "xfer_client_requests_total", code="ok")
    except OSError:
        return 0.0


def _families(text: str) -> tuple[Families, list[float]]:
    """The xfer_client_* families and process_cpu_seconds_total of a scrape: type and label names (the
    histogram's `le` left out), and the histogram's bucket bounds. The families with no series yet
    (xfer_client_errors_total before a failure) are left out: client_golang does not expose them."""
    fams: Families = {}
    bounds: list[float] = []
    for fam in text_string_to_metric_families(text):
        if not (fam.name.startswith("xfer_client_") or fam.name == "process_cpu_seconds") or not fam.samples:
            continue  # a family with no series (failures, before any) carries nothing: client_golang omits it
        labels = frozenset(k for s in fam.samples for k in s.labels if k != "le")
        fams[fam.name] = (fam.type, labels)
        if fam.type == "histogram":
            bounds = sorted({float(s.labels["le"]) for s in fam.samples if "le" in s.labels})
    return fams, bounds


def _series(text: str, name: str) -> set[tuple[tuple[str, str], ...]]:
    return {tuple(sorted(lab.items())) for n, lab, _v in parse_prom(text) if n == name}


@contextlib.contextmanager
def _running(argv: list[str]) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def go() -> Iterator[RunningServer]:
    with running_server("xferd-go") as s:
        yield s


@pytest.mark.parametrize(("mix", "xferload_args"), [("meta:1", ["--method", "meta", "--entries", "16"]),
                                                     ("echo:1", ["--method", "echo", "--size", "256"])])
def test_families_equal_locusts_for_the_same_method(go: RunningServer, mix: str, xferload_args: list[str]) -> None:
    assert XFERLOAD.exists(), f"{XFERLOAD} is not built; run `make build`"
    lport, xport = free_port(), free_port()
    locust = locust_cmd("--headless", "--host", f"frame://{go.addr('frame')}", "-u", "2", "-r", "2", "-t", "60s",
                        "--xfer-mix", mix, "--xfer-metrics-port", str(lport), "--loglevel", "WARNING")
    xferload = [str(XFERLOAD), "--addr", go.addr("frame"), "--metrics-addr", f"127.0.0.1:{xport}", "--duration", "60s",
                "--rate", "200", "--conns", "2", "--inflight", "2", *xferload_args]
    lurl, xurl = f"http://127.0.0.1:{lport}/metrics", f"http://127.0.0.1:{xport}/metrics"
    with _running(locust), _running(xferload):
        _poll("Locust made a call", lambda: _calls(lurl) > 0)
        _poll("xferload made a call", lambda: _calls(xurl) > 0)
        ltext, xtext = fetch(lurl), fetch(xurl)
    lfams, lbounds = _families(ltext)
    xfams, xbounds = _families(xtext)
    assert "xfer_client_request_duration_seconds" in lfams and "process_cpu_seconds" in lfams, sorted(lfams)
    assert xfams == lfams
    assert xbounds == lbounds and len(xbounds) > 30
    for name in ("xfer_client_requests_total", "xfer_client_request_duration_seconds_count",
                 "xfer_client_transfer_bytes_total", "xfer_client_verifications_total"):
        assert _series(xtext, name) == _series(ltext, name), name


def test_sigterm_ends_the_run_with_its_json_and_the_servers_count(go: RunningServer) -> None:
    port = free_port()
    before = frame_requests(go)
    proc = subprocess.Popen([str(XFERLOAD), "--addr", go.addr("frame"), "--metrics-addr", f"127.0.0.1:{port}",
                             "--method", "meta", "--entries", "8", "--rate", "1000", "--conns", "2",
                             "--inflight", "8", "--duration", "10m"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        _poll("xferload made 300 calls", lambda: _calls(url) >= 300)
        scraped = _calls(url)
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert time.monotonic() - began < 15
    result = json.loads(out)
    assert result["errors"] == {} and result["calls"] >= scraped
    assert requests_after(go, before + result["calls"]) == before + result["calls"]
