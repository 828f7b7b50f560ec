"""An experiment's [network]: the runner puts a Toxiproxy in front of the cell's server, Locust's calls
cross it, the server's own figures do not.

One cell, Echo only (one round trip per call) at a low fixed rate, behind `latency = "20ms"`: every call's
response is held at least 20 ms, so the client's P50 cannot be below 20 ms, while the server, scraped
directly, answers an Echo in well under a millisecond; 10 ms leaves it room for a busy machine. The row,
experiment.json and the report record the network, and no toxiproxy-server outlives the run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.support.runs import experiment_file

ROOT = Path(__file__).resolve().parents[2]

EXPERIMENT = """
[experiment]
name = "net"
repeats = 1
warmup_s = 1

[network]
latency = "20ms"

[load]
rate = "40"
users = 4
spawn_rate = 4
duration_s = 3
mix = "echo:1"
transport = "frame"

[[servers]]
server = "xferd-go"
"""


@pytest.mark.timeout(120)
def test_latency_is_seen_by_the_client_not_the_server(tmp_path: Path) -> None:
    path = tmp_path / "net.toml"
    experiment_file(path, EXPERIMENT)
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "xferbench", "run", str(path), "--out", str(run_dir)],
                          cwd=ROOT, capture_output=True, text=True, timeout=100)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    (row,) = [json.loads(line) for line in (run_dir / "runs.jsonl").read_text().splitlines()]
    assert row["status"] == "ok", (row["error"], row["stderr_tail"])
    assert row["client_qps"] > 0 and row["server_qps"] > 0
    assert row["client_p50_s"] >= 0.020, row["client_p50_s"]
    assert row["server_p95_s"] < 0.010, row["server_p95_s"]
    assert row["network"]["latency_ms"] == 20 and row["network"]["proxy"] != row["ready"]["frame"]

    meta = json.loads((run_dir / "experiment.json").read_text())
    assert meta["network"]["latency_ms"] == 20
    text = meta["network"]["text"]
    assert "+20 ms per round trip" in text
    assert f"**Network**: {text}" in (run_dir / "summary.md").read_text()
    assert list((run_dir / "logs").glob("*.toxiproxy.log")), "the proxy's log is kept with the run's logs"

    pid = row["pids"]["toxiproxy"]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, "toxiproxy left behind"
