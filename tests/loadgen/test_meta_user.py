"""`--xfer-mix meta:1`: a short headless run makes Meta calls, all answered and verified, on both transports
and both servers (the client histogram Locust dumps at exit counts them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.loadgen.support import failed, parse_prom, run_locust, total
from tests.support.servers import running_server, server_transports

RUN_S = 3


@pytest.mark.parametrize(("name", "transport"), server_transports())
def test_meta_mix_makes_verified_calls(name: str, transport: str, tmp_path: Path) -> None:
    with running_server(name, ["--store=mem"]) as s:
        r = run_locust(["--headless", "--host", s.target(transport), "-u", "2", "-r", "2", "-t", f"{RUN_S}s",
                        "--xfer-mix", "meta:1", "--xfer-meta-entries", "100", "--xfer-meta-size", "4-32",
                        "--xfer-metrics-port", "0", "--xfer-metrics-dump", str(tmp_path), "--only-summary"],
                       timeout=RUN_S + 60)
    assert r.returncode == 0, r.stderr[-3000:]
    (dump,) = tmp_path.glob("local-*.prom")
    samples = parse_prom(dump.read_text())
    calls = total(samples, "xfer_client_requests_total", method="Meta")
    assert calls >= 10, f"{calls} Meta calls in {RUN_S}s"
    assert failed(samples, method="Meta") == 0
    assert total(samples, "xfer_client_requests_total", method="Echo") == 0  # the mix ran Meta only
    verified = total(samples, "xfer_client_verifications_total", method="Meta", result="ok")
    assert verified == calls, f"{verified} of {calls} answers verified (order and digest)"
