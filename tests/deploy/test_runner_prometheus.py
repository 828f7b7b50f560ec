"""One experiment cell measured two ways at once: the built-in scraper and PromQL against a real Prometheus.

The runner takes one `MetricsSource`; this test hands it a tee that drives both the `ScrapeSource` (the
default) and a `PromQLSource` (what `xferbench run --prometheus URL --prometheus-sd DIR` builds) over the
same server process and the same load, then computes the server figures from each with the runner's own
`figures.server_figures` over a common window and requires them to agree.

Tolerances, stated: rates (QPS, bytes/s) within 15 %; mean RSS within 15 %; P95 within 35 % (quantiles
interpolated inside one histogram bucket move more with a shifted window). The two sources sample the
counters up to one scrape interval (1 s) apart at each end of a ~10 s window, which bounds the rate
difference at about 1/10.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.servers import SERVERS
from xferbench.tools.stack import running_prometheus

RATE_TOL = 0.15
RSS_TOL = 0.15
P95_TOL = 0.35

EXPERIMENT = """
[experiment]
name = "deploy-agreement"
description = "one cell, measured through the built-in scraper and through Prometheus at once"
repeats = 1
warmup_s = 1

[load]
users = 4
spawn_rate = 4
duration_s = 10
profile = "steady"
mix = "upload:1,download:1,echo:2"
sizes = "64KiB"
chunk = "16KiB"
verify = "on"

[[servers]]
server = "xferd-go"
[servers.flags]
pool = ["on"]
[servers.load]
transport = ["grpc"]
"""


def close(a: float | None, b: float | None, tol: float) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= tol * max(abs(a), abs(b), 1e-12)


@pytest.mark.slow  # make test's tests/run/test_run_prometheus.py scrapes a run
def test_promql_and_scraper_agree_on_one_cell(tmp_path: Path) -> None:
    from xferbench import config
    from xferbench.measure import figures
    from xferbench.measure.sources import MetricsSource, PromQLSource, ScrapeSource
    from xferbench.measure.targets import FileSDRegistry
    from xferbench.run import sweep

    if not SERVERS["xferd-go"].binary.exists():
        pytest.fail(f"{SERVERS['xferd-go'].binary} is not built; run `make build`")

    class Tee(MetricsSource):
        """Drives both sources; the runner sees the scraper's snapshots, the test keeps both."""

        name = "scrape+promql"

        def __init__(self, scrape: ScrapeSource, promql: PromQLSource) -> None:
            self.scrape, self.promql = scrape, promql
            self.pairs: list[tuple[list, list]] = []

        def begin(self, metrics_addr: str, labels: dict[str, str]) -> None:
            self.scrape.begin(metrics_addr, labels)
            self.promql.begin(metrics_addr, labels)

        def tick(self):
            self.promql.tick()
            return self.scrape.tick()

        def snapshots(self, t_start: float, t_end: float) -> list:
            mine = self.scrape.snapshots(t_start, t_end)
            self.pairs.append((mine, self.promql.snapshots(t_start, t_end)))
            return mine

        def end(self) -> None:
            self.scrape.end()
            self.promql.end()

        def twin(self) -> MetricsSource:
            raise AssertionError("one cell: no duet, so no second source")

    services = {"xferd-go": [], "xferd-c": [], "locust-master": [], "locust-worker": []}
    with running_prometheus(tmp_path / "prom", services=services, scrape_interval="1s") as prom:
        sd = FileSDRegistry(tmp_path / "prom" / "targets")  # what --prometheus-sd DIR does
        tee = Tee(ScrapeSource(), PromQLSource(prom.url, register=sd))
        (tmp_path / "exp.toml").write_text(EXPERIMENT)
        exp = config.load_file(tmp_path / "exp.toml")
        res = sweep.sweep(exp, tmp_path / "run", source=tee)

    rows = [json.loads(line) for line in (tmp_path / "run" / "runs.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["ok"], rows[0].get("error")
    assert res.rows and tee.pairs
    scraped, queried = tee.pairs[0]
    assert len(scraped) >= 5 and len(queried) >= 5, (len(scraped), len(queried))
    # The common measured window: the later start and the earlier end of the two, after the warm-up.
    t_a = max(scraped[0].t, queried[0].t) + exp.warmup_s
    t_b = min(scraped[-1].t, queried[-1].t)
    fa = figures.server_figures(figures.window(scraped, t_a, t_b), scraped)
    fb = figures.server_figures(figures.window(queried, t_a, t_b), queried)
    keys = ("server_qps", "server_bytes_per_s", "server_p95_s", "rss_mean_bytes")
    report = {k: (fa[k], fb[k]) for k in keys}
    print("scraper vs promql:", report)
    assert fa["server_qps"] and fa["server_qps"] > 0, report
    assert close(fa["server_qps"], fb["server_qps"], RATE_TOL), report
    assert close(fa["server_bytes_per_s"], fb["server_bytes_per_s"], RATE_TOL), report
    assert close(fa["rss_mean_bytes"], fb["rss_mean_bytes"], RSS_TOL), report
    assert close(fa["server_p95_s"], fb["server_p95_s"], P95_TOL), report
