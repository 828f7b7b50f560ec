"""`xferbench run --prometheus` with a real Prometheus: it scrapes the run's server and its Locust while they
live (the dashboards' client panels need the `locust` job), the run's figures and time series come back
through PromQL, and every target file is gone afterwards. Without a place to register targets (no local
stack, no --prometheus-sd) the run is refused before any server starts (checked through `cli.main` in this
process; tests/cli/test_run_exit_codes.py runs a --prometheus refusal as a process)."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.support.runs import experiment_file, one_round, xferbench_run
from xferbench import cli
from xferbench.tools.stack import LOCAL_SERVICES, running_prometheus

EXPERIMENT = one_round("promrun") + """
mix = "echo:2,download:1"
sizes = "64KiB"
chunk = "16KiB"
users = 2
spawn_rate = 2
processes = 2
[[servers]]
server = "xferd-go"
"""


def query(url: str, promql: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}", timeout=10) as r:
        body = json.load(r)
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def test_prometheus_scrapes_the_server_and_locust_of_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "exp.toml"
    exp = experiment_file(path, EXPERIMENT)
    cell = exp.cells[0].name
    with running_prometheus(tmp_path / "prom", services={s: [] for s in LOCAL_SERVICES},
                            scrape_interval="1s") as prom:
        with monkeypatch.context() as m:
            m.setenv("XFERBENCH_STACK_DIR", str(tmp_path / "no-stack"))
            assert cli.main(["run", str(path), "--out", str(tmp_path / "refused"), "--prometheus", prom.url,
                             "--quick"]) == 2
        refused = capsys.readouterr().err
        assert "no local stack is up" in refused and "--prometheus-sd" in refused, refused
        assert not (tmp_path / "refused").exists()

        targets = tmp_path / "prom" / "targets"
        done = xferbench_run(str(path), "--out", str(tmp_path / "run"), "--prometheus", prom.url,
                             "--prometheus-sd", str(targets))
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert list(targets.iterdir()) == [], "a target file outlived its process"

        # Over the last minutes: each job had the targets of this cell, which answered, with the figures they serve:
        # the server; Locust's master and each of its two workers, where the calls are made and timed.
        for job, metric, targets in (("xferd", "xfer_requests_total", 1), ("locust", "xfer_client_requests_total", 3)):
            up = query(prom.url, f'max_over_time(up{{job="{job}",xferbench_cell="{cell}"}}[5m])')
            assert [float(r["value"][1]) for r in up] == [1.0] * targets, (job, up)
            served = query(prom.url, f'sum by (instance) '
                                     f'(max_over_time({metric}{{job="{job}",xferbench_cell="{cell}"}}[5m]))')
            assert served and sum(float(r["value"][1]) for r in served) > 0, (job, served)
        timed = query(prom.url, f'sum by (instance) (max_over_time(xfer_client_request_duration_seconds_count'
                                f'{{job="locust",xferbench_cell="{cell}"}}[5m]))')
        assert len([r for r in timed if float(r["value"][1]) > 0]) == 2, timed  # both workers' histograms

    (row,) = [json.loads(x) for x in (tmp_path / "run" / "runs.jsonl").read_text().splitlines()]
    assert row["status"] == "ok" and row["source"] == "promql", (row["error"], row["stderr_tail"])
    assert row["server_qps"] > 0 and row["scrape_check"]["server_qps"] > 0
    series = (tmp_path / "run" / row["timeseries"]).read_text().splitlines()
    head = series[0].split(",")
    server_qps = [line.split(",")[head.index("server_qps")] for line in series[1:]]
    assert any(v and float(v) > 0 for v in server_qps), series  # the server side of the series, from PromQL
