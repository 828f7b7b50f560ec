"""[load] aimed at the user's own target (xferbench/config/userload.py): any gRPC method through loadgen's CallUser
(`call`, `data`), a user's own locustfile run under the runner, and either spread over two Locust processes
(`processes`). Real servers on loopback, 2 s measured; plus the combinations refused when the experiment is
read."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.runs import experiment_file
from xferbench import config as xe
from xferbench.analysis.row import RunRow
from xferbench.run import sweep

ROOT = Path(__file__).resolve().parents[2]
LOCUSTFILE = ROOT / "tests" / "support" / "http_locustfile.py"


def _head(name: str, load: str, warmup_s: int = 1, users: int = 2) -> str:
    return (
        f'[experiment]\nname = "{name}"\nrepeats = 1\nduet = false\nwarmup_s = {warmup_s}\n'
        f"[load]\nusers = {users}\nspawn_rate = {users}\nduration_s = 2\n{load}"
    )


def _sweep(tmp_path: Path, text: str) -> RunRow:
    exp = experiment_file(tmp_path / "exp.toml", text)
    result = sweep.sweep(exp, tmp_path / "run")
    assert len(result.rows) == 1
    return result.rows[0]


GO = """
[[servers]]
server = "xferd-go"
"""


def test_any_grpc_method_with_a_template_is_counted_like_ours(tmp_path: Path) -> None:
    (tmp_path / "req.json").write_text('{"payload": "{{bytes:128}}"}')
    load = 'rate = "200"\ncall = "xfer.v1.FileTransfer/Echo"\ndata = "@req.json"\n'
    row = _sweep(tmp_path, _head("call", load) + GO)
    assert row.ok, (row.error, row.stderr_tail)
    assert row.client_methods is not None and set(row.client_methods) == {"Echo"}
    # The server's count of the window agrees with the client's, as in test_command_server: the two are read
    # one after the other at each end of the window, up to tens of milliseconds apart on a busy machine (two
    # test workers), so at 200 calls/s they may differ by a tenth; a call counted twice, or not at all, by half.
    assert row.client_requests and row.server_requests
    assert abs(row.server_requests - row.client_requests) <= max(5, 0.1 * row.client_requests), row
    assert row.server_cpu_per_request_s and row.server_cpu_per_request_s > 0
    assert row.client_p95_s and not row.client_failures


MIX_CALL = 'call = "xfer.v1.FileTransfer/Echo:3,xfer.v1.FileTransfer/Meta:1"\n'


def test_a_weighted_mix_of_methods_passes_through(tmp_path: Path) -> None:
    """call = "Echo:3,Meta:1" with data keyed by method (a file beside the experiment): both methods measured,
    in the weights' shares, and every call the server counted."""
    (tmp_path / "mix.json").write_text(
        '{"xfer.v1.FileTransfer/Echo": {"payload": "{{bytes:64}}"},'
        ' "xfer.v1.FileTransfer/Meta": {"entries": [{"key": "k{{seq}}", "value": "{{bytes:16}}"}]}}'
    )
    row = _sweep(tmp_path, _head("mix", f'rate = "200"\n{MIX_CALL}data = "@mix.json"\n') + GO)
    assert row.ok, (row.error, row.stderr_tail)
    assert row.client_methods is not None and set(row.client_methods) == {"Echo", "Meta"}, row.client_methods
    assert row.client_requests and row.server_requests and not row.client_failures
    assert abs(row.server_requests - row.client_requests) <= max(5, 0.1 * row.client_requests), row
    # Each call is Echo with p = 3/4: Echo's share of the window's n calls is within five standard deviations of
    # it, give or take a few calls at the window's edges (read a little apart from the rates).
    echo, meta = (row.client_methods[m]["qps"] or 0.0 for m in ("Echo", "Meta"))
    n, p = row.client_requests, 0.75
    assert abs(echo / (echo + meta) - p) <= 5 * (p * (1 - p) / n) ** 0.5 + 10 / n, (echo, meta, n)


