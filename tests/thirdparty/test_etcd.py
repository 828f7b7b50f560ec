"""Debian's etcd, a Go gRPC server nobody here wrote: loadgen's CallUser calling a mix of etcdserverpb.KV/Range and
Put (3:1) from the .proto files shipped in experiments/third-party/etcd-proto/ (etcd serves no gRPC reflection),
and the runner measuring it as a command server under Go's GC settings (experiments/third-party/etcd.toml), its
GC figures read from etcd's own /metrics."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from tests.support.runs import xferbench_run
from tests.thirdparty.conftest import ROOT, THIRD_PARTY, Etcd, locust_total, metric

EXPERIMENT = THIRD_PARTY / "etcd.toml"
USERS = 2
KV = 'grpc_server_handled_total{{grpc_code="OK",grpc_method="{}",grpc_service="etcdserverpb.KV",grpc_type="unary"}}'


def _shipped_load() -> dict[str, Any]:
    load: dict[str, Any] = tomllib.loads(EXPERIMENT.read_text())["load"]
    return load


def test_the_range_put_mix_from_the_shipped_protos_counts_what_etcd_counts(etcd: Etcd) -> None:
    load = _shipped_load()  # the experiment's own calls and templates, so this checks what it sends
    assert load["call"] == "etcdserverpb.KV/Range:3,etcdserverpb.KV/Put:1", load["call"]
    argv = [
        sys.executable, "-m", "locust", "-f", str(ROOT / "loadgen"), "--headless", "-t", "2s", "-u", str(USERS),
        "-r", str(USERS), "--host", f"grpc://127.0.0.1:{etcd.port}", "--xfer-call", load["call"],
        "--xfer-data", load["data"], "--xfer-proto", str(THIRD_PARTY / load["proto"]),
        "--xfer-import-path", ",".join(str(THIRD_PARTY / p) for p in load["import_path"]),
        "--json", "--loglevel", "WARNING",
    ]  # fmt: skip
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    requests, failures = locust_total(r.stdout)
    assert requests > 100 and failures == 0, r.stderr[-2000:]
    by_method = {e["name"]: e["num_requests"] for e in json.loads(r.stdout)}
    assert set(by_method) == {"Range", "Put"} and sum(by_method.values()) == requests, by_method
    for method, sent in by_method.items():
        # A call in flight when the run time is up reaches etcd but not Locust's count: at most one per user.
        served = metric(etcd.metrics_url, KV.format(method))
        assert sent <= served <= sent + USERS, (method, sent, served)
    puts = metric(etcd.metrics_url, "etcd_mvcc_put_total")
    assert puts == metric(etcd.metrics_url, KV.format("Put")), puts  # each Put that etcd answered OK stored its key
    # Each call is a Range with p = 3/4, independently: within five standard deviations, plus the calls in flight.
    p = 0.75
    assert abs(by_method["Range"] - p * requests) <= 5 * math.sqrt(requests * p * (1 - p)) + 4 * USERS, by_method
    # The key template gives distinct keys: n Puts drawn from 10,000 keys repeat about n²/20,000 of them (this
    # allows twice that); keys that decoded to fewer distinct bytes would collapse the count far below.
    keys = metric(etcd.metrics_url, "etcd_debugging_mvcc_keys_total")
    n = by_method["Put"]
    assert n - n**2 / 10_000 <= keys <= min(n + USERS, 10_000), (n, keys)


def test_a_short_etcd_experiment_ends_in_verdicts_with_go_gc_figures_from_its_metrics(tmp_path: Path) -> None:
    # The shipped experiment, cut to two GOGC values and one round (one duet); its data folders are {tmpdir}s.
    text = EXPERIMENT.read_text()
    short = {
        "repeats = 3": "repeats = 1",
        "gogc = [50, 100, 400]": "gogc = [100, 400]",
        'proto = "etcd-proto/': f'proto = "{THIRD_PARTY}/etcd-proto/',
        'import_path = ["etcd-proto"]': f'import_path = ["{THIRD_PARTY}/etcd-proto"]',
    }
    for old, new in short.items():
        assert old in text, f"experiments/third-party/etcd.toml no longer says {old}"
        text = text.replace(old, new)
    text = re.sub(r'gomemlimit = \["off", "[^"]+"\]', 'gomemlimit = ["off"]', text)
    exp = tmp_path / "etcd.toml"
    exp.write_text(text)
    r = xferbench_run(str(exp), "--out", str(tmp_path / "run"), timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    summary = (tmp_path / "run" / "summary.md").read_text()
    cells = {"etcd-gogc=100-gomemlimit=off", "etcd-gogc=400-gomemlimit=off"}
    assert "## Verdicts" in summary and all(f"`{c}`" in summary for c in cells), summary[:2000]
    rows = [json.loads(line) for line in (tmp_path / "run" / "runs.jsonl").read_text().splitlines()]
    assert {row["cell"] for row in rows} == cells
    for row in rows:
        assert row["status"] == "ok" and row["client_requests"] > 0 and row["client_failures"] == 0, row
        # From etcd's /metrics (the Go runtime's series): the heap, and GC pauses over the client's count.
        assert row["ready"]["metrics"].startswith("127.0.0.1:"), row["ready"]
        assert row["heap_inuse_mean_bytes"] > 1 << 20, row
        assert row["gc_pauses"] is not None and row["gc_pause_total_s"] is not None, row
        assert row["gc_pause_per_request_s"] is not None, row
        assert row["server_cpu_per_op_s"] > 0, row
