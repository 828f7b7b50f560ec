"""`--xfer-mix meta:1`: a short headless run makes Meta calls, all answered and verified, on both transports
and both servers (the client histogram Locust dumps at exit counts them). Each run has a server of its own
and goes through the session's `runs` (tests/loadgen/harness.py), two at a time."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.loadgen.harness import Runs, in_background, runs_for
from tests.loadgen.support import failed, parse_prom, run_locust, total
from tests.support.servers import running_server, server_transports

RUN_S = 1  # hundreds of Meta calls a second, even on a loaded machine: ten are asked for


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return runs_for(request, tmp_path_factory)


def _meta_run(tmp: Path, name: str, transport: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    with running_server(name, ["--store=mem"]) as s:
        r = run_locust(["--headless", "--host", s.target(transport), "-u", "2", "-r", "2", "-t", f"{RUN_S}s",
                        "--xfer-mix", "meta:1", "--xfer-meta-entries", "100", "--xfer-meta-size", "4-32",
                        "--xfer-metrics-port", "0", "--xfer-metrics-dump", str(tmp), "--only-summary"],
                       timeout=RUN_S + 60)
    return r, [p.read_text() for p in tmp.glob("local-*.prom")]


@pytest.mark.parametrize(("name", "transport"), server_transports())
@in_background(_meta_run)
def test_meta_mix_makes_verified_calls(runs: Runs, request: pytest.FixtureRequest, name: str, transport: str) -> None:
    r, dumps = runs[request.node]
    assert r.returncode == 0, r.stderr[-3000:]
    (dump,) = dumps
    samples = parse_prom(dump)
    calls = total(samples, "xfer_client_requests_total", method="Meta")
    assert calls >= 10, f"{calls} Meta calls in {RUN_S}s"
    assert failed(samples, method="Meta") == 0
    assert total(samples, "xfer_client_requests_total", method="Echo") == 0  # the mix ran Meta only
    verified = total(samples, "xfer_client_verifications_total", method="Meta", result="ok")
    assert verified == calls, f"{verified} of {calls} answers verified (order and digest)"
