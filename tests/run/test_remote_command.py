"""A command server on another host (`server = "command"` with `[[servers]] host`, xferbench/run/remoteserver.py),
against a lab of real sshds on this machine (scripts/lab.sh), real xferd-c run as a command and real Locust:

- a --quick run of two groups on lab host 1: one ready by its log line with the load here, one ready by its port
  (a connection from here to host 1's address) with jemalloc preloaded and the load's worker on host 2: every row
  is served, scraped at `{addr}` (server QPS), measured from host 1's /proc (CPU a value or a bound, RSS > 0), the
  preload found in its maps there, the placement recorded, and nothing left on any host;
- the host check refuses a program the host lacks (by path, and by name on its PATH) and a Go program given an
  allocator (read there), each in one line naming the host, the cell and the path;
- a program that drops the preload before it runs (`env -u LD_PRELOAD`) fails its start naming the allocator;
- a Go command's GOGC is read back from the host's /proc/PID/environ (`go_env`), and a wrapper that drops it fails
  the start naming the process; a process forked after ready without the preload fails the cell at the next tick.

The module has one lab of its own, rc<worker>a on 10.83.<100 + worker>, brought up once and always torn down.
Needs root with the capabilities of network namespaces; the servers must be built (`make build`)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.lab import Lab, app_and_gen, experiment, two_hosts_up
from tests.support.runs import ROOT, xferbench_run
from xferbench import config as xe
from xferbench.run import hostcheck, remoteserver
from xferbench.run.live import CellFailed
from xferbench.run.process import ServerStartError

BIN = ROOT / "build" / "bin"
XFERD_C = BIN / "xferd-c"

# Whole runs across lab hosts: in make test-slow, as tests/run/test_remote_server.py.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with two_hosts_up("rc", 83, tmp_path_factory) as lab:
        yield lab


LOAD = 'users = 2\nrate = "20"\nmix = "upload:1,download:1,echo:2"\nsizes = "64KiB"\nchunk = "16KiB"\n' \
       'transport = "frame"\n'


def command(label: str, ready: str, extra: str = "", program: str = str(XFERD_C), args: str = "") -> str:
    return (f'server = "command"\nhost = "app"\nlabel = "{label}"\n'
            f'command = ["{program}", {args}"--frame-addr={{addr}}:{{port}}", "--metrics-addr={{addr}}:{{metrics_port}}"]\n'
            f'ready = {ready}\nmetrics = "http://{{addr}}:{{metrics_port}}/metrics"\n{extra}')


# xferd-c is told the allocator the runner preloads (tests/run/test_command_server.py's C_JEMALLOC says why).
JEMALLOC = 'alloc = "jemalloc"\n[servers.env]\nXFERD_C_PRELOADED = "jemalloc"\n[servers.load]\nhosts = ["gen"]\n'
BY_LOG = command("log", '{ log = "^xferd-c ready " }')
BY_PORT = command("port", '{ port = "{port}" }', JEMALLOC, args='"--alloc", "jemalloc", ')


def rows(run_dir: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run_dir / "runs.jsonl").read_text().splitlines()]


def test_a_quick_run_of_a_command_on_a_lab_host(lab: Lab, tmp_path: Path) -> None:
    path = experiment(lab, tmp_path, app_and_gen(lab), LOAD, BY_LOG + "\n[[servers]]\n" + BY_PORT)
    out = tmp_path / "run"
    r = xferbench_run(str(path), "--out", str(out), timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    got = {str(row["cell"]).split("/")[0]: row for row in rows(out)}
    assert set(got) == {"log", "port"} and all(row["status"] == "ok" for row in got.values()), got
    for row in got.values():
        ready = row["ready"]
        assert isinstance(ready, dict) and ready["host"] == "app" and ready["addr"] == lab.addr(1), ready
        assert ready["frame"].startswith(f"{lab.addr(1)}:"), ready
        assert ready["metrics_url"].startswith(f"http://{lab.addr(1)}:"), ready
        assert row["client_qps"] > 0 and row["server_qps"] > 0, row  # type: ignore[operator]
        cpu = row["server_cpu_cores"] or (row["bounds"] or {}).get("server_cpu_cores")  # type: ignore[attr-defined]
        assert cpu > 0 and row["rss_mean_bytes"] > 0, row  # type: ignore[operator]
        assert row["cpu_clock"] == f"the remote /proc process tree on app ({lab.host(1)}) (10 ms ticks; live " \
                                   "processes and the children they reaped)", row["cpu_clock"]
    port_ready = got["port"]["ready"]
    assert isinstance(port_ready, dict) and str(port_ready["alloc_lib"]).endswith("libjemalloc.so.2"), port_ready
    assert (got["port"]["build_info"] or {}).get("allocator") == "jemalloc"  # type: ignore[attr-defined]
    assert got["port"].get("load_hosts") and not got["log"].get("load_hosts"), got  # a worker on gen; the other here
    meta = json.loads((out / "experiment.json").read_text())
    roles = {h["name"]: h["roles"] for h in meta["placement"]["hosts"]}
    assert roles == {"app": ["server"], "gen": ["load"]}, roles
    assert f"- **Placement**: servers on app ({lab.addr(1)}: " in (out / "summary.md").read_text()
    lab.wait_nothing_left(20)


@pytest.mark.parametrize(("program", "extra", "said"), [
    ("/opt/no-such-dir/xferd-c", "", "servers (cell 'missing/frame'): command[0] = '/opt/no-such-dir/xferd-c' does "
                                     "not exist there"),
    ("no-such-xferd-c", "", "servers (cell 'missing/frame'): command[0] = 'no-such-xferd-c' not found on its PATH"),
    (str(BIN / "xferd-go"), 'alloc = "jemalloc"\n',
     f"servers (cell 'missing/frame').alloc: {BIN / 'xferd-go'} is a Go program: Go's runtime allocates its own heap"),
])
def test_the_host_check_refuses_a_program_the_host_lacks_or_cannot_preload(program: str, extra: str, said: str,
                                                                            lab: Lab, tmp_path: Path) -> None:
    entry = command("missing", '{ port = "{port}" }', extra, program)
    exp = xe.load_file(experiment(lab, tmp_path, app_and_gen(lab), 'transport = "frame"\n', entry))
    with pytest.raises(hostcheck.HostCheckError) as e:
        hostcheck.check(exp)
    assert str(e.value).startswith(f"app ({lab.host(1)}): {said}"), e.value
    lab.wait_nothing_left(20)


def test_a_program_that_drops_the_preload_fails_its_start_naming_it(lab: Lab, tmp_path: Path) -> None:
    """`env -u LD_PRELOAD` maps jemalloc (it is preloaded into it), then runs xferd-c without: the process the
    server is once ready does not map it."""
    entry = command("dropped", '{ port = "{port}" }', 'alloc = "jemalloc"\n', "/usr/bin/env",
                    f'"-u", "LD_PRELOAD", "{XFERD_C}", ')
    exp = xe.load_file(experiment(lab, tmp_path, app_and_gen(lab), 'transport = "frame"\n', entry))
    placement = hostcheck.check(exp)
    address = next(h.address for h in placement.hosts if h.name == "app")
    assert address == lab.addr(1)
    with pytest.raises(ServerStartError) as e:
        remoteserver.start(exp.cells[0], exp.hosts["app"], address, tmp_path / "server.log")
    assert f"app ({lab.host(1)}): alloc = 'jemalloc': libjemalloc.so.2 is not mapped by the server" in str(e.value), \
        e.value
    lab.wait_nothing_left(20)


def _go_on_app(lab: Lab, tmp_path: Path, wrapper: str = "") -> remoteserver.RemoteServer:
    """xferd-go as a command on app with gogc = 200 (GOGC in its environment), through `wrapper`'s arguments to
    /usr/bin/env when given."""
    go = BIN / "xferd-go"
    program, args = ("/usr/bin/env", f'{wrapper}"{go}", "--grpc-addr={{addr}}:0", ') if wrapper else \
        (str(go), '"--grpc-addr={addr}:0", ')
    entry = command("go", '{ port = "{port}" }', "gogc = 200\n", program, args)
    exp = xe.load_file(experiment(lab, tmp_path, app_and_gen(lab), 'transport = "frame"\n', entry))
    if not wrapper:  # the host check refuses GOGC for a program that is not Go's, as env is: started past it
        assert next(h.address for h in hostcheck.check(exp).hosts if h.name == "app") == lab.addr(1)
    return remoteserver.start(exp.cells[0], exp.hosts["app"], lab.addr(1), tmp_path / "server.log")


def test_a_commands_go_settings_are_read_back_on_its_host(lab: Lab, tmp_path: Path) -> None:
    """GOGC read from the host's /proc/PID/environ of every process once ready; a wrapper that drops it (`env -u
    GOGC`) fails the start naming the process and what it found."""
    server = _go_on_app(lab, tmp_path)
    try:
        assert server.ready["go_env"] == "GOGC=200" and int(server.ready["procs_checked"]) >= 1, server.ready
    finally:
        server.stop()
    with pytest.raises(ServerStartError) as e:
        _go_on_app(lab, tmp_path, wrapper='"-u", "GOGC", ')
    said = str(e.value)
    assert said.startswith(f"app ({lab.host(1)}): process ") and "does not have the Go settings it was started " \
        "with: GOGC=None in /proc/" in said and "GOGC='200' expected" in said, said
    lab.wait_nothing_left(20)


def test_a_process_forked_after_ready_without_the_preload_fails_the_cell(lab: Lab, tmp_path: Path) -> None:
    """A shell that starts xferd-c (ready by its port, jemalloc mapped) and, a moment later, a child run without
    the preload: the tick after it appears names it (as nginx's workers are checked here)."""
    script = (f'{XFERD_C} --alloc jemalloc --frame-addr={{addr}}:{{port}} --metrics-addr={{addr}}:{{metrics_port}} & '
              'sleep 1; env -u LD_PRELOAD sleep 60 & wait')
    entry = (f'server = "command"\nhost = "app"\nlabel = "late"\ncommand = ["/bin/sh", "-c", "{script}"]\n'
             'ready = { port = "{port}" }\nalloc = "jemalloc"\n[servers.env]\nXFERD_C_PRELOADED = "jemalloc"\n')
    exp = xe.load_file(experiment(lab, tmp_path, app_and_gen(lab), 'transport = "frame"\n', entry))
    server = remoteserver.start(exp.cells[0], exp.hosts["app"], lab.addr(1), tmp_path / "server.log")
    try:
        deadline = time.monotonic() + 20
        with pytest.raises(CellFailed) as e:
            while time.monotonic() < deadline:  # the runner's ticks: the tree read, then the check
                remoteserver.read_tree(server)
                server.sample()
                time.sleep(0.2)
        assert "alloc = 'jemalloc': libjemalloc.so.2 is not mapped by the server (its process " in str(e.value), \
            e.value
    finally:
        server.stop()
    lab.wait_nothing_left(20)
