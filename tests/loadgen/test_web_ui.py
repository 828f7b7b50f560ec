"""Locust's web UI on loadgen/: the --xfer-* options are offered there, a swarm started through the UI's
HTTP API (the calls the page itself makes) runs Echo users with the values posted, a bad host or option is
refused with the page's own error message, and each run started from the page gets its own summary.

Each test has a Locust process of its own; the module starts them together (each spends a couple of seconds
importing before its page answers, and then waits idle for the form) against one server.
"""

from __future__ import annotations

import csv
import io
import json
import re
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

import loadgen
from tests.loadgen.support import ROOT, fetch, free_port, locust_cmd, summary_counts, summary_wall
from tests.support.servers import RunningServer, running_server

DEADLINE_S = 60  # for each wait; the whole Locust process is killed in `finally` whatever happens
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _post(url: str, form: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(url, data=urllib.parse.urlencode(form).encode(), method="POST")
    with _OPENER.open(req, timeout=10) as r:
        return json.loads(r.read())


def _poll(what: str, probe, deadline_s: float = DEADLINE_S, pause: float = 0.2):
    """Calls probe() until it returns something truthy; bounded by time (and hence by count)."""
    end, last = time.monotonic() + deadline_s, None
    while time.monotonic() < end:
        try:
            if got := probe():
                return got
        except OSError as e:  # not listening yet
            last = e
        time.sleep(pause)
    raise AssertionError(f"{what}: not within {deadline_s}s (last error: {last})")


def _template_args(html: str) -> dict[str, Any]:
    """The page is a React app; Locust renders its state into `window.templateArgs = {...}`."""
    line = next(line for line in html.splitlines() if "window.templateArgs" in line)
    return json.loads(line.split("=", 1)[1])


# Locust serves the page's table (/stats/requests) from a cache it refreshes every 2 s; a wait that polls it
# can lose those 2 s at each step. Where a test only waits, it reads what the page renders on load, and the
# table's CSV download, both made afresh at each request.
def _state(ui: str) -> str:
    return str(_template_args(fetch(ui + "/"))["state"])


def _requests(ui: str, name: str) -> int:
    rows = csv.DictReader(io.StringIO(fetch(ui + "/stats/requests/csv")))
    return next((int(r["Request Count"]) for r in rows if r["Name"] == name), 0)


class WebLocust:
    """`locust -f loadgen/` with its web UI on a free port; `finish()` stops it (SIGTERM) and returns its output."""

    def __init__(self, host: str, *args: str) -> None:
        self.ui = f"http://127.0.0.1:{free_port()}"
        self.proc = subprocess.Popen(
            locust_cmd("--host", host, "--web-host", "127.0.0.1", "--web-port", self.ui.rsplit(":", 1)[1],
                       "--xfer-metrics-port", "0", *args),
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
        self.started = time.monotonic()
        self.output: str | None = None

    def stats(self) -> dict[str, Any]:
        return json.loads(fetch(self.ui + "/stats/requests"))

    def finish(self) -> str:
        if self.output is not None:
            return self.output
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # Locust shuts down gracefully on SIGTERM
        try:
            self.output, _ = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.output, _ = self.proc.communicate()
        return self.output


# Each test's Locust: its arguments after --host and the UI's.
WEB_ARGS = {
    "test_web_ui_offers_options_and_runs_a_swarm": ["--xfer-echo-size", "512"],
    "test_web_ui_refuses_a_bad_host_and_option_visibly": [],
    "test_web_ui_runs_are_summarised_one_by_one": ["--xfer-mix", "echo:1"],
}


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    with running_server("xferd-go", ["--store=mem"]) as s:
        yield s


@pytest.fixture(scope="module")
def webs(request: pytest.FixtureRequest, server: RunningServer) -> Iterator[dict[str, WebLocust]]:
    """The Locust processes of the module's selected tests, started together."""
    selected = {item.originalname for item in request.session.items  # type: ignore[attr-defined]
                if getattr(item, "module", None) is request.module}
    procs = {name: WebLocust(server.target("grpc"), *args) for name, args in WEB_ARGS.items() if name in selected}
    try:
        yield procs
    finally:
        for web in procs.values():
            web.finish()  # those a test did not finish (it failed first)


def test_web_ui_offers_options_and_runs_a_swarm(server: RunningServer, webs: dict[str, WebLocust]) -> None:
    web = webs["test_web_ui_offers_options_and_runs_a_swarm"]  # started with --xfer-echo-size 512
    ui = web.ui
    try:
        html = _poll("web UI answering", lambda: fetch(ui + "/"))
        args = _template_args(html)
        options = args["extra_options"]
        # every --xfer-* option can be set on the page, with its help and the command line's value
        assert {o.dest for o in loadgen.OPTIONS} <= options.keys(), sorted(options)
        assert all(options[k]["help_text"] for k in ("xfer_sizes", "xfer_profile", "xfer_mix", "xfer_rate"))
        assert options["xfer_echo_size"]["default_value"] == "512"
        assert args["shape_use_common_options"]  # XferShape keeps the user count and rate fields

        # What the page posts. Echo-only mix and a new echo size: both must take effect (the mix used
        # to be applied only at startup, so the UI's value was ignored).
        started = _post(ui + "/swarm", {"user_count": 2, "spawn_rate": 2, "host": server.target("grpc"),
                                        "xfer_mix": "echo:1", "xfer_echo_size": "1KiB"})
        assert started["success"], started

        def echo_stats() -> dict[str, Any] | None:
            report = json.loads(fetch(ui + "/stats/requests"))
            rows = {r["name"]: r for r in report["stats"]}
            return report if rows.get("Echo", {}).get("num_requests", 0) >= 20 else None

        _poll("20 Echo calls", lambda: _requests(ui, "Echo") >= 20)
        report = _poll("20 Echo calls in the page's table", echo_stats)
        rows = {r["name"]: r for r in report["stats"]}
        assert set(rows) == {"Echo", "Aggregated"}, sorted(rows)  # no Upload/Download users
        assert rows["Echo"]["num_failures"] == 0 and not report["errors"], report["errors"]
        assert rows["Echo"]["avg_content_length"] == 1024  # the posted echo size, not the CLI's 512
        assert report["user_count"] == 2

        assert _post(ui + "/stop", {})["success"]
        _poll("state stopped", lambda: _state(ui) == "stopped")
    finally:
        out = web.finish()
    assert web.proc.returncode == 0, out[-3000:]
    assert "Traceback" not in out, out[-3000:]


def test_web_ui_refuses_a_bad_host_and_option_visibly(server: RunningServer, webs: dict[str, WebLocust]) -> None:
    web = webs["test_web_ui_refuses_a_bad_host_and_option_visibly"]
    try:
        _poll("web UI answering", lambda: fetch(web.ui + "/"))
        got = _post(web.ui + "/swarm", {"user_count": 2, "spawn_rate": 2, "host": "http://127.0.0.1:8089"})
        # The page shows `message` when success is false: the user sees why, and nothing runs.
        assert got["success"] is False and "unknown scheme 'http'; accepted schemes: grpc, frame" in got["message"]
        got = _post(web.ui + "/swarm", {"user_count": 2, "spawn_rate": 2, "host": server.target("grpc"),
                                        "xfer_mix": "upload:x"})
        assert got["success"] is False and "--xfer-mix 'upload:x'" in got["message"], got
        assert web.stats()["state"] == "ready" and web.stats()["user_count"] == 0
        # A good form still starts a run.
        assert _post(web.ui + "/swarm", {"user_count": 1, "spawn_rate": 1, "host": server.target("grpc"),
                                         "xfer_mix": "echo:1"})["success"]
        _poll("an Echo call", lambda: _requests(web.ui, "Echo") > 0)
    finally:
        out = web.finish()
    assert web.proc.returncode == 0, out[-3000:]
    assert "swarm refused: --host: target 'http://127.0.0.1:8089': unknown scheme 'http'" in out


def test_web_ui_runs_are_summarised_one_by_one(server: RunningServer, webs: dict[str, WebLocust]) -> None:
    """Two runs from the web UI: each summary counts that run's calls over that run's time (it used to count
    the last run's calls over the whole process's life)."""
    counts: list[int] = []
    web = webs["test_web_ui_runs_are_summarised_one_by_one"]  # started with --xfer-mix echo:1
    # Its waits read the page's table, on purpose: Locust's 2-s refresh of it keeps each run over a second,
    # and the check of the summary's rate below needs that (the summary states its wall time to 0.1 s).
    try:
        _poll("web UI answering", lambda: fetch(web.ui + "/"))
        for n_calls in (30, 60):
            assert _post(web.ui + "/swarm", {"user_count": 2, "spawn_rate": 2, "host": server.target("grpc")})["success"]
            _poll("the run started (Locust clears its table then)", lambda: web.stats()["state"] == "running")
            _poll(f"{n_calls} Echo calls", lambda n=n_calls: next(
                (r["num_requests"] for r in web.stats()["stats"] if r["name"] == "Echo"), 0) >= n)
            assert _post(web.ui + "/stop", {})["success"]
            _poll("state stopped", lambda: web.stats()["state"] == "stopped")
            counts.append(next(r["num_requests"] for r in web.stats()["stats"] if r["name"] == "Echo"))
        lifetime = time.monotonic() - web.started  # the process's life so far (started with the module's)
    finally:
        out = web.finish()
    assert web.proc.returncode == 0, out[-3000:]
    for run, locust_count in enumerate(counts, start=1):
        printed = summary_counts(out, run)
        assert abs(printed["Echo"] - locust_count) <= 4, (run, printed, locust_count)  # a call or two per user at the stop
        wall = summary_wall(out, run)
        assert wall < lifetime / 2 + 1, (run, wall, lifetime)  # this run's time, not the process's
        m = re.search(rf"xfer summary of run {run} .*\n.*\n\S+\s+Echo\s+(\d+)\s+\d+\s+([\d.]+)", out)
        assert m and float(m.group(2)) == pytest.approx(int(m.group(1)) / wall, rel=0.05, abs=0.2), m
