"""A server on another host (`[[servers]] host`, xferbench/run/remoteserver.py), against a lab of real sshds on this
machine (scripts/lab.sh), real xferd-c and real Locust workers:

- a --quick run of xferd-c on lab host 1, glibc against jemalloc, with Locust's workers on host 2: every row is
  served (QPS > 0), its server figures come from host 1's /proc as the watch read it there (CPU and RSS, and the
  row's cpu_clock says so), jemalloc is mapped by the server there, and the Placement line names host 1;
- the server killed mid-run (kill -9 in host 1's namespace) fails that cell with a reason naming the host, the
  other cell runs, and nothing of the run is left on any host;
- a binary the host does not have (its folder hidden there under a tmpfs, with another file of the same name) is
  copied to a folder of the start's own, its checksum checked, run from there, and removed when the server stops.

The module has one lab of its own, rs<worker>a on 10.79.<100 + worker>, brought up once and always torn down.
Needs root with the capabilities of network namespaces; the servers must be built (`make build`)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.lab import Lab, app_and_gen, experiment, two_hosts_up
from tests.support.runs import ROOT, xferbench_run
from xferbench import config as xe
from xferbench.run import hostcheck, remoteserver

MARKER = "xferbench-server-"  # in the command line of every server watch, and the environment of every server
XFERD_C = ROOT / "build" / "bin" / "xferd-c"


# Whole runs across lab hosts, each pinned to a CPU the other test worker's servers share: in make test-slow, so
# that make test keeps its budget and its rate checks their CPUs.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with two_hosts_up("rs", 79, tmp_path_factory) as lab:
        yield lab

LOAD = 'hosts = ["gen"]\nprocesses = 1\nusers = 2\nrate = "20"\nmix = "upload:1,download:1,echo:2"\n' \
       'sizes = "1MiB"\nchunk = "256KiB"\ntransport = "frame"\n'


def c_on_app(binary: str | None = None) -> str:
    return ('server = "xferd-c"\nhost = "app"\n' + (f'binary = "{binary}"\n' if binary else "")
            + '[servers.flags]\nalloc = ["glibc", "jemalloc"]\n')


def rows(run_dir: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run_dir / "runs.jsonl").read_text().splitlines()]


def ssh(lab: Lab, i: int, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ssh", "-F", str(lab.dir / "ssh_config"), lab.host(i), command], capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL)



def test_a_quick_run_with_the_server_on_a_lab_host(lab: Lab, tmp_path: Path) -> None:
    path = experiment(lab, tmp_path, app_and_gen(lab), LOAD, c_on_app())
    text = path.read_text().replace("repeats = 1", "repeats = 2")
    path.write_text(text)
    out = tmp_path / "run"
    r = xferbench_run(str(path), "--out", str(out), timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    got = rows(out)
    assert len(got) == 4 and all(row["status"] == "ok" for row in got), got
    for row in got:
        ready = row["ready"]
        assert isinstance(ready, dict) and ready["host"] == "app", ready
        assert ready["frame"].startswith(f"{lab.addr(1)}:") and ready["metrics"].startswith(f"{lab.addr(1)}:"), ready
        assert row["client_qps"] > 0 and row["server_qps"] > 0, row  # type: ignore[operator]
        # This light load may use under two ticks of the remote /proc clock: then the CPU is a bound, never 0.
        cpu = row["server_cpu_cores"] or (row["bounds"] or {}).get("server_cpu_cores")  # type: ignore[attr-defined]
        assert cpu > 0 and row["rss_mean_bytes"] > 0, row  # type: ignore[operator]
        assert row["cpu_clock"] == f"the remote /proc process tree on app ({lab.host(1)}) (10 ms ticks; live " \
                                   "processes and the children they reaped)", row["cpu_clock"]
        if row["cell"] == "c/frame/alloc=jemalloc":
            assert str(ready.get("alloc_lib", "")).endswith("libjemalloc.so.2"), ready
    meta = json.loads((out / "experiment.json").read_text())
    roles = {h["name"]: h["roles"] for h in meta["placement"]["hosts"]}
    assert roles == {"app": ["server"], "gen": ["load"]}, roles
    summary = (out / "summary.md").read_text()
    assert f"- **Placement**: servers on app ({lab.addr(1)}: " in summary, summary
    assert f"Locust workers on gen ({lab.addr(2)}: " in summary, summary
    lab.wait_nothing_left(20)


def xferd_c_pids(lab: Lab) -> list[int]:
    return [int(p.split(":", 1)[0]) for p in lab.namespace_processes(1) if str(XFERD_C) in p.split(": ", 1)[1]
            and MARKER not in p]


def test_a_server_killed_mid_run_fails_its_cell_naming_the_host(lab: Lab, tmp_path: Path) -> None:
    path = experiment(lab, tmp_path, app_and_gen(lab), LOAD + "duration_s = 8\n", c_on_app())
    out = tmp_path / "run"
    runner = subprocess.Popen([sys.executable, "-m", "xferbench", "run", str(path), "--out", str(out)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        while not (pids := xferd_c_pids(lab)) or not (out / "logs").is_dir() or not any(
                (out / "logs").glob("*.locust.gen.log")):
            assert runner.poll() is None, f"xferbench run exited with {runner.returncode} before its server ran"
            assert time.monotonic() < deadline, "no server on the lab's host 1 within 90 s"
            time.sleep(0.2)
        time.sleep(3.0)  # the load under way
        for pid in pids:
            os.kill(pid, signal.SIGKILL)  # the lab shares this machine's pids: `ip netns exec NAME1 kill -9 PID`
        output, _ = runner.communicate(timeout=300)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    got = rows(out)
    assert len(got) == 2, (got, output)
    failed = [row for row in got if row["status"] != "ok"]
    assert len(failed) == 1, got
    reason = str(failed[0]["error"])
    assert f"xferd-c on app ({lab.host(1)}): the server exited with status -9 during the run" in reason, reason
    assert [row["status"] for row in got if row is not failed[0]] == ["ok"], got
    lab.wait_nothing_left(20)


def test_a_binary_the_host_lacks_is_copied_checked_and_removed(lab: Lab, tmp_path: Path) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    binary = folder / "xferd-c"
    shutil.copy2(XFERD_C, binary)
    # Hidden from host 1 (its sshd's own mount namespace): a tmpfs over the folder, with another file of that name.
    r = ssh(lab, 1, f"mount -t tmpfs tmpfs {folder} && echo other > {binary} && chmod +x {binary}")
    assert r.returncode == 0, r.stderr
    try:
        exp = xe.load_file(experiment(lab, tmp_path, app_and_gen(lab), 'transport = "frame"\n', c_on_app(str(binary))))
        placement = hostcheck.check(exp)
        address = next(h.address for h in placement.hosts if h.name == "app")
        assert address == lab.addr(1)
        cell = exp.cells[1]  # jemalloc
        server = remoteserver.start(cell, exp.hosts["app"], address, tmp_path / "server.log")
        try:
            copied = server.ready["binary_copied_to"]
            assert server.copied and copied.startswith(f"/tmp/{MARKER}"), server.ready
            assert ssh(lab, 1, f"sha256sum {copied}/xferd-c").stdout.split()[0] == \
                remoteserver.file_sha256(binary)
            assert server.ready["frame"].startswith(f"{lab.addr(1)}:")
            assert server.ready["alloc_lib"].endswith("libjemalloc.so.2")
            assert server.alive()
            sample = server.tree.read()
            assert sample is not None and sample.rss_bytes > 0 and sample.procs == 1 and sample.threads > 1, sample
        finally:
            code = server.stop()
        assert code == 0, (code, list(server.tail))
        assert ssh(lab, 1, f"test -e {copied}").returncode == 1  # removed with the server
        assert ssh(lab, 1, f"cat {binary}").stdout == "other\n"  # the host's own file untouched
    finally:
        ssh(lab, 1, f"umount {folder}")
    lab.wait_nothing_left(20)



def sshd_pids(lab: Lab, i: int) -> list[int]:
    return [int(p.split(":", 1)[0]) for p in lab.namespace_processes(i) if p.split(": ", 1)[1].startswith("sshd")]


def test_the_server_hosts_sshd_gone_fails_its_cells_naming_the_host(lab: Lab, tmp_path: Path) -> None:
    """Last of the lab's tests: host 1 answers ssh no more afterwards. Its sshd killed mid-run (the listener and the
    session's own): the session ends, the watch ends the server, the cell fails saying so; the next cell cannot
    start its server there, and says why."""
    path = experiment(lab, tmp_path, app_and_gen(lab), LOAD + "duration_s = 8\n", c_on_app())
    out = tmp_path / "run"
    runner = subprocess.Popen([sys.executable, "-m", "xferbench", "run", str(path), "--out", str(out)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        while not xferd_c_pids(lab) or not any((out / "logs").glob("*.locust.gen.log")):
            assert runner.poll() is None, f"xferbench run exited with {runner.returncode} before its server ran"
            assert time.monotonic() < deadline, "no server on the lab's host 1 within 90 s"
            time.sleep(0.2)
        time.sleep(3.0)
        for pid in sshd_pids(lab, 1):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        output, _ = runner.communicate(timeout=300)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    got = rows(out)
    assert len(got) == 2 and all(row["status"] != "ok" for row in got), (got, output)
    first, second = (str(row["error"]) for row in got)
    assert f"xferd-c on app ({lab.host(1)}): ssh session ended (status 255)" in first, first
    assert second.startswith(f"app ({lab.host(1)}): ssh: connect to host {lab.addr(1)} port 22: "), second
    lab.wait_nothing_left(20)


@pytest.mark.parametrize(("extra", "top", "said"), [
    ('host = "nowhere"\n', "", "host = 'nowhere': no [hosts.nowhere] in this experiment (declared: app)"),
    ('host = "app"\n', "[soak]\n", "host = 'app': [soak] reads a server on this machine only, for now"),
    ('host = "app"\n', '[network]\nlatency = "5ms"\n', "host = 'app': [network]'s proxy runs on this machine"),
])
def test_what_a_server_on_another_host_cannot_run_with_is_refused(extra: str, top: str, said: str,
                                                                   tmp_path: Path) -> None:
    """No lab needed: the schema's refusals, naming the cell and the key."""
    path = tmp_path / "e.toml"
    path.write_text(f'{top}[hosts.app]\nssh = "root@10.0.0.9"\n[load]\ntransport = "frame"\n'
                    f'[[servers]]\nserver = "xferd-c"\n{extra}')
    with pytest.raises(xe.ExperimentError) as e:
        xe.load_file(path)
    assert said in str(e.value), e.value
    assert ": servers (cell 'c/frame'): host = " in str(e.value), e.value


def test_an_experiment_with_a_server_host_reads_without_its_lab(tmp_path: Path) -> None:
    """experiments/lab.toml reads with the lab down: its missing ssh_config is the host check's refusal, at run time."""
    exp = xe.load_file(ROOT / "experiments" / "lab.toml")
    assert {c.host for c in exp.cells} == {"lab1"} and exp.server_hosts == ("lab1",)
    assert exp.load_hosts == ("lab2", "lab3") and exp.cells[0].config()["host"] == "lab1"
