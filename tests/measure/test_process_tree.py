"""A server measured whole (xferbench/measure/cgroup.py, tree.py): a forking server, a shell wrapper without
`exec` that starts two CPU-burning children beside a gRPC Echo server, run as a command with real processes.

Its CPU must be the whole tree's by the cgroup's clock (the shell alone uses none), its memory and processes
summed, its allocator preload checked in every process; the cgroup must be gone after a stop, a crash and
Ctrl-C, and nothing it started left running; without a cgroup (XFERBENCH_CGROUP=off) the /proc tree stands
in, and the report says which clock it had. Each run is 1 s of warm-up and 2 s measured."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support.runs import experiment_file, processes_mentioning
from xferbench.analysis.row import RunRow
from xferbench.analysis.summary import load as load_summary
from xferbench.measure import cgroup
from xferbench.report import tables
from xferbench.run import sweep

ROOT = Path(__file__).resolve().parents[2]
ECHO_SERVER = ROOT / "tests" / "support" / "echo_grpc.py"
# Bounded: a burner stops by itself after two minutes even if nothing kills it.
BURN = "import time; end = time.monotonic() + 120; any(iter(lambda: time.monotonic() >= end, True))"


def _experiment(token: str, script: str, *, duration_s: int = 2, extra: str = "") -> str:
    """One run of a forking command server: `script` is the shell's, with $PY, $BURN and $ECHO set, the port as
    $1 and the token as $0 (every process it starts is given it, so that the test finds any left behind)."""
    return f"""
[experiment]
name = "tree"
repeats = 1
duet = false
warmup_s = 1
[load]
users = 2
spawn_rate = 2
duration_s = {duration_s}
mix = "echo:1"
rate = "100"
transport = "grpc"
[[servers]]
server = "command"
label = "forking"
command = ["/bin/sh", "-c", '{script}', "{token}", "{{port}}"]
ready = {{ log = "^serving on [0-9]+$" }}
{extra}
[servers.env]
PYTHONPATH = "{ROOT}"
PY = "{sys.executable}"
BURN = "{BURN}"
ECHO = "{ECHO_SERVER}"
"""


# No exec: the shell stays the leader, and the server and both burners are its children.
FORKING = '"$PY" -c "$BURN" "$0" & "$PY" -c "$BURN" "$0" & "$PY" "$ECHO" "$1" "$0" & wait'


def _token() -> str:
    return f"tree-{uuid.uuid4().hex[:8]}"


def _mine() -> list[Path]:
    """This process's server cgroups still on the machine."""
    return sorted(Path("/sys/fs/cgroup/cpuacct").glob(f"{cgroup.PREFIX}{os.getpid()}-*"))


def _run(tmp_path: Path, text: str) -> RunRow:
    exp = experiment_file(tmp_path / "exp.toml", text)
    result = sweep.sweep(exp, tmp_path / "run")
    assert len(result.rows) == 1
    return result.rows[0]


def test_a_forking_server_is_counted_whole_by_its_cgroup(tmp_path: Path) -> None:
    token = _token()
    row = _run(tmp_path, _experiment(token, FORKING, extra='alloc = "jemalloc"'))
    assert row.ok, (row.error, row.stderr_tail)
    assert row.cpu_clock and row.cpu_clock.startswith("cgroup"), row.cpu_clock
    # Two burners on the server's CPU: the leader, a shell waiting, uses none of it; the tree about a core.
    assert row.server_cpu_cores is not None and row.server_cpu_cores > 0.5, row.server_cpu_cores
    assert row.procs_peak is not None and row.procs_peak >= 4, row.procs_peak  # sh, 2 burners, the server
    assert row.rss_peak_bytes is not None and row.rss_peak_bytes > 3 * (4 << 20), row.rss_peak_bytes
    assert row.server_cpu_per_request_s and row.cpu_requests_from == "client"
    # The preload checked in every process, the burners and the server among them.
    assert row.ready is not None and int(row.ready["procs_checked"]) >= 4, row.ready
    assert Path(row.ready["alloc_lib"]).name.startswith("libjemalloc.so"), row.ready
    assert _mine() == [] and processes_mentioning(token) == []
    # The per-second series carry the tree's CPU and RSS too: this server exports no /metrics of its own.
    assert row.timeseries is not None
    with open(tmp_path / "run" / row.timeseries, newline="") as f:
        per_s = [r for r in csv.DictReader(f) if r["server_cpu_cores"]]
    assert per_s and max(float(r["server_cpu_cores"]) for r in per_s) > 0.5, per_s
    assert all(int(r["rss_bytes"]) > 3 * (4 << 20) for r in per_s), per_s
    s = load_summary(tmp_path / "run")
    assert "cgroup v1 cpuacct.usage" in (tables.cost_text(s) or ""), tables.cost_text(s)


