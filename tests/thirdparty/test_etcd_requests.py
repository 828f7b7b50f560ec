"""etcd's own request series mapped by name ([servers.requests] of a command server, xferbench/config/series.py):
the shipped experiment (experiments/third-party/etcd.toml) maps go-grpc-prometheus's counter and, with etcd's
`--metrics extensive`, its latency histogram; server_qps, server_requests, server_errors and server_p99_s then
come from etcd's count, which must agree with what the client counted."""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.runs import xferbench_run
from tests.thirdparty.conftest import THIRD_PARTY

EXPERIMENT = THIRD_PARTY / "etcd.toml"
USERS = 4
COUNTER = "grpc_server_handled_total"


def _experiment(tmp_path: Path) -> Path:
    """The shipped experiment cut to one cell and one run; its mix made Range:3 and DeleteRange:1 of an empty key,
    which etcd refuses (InvalidArgument: "key is not provided"), so a quarter of the calls are errors on both
    sides."""
    text = EXPERIMENT.read_text()
    short = {
        "repeats = 3": "repeats = 1",
        "gogc = [50, 100, 400]": "gogc = [100]",
        'gomemlimit = ["off", "24MiB"]': 'gomemlimit = ["off"]',
        "users = 8": f"users = {USERS}",
        "spawn_rate = 8": f"spawn_rate = {USERS}",
        'rate = "200"': 'rate = "100"',
        "KV/Range:3,etcdserverpb.KV/Put:1": "KV/Range:3,etcdserverpb.KV/DeleteRange:1",
        '"etcdserverpb.KV/Put": {"key": "a2V5{{key:10}}{{key:10}}{{key:10}}{{key:10}}", "value": "{{bytes:256}}"}':
            '"etcdserverpb.KV/DeleteRange": {"key": ""}',
        'proto = "etcd-proto/': f'proto = "{THIRD_PARTY}/etcd-proto/',
        'import_path = ["etcd-proto"]': f'import_path = ["{THIRD_PARTY}/etcd-proto"]',
        'baseline = "etcd-gogc=100-gomemlimit=off"\n': "",
    }  # fmt: skip
    for old, new in short.items():
        assert old in text, f"experiments/third-party/etcd.toml no longer says {old}"
        text = text.replace(old, new)
    exp = tmp_path / "etcd.toml"
    exp.write_text(text)
    return exp


def _server_counts(run: Path, row: dict[str, Any]) -> tuple[list[float], list[float]]:
    """etcd's unary calls and errors at each server scrape of the run, summed here from the raw samples."""
    calls, errors = [], []
    for line in (run / row["timeseries"].replace(".csv", ".snapshots.jsonl")).read_text().splitlines():
        snap = json.loads(line)
        if snap["side"] != "server":
            continue
        unary = [(ls, v) for n, ls, v in snap["samples"] if n == COUNTER and ls.get("grpc_type") == "unary"]
        calls.append(sum(v for _, v in unary))
        errors.append(sum(v for ls, v in unary if ls.get("grpc_code") != "OK"))
    return calls, errors


def _widest_tick(counts: list[float]) -> float:
    return max(b - a for a, b in itertools.pairwise(counts))


def test_etcds_own_counter_and_histogram_give_the_server_figures(tmp_path: Path) -> None:
    r = xferbench_run(str(_experiment(tmp_path)), "--out", str(tmp_path / "run"), timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (row,) = [json.loads(line) for line in (tmp_path / "run" / "runs.jsonl").read_text().splitlines()]
    assert row["status"] == "ok", row
    # The mapping is recorded with the cell, as the other command keys are.
    assert row["config"]["command"]["requests"] == {
        "counter": 'grpc_server_handled_total{grpc_type="unary"}',
        "errors": 'grpc_code!="OK"',
        "latency": 'grpc_server_handling_seconds{grpc_type="unary"}',
    }, row["config"]["command"]
    served, failed = row["server_requests"], row["server_errors"]
    sent, refused = row["client_requests"], row["client_failures"]
    assert sent > 100 and refused > 10, row
    assert served is not None and failed is not None and row["server_qps"] > 0, row
    # The server is scraped a few milliseconds after the client in each tick, so its window ends the same way
    # but later: a call counted by one side only was either in flight at an edge (at most one per user) or
    # served between the two scrapes of the window's first or last tick, which is within one whole tick of
    # etcd's count. The bound follows from the order of the scrapes, whatever the machine's load.
    calls, errors = _server_counts(tmp_path / "run", row)
    assert abs(served - sent) <= _widest_tick(calls) + USERS, (served, sent, calls)
    assert abs(failed - refused) <= _widest_tick(errors) + USERS, (failed, refused, errors)
    # Errors by etcd's grpc_code, not the client's word: a quarter of the calls, give or take the edges.
    assert 0 < failed < served, row
    assert row["server_qps"] * row["duration_s"] == pytest.approx(served, rel=0.2), row  # the same 3 s, give or take ms
    # The histogram mapped: latency percentiles from etcd's own buckets, or, where a quantile lies in its first
    # bucket (5 ms: etcd answers a Range in well under that), that bucket's bound instead of an invented value.
    bounds = row.get("bounds") or {}
    for q in ("server_p95_s", "server_p99_s"):
        assert (row[q] is None) == (q in bounds), row
        assert (0 < row[q] < 1) if row[q] is not None else bounds[q] == 0.005, row
    if row["server_p95_s"] is not None and row["server_p99_s"] is not None:
        assert row["server_p95_s"] <= row["server_p99_s"], row
    # CPU per request divides by etcd's count now, not the client's: CPU over the window / etcd's calls in it. The
    # CPU's span is the tree samples' and the rate's the scrapes' (the same ticks, read microseconds apart).
    cpu_per_call = row["server_cpu_cores"] / row["server_qps"]
    assert row["cpu_requests_from"] == "server", row
    assert row["server_cpu_per_request_s"] == pytest.approx(cpu_per_call, rel=0.01), row
    # The per-second series read the same mapping: etcd's calls appear second by second, not only in the row.
    with open(tmp_path / "run" / row["timeseries"]) as f:
        per_second = [r["server_qps"] for r in csv.DictReader(f)]
    assert any(v and float(v) > 0 for v in per_second), per_second
