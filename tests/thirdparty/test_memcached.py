"""Debian's memcached, a C server with worker threads, measured by the runner as a command server
(experiments/third-party/memcached.toml) with its malloc replaced by preload, and driven by our own Locust
file speaking memcached's text protocol (experiments/third-party/memcached_locustfile.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.runs import xferbench_run
from tests.thirdparty.conftest import ROOT, THIRD_PARTY, locust_total, memcached_stats

LOCUSTFILE = THIRD_PARTY / "memcached_locustfile.py"
USERS = 2


def test_the_locustfile_counts_what_memcached_counts(memcached: int) -> None:
    # 50 keys, so gets hit what the sets stored and the VALUE answers are read too, not only misses.
    argv = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "-t", "2s", "-u", str(USERS),
        "-r", str(USERS), "--host", f"tcp://127.0.0.1:{memcached}", "--mc-keys", "50", "--mc-get-ratio", "0.7",
        "--json", "--loglevel", "WARNING",
    ]  # fmt: skip
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    requests, failures = locust_total(r.stdout)
    stats = memcached_stats(memcached)
    served = int(stats["cmd_get"]) + int(stats["cmd_set"])
    assert requests > 100 and failures == 0, r.stderr[-2000:]
    assert int(stats["get_hits"]) > 0 and int(stats["cmd_set"]) > 0, stats
    # Locust stops a user where it stands when the run time is up: a command sent but not yet answered is
    # counted by memcached and never by Locust, at most one per user.
    assert requests <= served <= requests + USERS, (requests, stats)


def test_a_short_memcached_experiment_ends_in_cost_verdicts_with_the_preload_recorded(tmp_path: Path) -> None:
    # The shipped experiment, cut to two allocators (three duets of --quick windows, jemalloc beside glibc): a
    # server without /metrics, whose CPU per request and RSS come from its process tree alone.
    text = (THIRD_PARTY / "memcached.toml").read_text()
    short = {
        'alloc = ["glibc", "jemalloc", "tcmalloc", "mimalloc"]': 'alloc = ["glibc", "jemalloc"]',
        'locustfile = "memcached_locustfile.py"': f'locustfile = "{LOCUSTFILE}"',
    }
    for old, new in short.items():
        assert old in text, f"experiments/third-party/memcached.toml no longer says {old}"
        text = text.replace(old, new)
    exp = tmp_path / "memcached.toml"
    exp.write_text(text)
    r = xferbench_run(str(exp), "--out", str(tmp_path / "run"), timeout=180)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    summary = (tmp_path / "run" / "summary.md").read_text()
    assert "## Verdicts" in summary and "`memcached-jemalloc`" in summary and "`memcached-glibc`" in summary
    # Ranked by cost, with the paced rate held fixed, and both cost figures judged in every report's table.
    assert "Ranked by**: server CPU per request: fixed offered load (a paced locustfile)" in summary, summary
    html = (tmp_path / "run" / "report.html").read_text()
    for report in (summary, html, r.stdout):
        verdicts = report[report.index("erdicts"):]
        for figure in ("server CPU per request", "peak RSS"):
            assert "memcached-jemalloc" in verdicts and figure in verdicts, (figure, verdicts[:3000])
    assert "held fixed by the load" in summary and "cgroup v1 cpuacct.usage" in summary, summary
    assert "0 B/s" not in summary and "client bytes/s" not in summary  # a load that counts no bytes
    rows = [json.loads(line) for line in (tmp_path / "run" / "runs.jsonl").read_text().splitlines()]
    assert {row["cell"] for row in rows} == {"memcached-glibc", "memcached-jemalloc"}
    assert len(rows) == 6  # three rounds of the duet
    for row in rows:
        assert row["status"] == "ok" and row["client_requests"] > 0 and row["client_failures"] == 0, row
        assert row["server_cpu_per_op_s"] > 0 and row["cpu_requests_from"] == "client", row
        assert row["rss_peak_bytes"] > 1 << 20 and row["cpu_clock"].startswith("cgroup"), row
    jemalloc = next(row for row in rows if row["cell"] == "memcached-jemalloc")
    lib = jemalloc["ready"]["alloc_lib"]
    assert Path(lib).name.startswith("libjemalloc.so") and Path(lib).exists(), jemalloc["ready"]
    glibc = next(row for row in rows if row["cell"] == "memcached-glibc")
    assert Path(glibc["ready"]["alloc_lib"]).name.startswith("libc"), glibc["ready"]