def test_processes_spread_the_calls_over_workers_and_count_them_all(tmp_path: Path) -> None:
    load = 'rate = "200"\nprocesses = 2\ncall = "xfer.v1.FileTransfer/Echo"\n'
    row = _sweep(tmp_path, _head("dist", load, users=4) + GO)
    assert row.ok, (row.error, row.stderr_tail)
    assert row.client_users == 4  # both workers' users, added up
    # Three endpoints are read at each end of the window, in parallel but not in the same instant, and the server
    # after them: on a starved generator CPU their instants spread by a few hundred milliseconds, which at 200
    # calls/s over a 2-s window is a tenth or more (57 of 400 seen in CI). A worker's calls missed, or counted
    # twice, would be half.
    assert row.client_requests and row.server_requests
    assert abs(row.server_requests - row.client_requests) <= max(5, 0.2 * row.client_requests), row
    log = next((tmp_path / "run" / "logs").glob("*locust.log")).read_text()
    assert log.count("xfer-metrics role=worker") == 2, log


HTTP = f"""
[[servers]]
server = "command"
label = "http"
command = ["{sys.executable}", "-m", "http.server", "--bind", "127.0.0.1", "--directory", "{{dir}}", "{{port}}"]
ready = {{ port = "{{port}}" }}
"""


def _locust_totals(prefix: Path) -> tuple[int, int]:
    """Locust's request count of the whole run: from the totals written when it quit, and from its CSV (rewritten
    once a second, not at the end: at most as many)."""
    final = json.loads(Path(f"{prefix}_final.json").read_text())
    with open(f"{prefix}_stats.csv") as f:
        csv_total = next(int(r["Request Count"]) for r in csv.DictReader(f) if r["Name"] == "Aggregated")
    return int(final["requests"]), csv_total


