"""Locust's web UI on loadgen/: the --xfer-* options are offered there, and a swarm started through the
UI's HTTP API (the calls the page itself makes) runs Echo users with the values posted, then stops.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from typing import Any

import loadgen
from tests.loadgen.support import ROOT, fetch, free_port, locust_cmd
from tests.support.servers import running_server

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


def test_web_ui_offers_options_and_runs_a_swarm() -> None:
    with running_server("xferd-go", ["--store=mem"]) as server:
        port = free_port()
        ui = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen(
            locust_cmd("--host", server.target("grpc"), "--web-host", "127.0.0.1", "--web-port", str(port),
                       "--xfer-metrics-port", "0", "--xfer-echo-size", "512"),
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
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

            report = _poll("20 Echo calls", echo_stats)
            rows = {r["name"]: r for r in report["stats"]}
            assert set(rows) == {"Echo", "Aggregated"}, sorted(rows)  # no Upload/Download users
            assert rows["Echo"]["num_failures"] == 0 and not report["errors"], report["errors"]
            assert rows["Echo"]["avg_content_length"] == 1024  # the posted echo size, not the CLI's 512
            assert report["user_count"] == 2

            assert _post(ui + "/stop", {})["success"]
            _poll("state stopped", lambda: json.loads(fetch(ui + "/stats/requests"))["state"] == "stopped")
        finally:
            proc.send_signal(signal.SIGTERM)  # Locust shuts down gracefully on SIGTERM
            try:
                out, _ = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
        assert proc.returncode == 0, out[-3000:]
        assert "Traceback" not in out, out[-3000:]