def test_a_worker_without_the_preload_fails_the_run_naming_it(tmp_path: Path) -> None:
    token = _token()
    script = '"$PY" "$ECHO" "$1" "$0" & env -u LD_PRELOAD "$PY" -c "$BURN" "$0" & wait'
    row = _run(tmp_path, _experiment(token, script, extra='alloc = "jemalloc"'))
    assert not row.ok and row.error and "is not mapped in /proc/" in row.error, row.error
    assert _mine() == [] and processes_mentioning(token) == []


def test_a_crash_of_the_leader_fails_the_run_and_removes_the_group_with_its_children(tmp_path: Path) -> None:
    token = _token()
    # The leader exits mid-run; the burner and the server it started would live on as orphans.
    script = '"$PY" -c "$BURN" "$0" & "$PY" "$ECHO" "$1" "$0" & sleep 2; exit 3'
    row = _run(tmp_path, _experiment(token, script, duration_s=20))
    assert not row.ok and row.error and "exited with status 3" in row.error, row.error
    assert _mine() == [] and processes_mentioning(token) == []


def test_without_a_cgroup_the_proc_tree_stands_in_and_the_report_says_so(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XFERBENCH_CGROUP", "off")
    token = _token()
    row = _run(tmp_path, _experiment(token, FORKING))
    assert row.ok, (row.error, row.stderr_tail)
    assert row.cpu_clock and row.cpu_clock.startswith("/proc process tree"), row.cpu_clock
    assert row.server_cpu_cores is not None and row.server_cpu_cores > 0.5, row.server_cpu_cores
    assert row.procs_peak is not None and row.procs_peak >= 4
    assert _mine() == [] and processes_mentioning(token) == []
    assert "/proc process tree" in (tables.cost_text(load_summary(tmp_path / "run")) or "")


def test_ctrl_c_removes_the_group_and_everything_in_it(tmp_path: Path) -> None:
    token = _token()
    (tmp_path / "exp.toml").write_text(_experiment(token, FORKING, duration_s=60))
    runner = subprocess.Popen([sys.executable, "-m", "xferbench", "run", str(tmp_path / "exp.toml"), "--out",
                               str(tmp_path / "run")], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        groups = Path("/sys/fs/cgroup/cpuacct").glob
        deadline = time.monotonic() + 60
        mine: list[Path] = []
        while time.monotonic() < deadline and runner.poll() is None:
            mine = list(groups(f"{cgroup.PREFIX}{runner.pid}-*"))
            if mine and len((mine[0] / "cgroup.procs").read_text().split()) >= 4:
                break
            time.sleep(0.05)  # a poll of the group's members, not a wait for them
        assert mine, "the runner's server never had its cgroup"
        runner.send_signal(signal.SIGINT)
        assert runner.wait(timeout=60) == 130, runner.stderr.read() if runner.stderr else ""
        assert not mine[0].exists()
        assert list(groups(f"{cgroup.PREFIX}{runner.pid}-*")) == [] and processes_mentioning(token) == []
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()


def test_the_groups_of_a_runner_that_died_are_swept_with_what_was_left_in_them() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a runner pid that names no process now
    d = Path("/sys/fs/cgroup/cpuacct") / f"{cgroup.PREFIX}{gone.pid}-1-orphan"
    d.mkdir()
    left = subprocess.Popen(["sleep", "120"], preexec_fn=lambda: (d / "cgroup.procs").write_text(str(os.getpid())))
    try:
        assert (d / "cgroup.procs").read_text().split() == [str(left.pid)]
        assert d in cgroup.sweep_orphans()
        assert not d.exists() and left.wait(timeout=10) == -signal.SIGKILL
    finally:
        if left.poll() is None:
            left.kill()
        if d.exists():
            d.rmdir()
