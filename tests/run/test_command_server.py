"""`server = "command"` (xferbench/config/command.py, xferbench/run/commandserver.py): any executable measured as a host
process, with real processes and sockets. xferd-go run as a command; a 20-line Python gRPC server that
exports nothing; allocator preloads checked in /proc/PID/maps; refusals at config time; a ready timeout that
names its condition and shows the log's tail. Each run is 1 s of warm-up and 2 s measured."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.runs import experiment_file
from xferbench import config as xe
from xferbench.analysis.row import RunRow
from xferbench.config.command import Command
from xferbench.run import commandserver, sweep

ROOT = Path(__file__).resolve().parents[2]
ECHO_SERVER = ROOT / "tests" / "support" / "echo_grpc.py"
BIN = ROOT / "build" / "bin"  # absolute: a relative command[0] starts at the experiment file's folder (tmp_path)


def _head(name: str, transport: str, warmup_s: int = 1) -> str:
    return (
        f'[experiment]\nname = "{name}"\nrepeats = 1\nduet = false\nwarmup_s = {warmup_s}\n'
        f'[load]\nusers = 2\nspawn_rate = 2\nduration_s = 2\nmix = "echo:1"\nrate = "200"\n'
        f'transport = "{transport}"\n'
    )


def _sweep(tmp_path: Path, text: str) -> tuple[xe.Experiment, RunRow]:
    exp = experiment_file(tmp_path / "exp.toml", text)
    result = sweep.sweep(exp, tmp_path / "run")
    assert len(result.rows) == 1
    return exp, result.rows[0]


GO = """
[[servers]]
server = "command"
label = "go"
command = ["BIN/xferd-go", "--grpc-addr", "127.0.0.1:{port}", "--frame-addr", "127.0.0.1:0",
           "--metrics-addr", "127.0.0.1:{metrics_port}"]
ready = { port = "{port}" }
metrics = "http://127.0.0.1:{metrics_port}/metrics"
gogc = 200
""".replace("BIN", str(BIN))


def test_xferd_go_as_a_command_gets_proc_and_its_own_figures(tmp_path: Path) -> None:
    _, row = _sweep(tmp_path, _head("cmd-go", "grpc") + GO)
    assert row.ok, (row.error, row.stderr_tail)
    assert row.cell == "go/grpc" and row.server == "command"
    assert row.server_cpu_per_op_s is not None and row.server_cpu_per_op_s > 0
    assert row.rss_peak_bytes and row.rss_peak_bytes > 1 << 20
    assert row.proc_threads_peak and row.proc_fds_peak and row.proc_ctx_switches_per_s is not None
    # Its /metrics scraped like ours: the server's count of the window agrees with the client's. The two are
    # read one after the other at each end of the window, up to tens of milliseconds apart on a busy machine
    # (two test workers): at 200 calls/s a tenth either way; a call counted twice, or not at all, is half.
    assert row.client_requests and row.server_requests
    assert abs(row.server_requests - row.client_requests) <= max(5, 0.1 * row.client_requests), row
    # The Go runtime's series give the GC figures as for xferd-go.
    assert row.gc_pauses is not None and row.heap_inuse_mean_bytes and row.gc_pause_total_s is not None
    assert row.ready and row.ready["grpc"].startswith("127.0.0.1:") and "metrics_port=" in row.ready["ports"]
    assert row.config["command"]["argv"][0].endswith("build/bin/xferd-go")
    # Its Go setting read back from /proc/PID/environ of every process it runs, and recorded.
    assert row.ready["go_env"] == "GOGC=200" and row.ready["procs_checked"] == "1", row.ready
    # Its own process_cpu_seconds_total agrees with its cgroup's clock (a one-process server).
    assert row.cpu_clock and row.cpu_clock.startswith("cgroup") and row.cpu_requests_from == "server"
    assert row.cpu_selfreport_ratio is not None and 0.7 < row.cpu_selfreport_ratio < 1.3, row.cpu_selfreport_ratio


def test_a_twenty_line_server_of_our_own_gets_proc_figures(tmp_path: Path) -> None:
    entry = f"""
[[servers]]
server = "command"
label = "pyecho"
command = ["{sys.executable}", "{ECHO_SERVER}", "{{port}}"]
ready = {{ log = "^serving on [0-9]+$" }}
[servers.env]
PYTHONPATH = "{ROOT}"
"""
    _, row = _sweep(tmp_path, _head("cmd-py", "grpc") + entry)
    assert row.ok, (row.error, row.stderr_tail)
    assert row.client_qps and row.client_qps > 100 and not row.client_failures
    assert row.server_cpu_per_op_s and row.server_cpu_per_op_s > 0
    assert row.rss_peak_bytes and row.proc_fds_peak and row.proc_threads_peak
    assert row.server_qps is None  # it exports nothing: no server series, and no failure for it
    assert not any("exited with status" in w for w in row.warnings), row.warnings


# xferd-c refuses to run under an allocator it was not asked for, so it is told (--alloc), and told that the
# library is already preloaded (its re-execution marker): the jemalloc it finds is the runner's LD_PRELOAD.
C_JEMALLOC = """
[[servers]]
server = "command"
label = "c"
command = ["BIN/xferd-c", "--frame-addr", "127.0.0.1:{port}", "--metrics-addr", "127.0.0.1:{metrics_port}",
           "--alloc", "jemalloc"]