def test_a_users_own_locustfile_runs_under_the_runner(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("hello\n")
    (tmp_path / "users").mkdir()
    shutil.copy(LOCUSTFILE, tmp_path / "users" / "pages.py")
    load = 'locustfile = "users/pages.py"\n'  # relative to the experiment file
    row = _sweep(tmp_path, _head("own", load, warmup_s=0) + HTTP.replace("{dir}", str(site)))
    assert row.ok, (row.error, row.stderr_tail)
    assert row.client_requests and row.client_requests > 0 and not row.client_failures
    assert row.client_p50_s and row.client_p95_s and row.client_p95_s >= row.client_p50_s
    assert row.client_methods is not None and set(row.client_methods) == {"/"}
    assert row.server_cpu_per_op_s and row.server_cpu_per_op_s > 0
    # http.server has no SIGTERM handler: ended by the runner's signal (-15), which is no warning for a user's server.
    assert not any("exited with status" in w for w in row.warnings), row.warnings
    # Locust's own statistics of the whole run (no warm-up here) and the server's log agree with the row, but
    # for the calls made before the first scrape or after the last, and those the stop cuts in flight.
    total, csv_total = _locust_totals(next((tmp_path / "run" / "logs").glob("*.locust.log")).with_suffix(""))
    assert csv_total <= total
    assert row.locust_stats and row.locust_stats["requests"] == total and row.locust_stats["failures"] == 0
    assert row.locust_stats["p95_s"] and row.locust_stats["p95_s"] > 0
    served = sum(
        '"GET / HTTP/1.1" 200' in line
        for p in (tmp_path / "run" / "logs").glob("*")
        if "locust" not in p.name
        for line in p.read_text(errors="replace").splitlines()
    )
    # The server logs a call when it answers; Locust counts it when the answer arrives. Quitting cuts at most one
    # call in flight per user (2), answered but never counted.
    assert 0 <= served - total <= 2, (total, served)
    assert abs(total - row.client_requests) <= max(10, 0.1 * total), (row.client_requests, total)


def test_a_users_own_locustfile_over_two_processes(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("hello\n")
    load = f'locustfile = "{LOCUSTFILE}"\nprocesses = 2\n'
    row = _sweep(tmp_path, _head("own2", load, warmup_s=0, users=4) + HTTP.replace("{dir}", str(site)))
    assert row.ok, (row.error, row.stderr_tail)
    assert row.client_users == 4  # both workers' users, not the master's count of them again
    assert row.client_requests and not row.client_failures and row.locust_stats
    # The users offer 4 x 50 a second: one worker's calls alone would be at most half of it, the master's on top
    # twice. A busy generator CPU (three Locust processes on it) may fall behind the offer, never ahead of it.
    assert row.client_qps and 0.6 * 200 <= row.client_qps <= 1.1 * 200, row.client_qps
    # The master's statistics are its workers' reports, every few seconds: at the stop the last is missing,
    # so they are only checked to be there.
    assert row.locust_stats["requests"] and row.locust_stats["p95_s"]
    log = next((tmp_path / "run" / "logs").glob("*locust.log")).read_text()
    assert "Traceback" not in log, log


def _parse(text: str, tmp_path: Path) -> xe.Experiment:
    path = tmp_path / "exp.toml"
    path.write_text(text)
    return xe.load_file(path)


@pytest.mark.parametrize(
    ("load", "said"),
    [
        ('call = "xfer.v1.FileTransfer/Echo"\ntransport = "frame"\n', 'needs transport = "grpc"'),
        ('call = "xfer.v1.FileTransfer/Echo"\ndata = "@missing.json"\n', "cannot read"),
        ('call = "Echo"\n', "want SERVICE/METHOD"),
        ('locustfile = "nowhere.py"\n', "load.locustfile ="),
        (f'locustfile = "{LOCUSTFILE}"\nrate = "100"\n', "drop load.rate"),
        # mode = "open" alone: told to drop the mode, not first to add a rate it would then be told to drop
        (f'locustfile = "{LOCUSTFILE}"\nmode = "open"\n', "drop load.rate / load.mode"),
        ('data = "{}"\n', "belongs to load.call"),
        (MIX_CALL, "load.data (not set): --xfer-data (none): a mix of --xfer-call methods wants a JSON object keyed"),
        (MIX_CALL + """data = '{"xfer.v1.FileTransfer/Echo": {}}'\n""", "no request for xfer.v1.FileTransfer/Meta"),
        (
            MIX_CALL + """data = '{"xfer.v1.FileTransfer/Echo": {}, "xfer.v1.FileTransfer/Meta": {}, "x.Y/Z": {}}'\n""",
            'load.data = \'{"xfer.v1.FileTransfer/Echo": {}, "xfer.v1.FileTransfer/Meta": {}, "x.Y/Z": {}}\': '
            "--xfer-data: key 'x.Y/Z' is not a method of the --xfer-call mix",
        ),
        ('call = "xfer.v1.FileTransfer/Echo:3,xfer.v1.FileTransfer/Meta:0"\n', "weight '0' of"),
    ],
)
def test_what_cannot_run_is_refused_when_read(tmp_path: Path, load: str, said: str) -> None:
    with pytest.raises(xe.ExperimentError) as e:
        _parse(_head("bad", load) + GO, tmp_path)
    msg = str(e.value)
    assert said in msg and "\n" not in msg, msg


def test_a_bad_key_exits_as_other_config_errors(tmp_path: Path) -> None:
    (tmp_path / "exp.toml").write_text(_head("bad", 'locustfile = "nowhere.py"\n') + GO)
    proc = subprocess.run(
        [sys.executable, "-m", "xferbench", "run", str(tmp_path / "exp.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = "".join(proc.stderr.split())  # the console wraps long lines, even inside a word
    assert "load.locustfile=" in said and "nowhere.py':nosuchfile" in said, proc.stderr