metrics = "http://127.0.0.1:{metrics_port}/metrics"
alloc = "jemalloc"
env = { XFERD_C_PRELOADED = "jemalloc" }
""".replace("BIN", str(BIN))


def test_a_preload_is_checked_in_the_maps_and_recorded(tmp_path: Path) -> None:
    exp, row = _sweep(tmp_path, _head("cmd-c", "frame") + C_JEMALLOC)
    assert row.ok, (row.error, row.stderr_tail)
    line = json.loads((tmp_path / "run" / "runs.jsonl").read_text().splitlines()[0])
    lib = line["ready"]["alloc_lib"]
    assert lib.endswith("libjemalloc.so.2") and Path(lib).exists()
    assert (row.build_info or {}).get("allocator") == "jemalloc"  # xferd-c's own detection agrees
    # And independently of the runner: the library is in the live process's maps.
    server = commandserver.start(exp.cells[0], None, None)
    try:
        maps = Path(f"/proc/{server.proc.pid}/maps").read_text()
        assert server.ready["alloc_lib"] in maps
    finally:
        assert server.stop() == 0


def _parse(entry: str) -> xe.Experiment:
    return xe.parse(tomllib.loads(_head("t", "frame") + entry), "t.toml", "t")


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        (GO.replace("gogc = 200", 'alloc = "jemalloc"'), "is a Go program"),
        (C_JEMALLOC.replace('alloc = "jemalloc"', "gogc = 100"), "is not a Go program"),
        (C_JEMALLOC.replace('alloc = "jemalloc"', 'gomemlimit = "1GiB"'), "GOMEMLIMIT would do nothing"),
        (C_JEMALLOC.replace('alloc = "jemalloc"', 'alloc = "pool"'), "servers[0].alloc = 'pool'"),
        (C_JEMALLOC.replace("{port}", "7071"), "needs a {port} placeholder"),
        (C_JEMALLOC + 'image = "x"\n', "servers[0].alloc: not for a command server in a container"),
    ],
)
def test_what_cannot_run_as_written_is_refused_at_config_time(entry: str, said: str) -> None:
    with pytest.raises(xe.ExperimentError) as e:
        _parse(entry)
    assert said in str(e.value)


def test_an_alloc_axis_and_go_settings_become_cells_and_environment() -> None:
    exp = _parse(C_JEMALLOC.replace('alloc = "jemalloc"', 'alloc = ["glibc", "jemalloc"]'))
    assert [c.name for c in exp.cells] == ["c/frame/alloc=glibc", "c/frame/alloc=jemalloc"]
    go = xe.parse(tomllib.loads(_head("t", "grpc") + GO), "t.toml", "t").cells[0]
    assert go.flags == {"gogc": "200"} and isinstance(go.kind, Command)
    assert go.kind.ports == ("port", "metrics_port")


def test_a_ready_timeout_names_its_condition_and_shows_the_log_tail(tmp_path: Path) -> None:
    entry = f"""
[[servers]]
server = "command"
label = "never"
command = ["{sys.executable}", "-c", "import signal; print('warming the caches', flush=True); signal.pause()",
           "{{port}}"]
ready = {{ port = "{{port}}", timeout = "1s" }}
"""
    _, row = _sweep(tmp_path, _head("cmd-never", "grpc") + entry)
    assert row.status == "failed"
    assert row.error and "not ready within 1s" in row.error and "ready.port" in row.error
    assert "warming the caches" in row.error  # the log's last lines, in the message itself
    assert row.stderr_tail == ["warming the caches"]


def test_ready_by_http_waits_for_a_2xx() -> None:
    entry = GO.replace('ready = { port = "{port}" }', 'ready = { http = "http://127.0.0.1:{metrics_port}/metrics" }')
    cell = xe.parse(tomllib.loads(_head("t", "grpc") + entry), "t.toml", "t").cells[0]
    server = commandserver.start(cell, None, None)
    try:
        assert "ready.http" in server.ready_line and "status 200" in server.ready_line
        assert server.addr("metrics") == server.ready["metrics"]
    finally:
        assert server.stop() == 0


def test_a_static_program_is_refused_an_allocator(tmp_path: Path) -> None:
    """A program with no PT_INTERP: no loader runs, so nothing reads LD_PRELOAD (built here, static, by gcc)."""
    (tmp_path / "s.c").write_text("int main(void) { return 0; }\n")
    subprocess.run(["gcc", "-static", "-o", str(tmp_path / "s"), str(tmp_path / "s.c")], check=True, timeout=60)
    entry = f'[[servers]]\nserver = "command"\ncommand = ["{tmp_path / "s"}", "{{port}}"]\nalloc = "mimalloc"\n'
    with pytest.raises(xe.ExperimentError, match="is statically linked: LD_PRELOAD cannot replace its malloc"):
        _parse(entry)


def test_a_process_without_its_go_settings_is_named_with_what_it_has() -> None:
    """The one message of both checks, here and on another host (xferbench/run/remoteserver.py)."""
    go = {"GOGC": "200", "GOMEMLIMIT": "64MiB"}
    assert commandserver.go_env_error(7, "", {"GOGC": "200", "GOMEMLIMIT": "64MiB"}, go) is None
    said = commandserver.go_env_error(7, "(/usr/bin/etcd) ", {"GOGC": "200", "GOMEMLIMIT": None}, go, " on app")
    assert said == ("process 7 (/usr/bin/etcd) of the server does not have the Go settings it was started with: "
                    "GOMEMLIMIT=None in /proc/7/environ on app, GOMEMLIMIT='64MiB' expected (did a wrapper clear its "
                    "environment?)"), said
