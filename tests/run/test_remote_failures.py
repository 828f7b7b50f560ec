"""Failures of a run on other hosts, against a lab of real sshds on this machine (scripts/lab.sh), real servers and
real Locust workers:

- Ctrl-C (SIGINT to `xferbench run`) mid-run, with xferd-c on lab host 1 (its binary copied there: the checkout's
  folder hidden from host 1) and the Locust workers on host 2: the runner exits with status 130 within a bounded
  time, and nothing of the run is left: no process on any lab host but its sshd, no ssh session here, and no
  copied binary's folder (/tmp/xferbench-server-*) on host 1;
- a load host that dies mid-run (its sshd and every process of its namespace killed -9), with xferd-go here and
  the Locust workers on hosts 1 and 2: the run ends by itself, the cell then running fails "during the run" naming
  the host and what ssh said last, every later cell fails at its start (its workers' session cannot connect)
  naming the host and ssh's reason, in runs.jsonl and the terminal output, with no traceback and exit status 1
  (every run failed), and nothing of the run is left.

The module has one lab of its own, rf<worker>a on 10.80.<100 + worker>, brought up once and always torn down. The
dead host is the last test's (its host 2 answers ssh no more afterwards). Needs root with the capabilities of
network namespaces; the servers must be built (`make build`)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.run.test_hosts import MARKER
from tests.support.lab import Lab, experiment, two_hosts_up
from tests.support.runs import ROOT, processes_mentioning
from xferbench.measure.scrape import fetch, scrape

XFERBENCH = ROOT / ".venv" / "bin" / "xferbench"
XFERD_C = ROOT / "build" / "bin" / "xferd-c"
COPIED = "/tmp/xferbench-server-"  # the folder a copied server binary is run from, on its host
READY_DEADLINE_S = 60.0  # the workers running on the lab, on a loaded 2-core machine
EXIT_DEADLINE_S = 60.0  # from the signal (or the host's death) to the runner's exit
GONE_DEADLINE_S = 20.0  # for the run's processes to vanish, here and on the lab


# Whole runs across lab hosts, each pinned to a CPU the other test worker's servers share: in make test-slow, so
# that make test keeps its budget and its rate checks their CPUs.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with two_hosts_up("rf", 80, tmp_path_factory) as lab:
        yield lab


def ssh(lab: Lab, i: int, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ssh", "-F", str(lab.dir / "ssh_config"), lab.host(i), command], capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL)


def start(path: Path, out: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([str(XFERBENCH), "run", str(path), "--out", str(out), *extra], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def until_workers_run(lab: Lab, runner: subprocess.Popen[str], i: int) -> None:
    """Polls host i's namespace until a Locust worker of the run is there; the runner must not exit first."""
    deadline = time.monotonic() + READY_DEADLINE_S
    while not any(MARKER in p for p in lab.namespace_processes(i)):
        assert runner.poll() is None, f"xferbench run exited with {runner.returncode} before its workers ran:\n" \
                                      f"{runner.communicate()[0][-3000:]}"
        assert time.monotonic() < deadline, f"no worker on the lab's host {i} within {READY_DEADLINE_S:g} s"
        time.sleep(0.1)


def finish(runner: subprocess.Popen[str]) -> tuple[int, str]:
    """The runner's exit status and output, within EXIT_DEADLINE_S (killed, and the test failed, past it)."""
    try:
        output, _ = runner.communicate(timeout=EXIT_DEADLINE_S)
    except subprocess.TimeoutExpired:
        runner.kill()
        output, _ = runner.communicate()
        pytest.fail(f"xferbench run did not end within {EXIT_DEADLINE_S:g} s:\n{output[-3000:]}")
    return runner.returncode, output



def rows(run_dir: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run_dir / "runs.jsonl").read_text().splitlines()]


def test_ctrl_c_mid_run_leaves_nothing_on_the_hosts(lab: Lab, tmp_path: Path) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    binary = folder / "xferd-c"
    shutil.copy2(XFERD_C, binary)
    # Hidden from host 1 (its sshd's own mount namespace), so that the run copies the binary there.
    r = ssh(lab, 1, f"mount -t tmpfs tmpfs {folder}")
    assert r.returncode == 0, r.stderr
    try:
        hosts = f'[hosts.app]\nssh = "{lab.host(1)}"\n[hosts.gen]\nssh = "{lab.host(2)}"\n'
        load = 'hosts = ["gen"]\nusers = 2\nrate = "20"\nmix = "echo:1"\ntransport = "frame"\nduration_s = 30\n'
        servers = f'server = "xferd-c"\nhost = "app"\nbinary = "{binary}"\n'
        path = experiment(lab, tmp_path, hosts, load, servers)
        runner = start(path, tmp_path / "run")
        try:
            until_workers_run(lab, runner, 2)
            copied = ssh(lab, 1, f"ls -d {COPIED}*").stdout.split()
            assert len(copied) == 1, copied  # the server runs from its copy
            runner.send_signal(signal.SIGINT)
            t0 = time.monotonic()
            code, output = finish(runner)
        finally:
            if runner.poll() is None:
                runner.kill()
                runner.wait()
        print(f"exit {time.monotonic() - t0:.1f} s after the SIGINT")
        assert code == 130, f"exit status {code}:\n{output[-3000:]}"
        assert "Traceback" not in output, output
        (row,) = rows(tmp_path / "run")
        assert row["status"] == "interrupted" and row["error"] == "stopped by Ctrl-C / SIGTERM", row
        lab.wait_nothing_left(GONE_DEADLINE_S)
        r = ssh(lab, 1, f"ls -d {COPIED}* 2>/dev/null; true")
        assert r.returncode == 0 and r.stdout == "", (r.stdout, r.stderr)  # the copy's folder removed
    finally:
        ssh(lab, 1, f"umount {folder}")


def requests_from(lab: Lab, i: int) -> float:
    """The requests host i's Locust workers have made, scraped where they serve their metrics: every listener on
    its address but its sshd's (a worker's port is not on its command line: it takes the next free one)."""
    r = subprocess.run(["ip", "netns", "exec", lab.host(i), "ss", "-tlnH", "src", lab.addr(i)], capture_output=True,
                       text=True, timeout=10, check=True)
    total = 0.0
    for line in r.stdout.splitlines():
        port = line.split()[3].rsplit(":", 1)[1]
        if port != "22" and (snap := scrape(f"http://{lab.addr(i)}:{port}/metrics", timeout=1.0)) is not None:
            total += snap.sum("xfer_client_requests_total") or 0.0
    return total


def master_lists(lab: Lab) -> int:
    """How many workers the run's Locust master (here, bound to this machine's address on the lab) lists on its
    /workers: what the runner waits for before its measured window."""
    for p in processes_mentioning(f"--master-bind-host {lab.addr(0)}"):
        if m := re.search(r"--xfer-metrics-port (\d+)", p):
            with contextlib.suppress(OSError, ValueError):
                return len(json.loads(fetch(f"http://127.0.0.1:{m[1]}/workers", timeout=1.0)).get("workers", {}))
    return 0


def kill_host(lab: Lab, i: int) -> list[int]:
    """Host i as a host that died: every process of its namespace (its sshd, the session's shell, the watch, the
    workers) killed -9 at once."""
    r = subprocess.run(["ip", "netns", "pids", lab.host(i)], capture_output=True, text=True, timeout=10, check=True)
    pids = [int(p) for p in r.stdout.split()]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return pids


def test_a_load_host_that_dies_mid_run_fails_its_cells_naming_it(lab: Lab, tmp_path: Path) -> None:
    """Last of the lab's tests: host 2 answers ssh no more afterwards."""
    hosts = f'[hosts.gen1]\nssh = "{lab.host(1)}"\n[hosts.gen2]\nssh = "{lab.host(2)}"\n'
    load = 'hosts = ["gen1", "gen2"]\nusers = 2\nrate = "20"\nmix = "echo:1"\n'
    path = experiment(lab, tmp_path, hosts, load, 'server = "xferd-go"\n[servers.flags]\npool = ["on", "off"]\n')
    path.write_text(path.read_text().replace("repeats = 1", "repeats = 2"))
    out = tmp_path / "run"
    runner = start(path, out, "--quick")
    try:
        until_workers_run(lab, runner, 2)
        deadline = time.monotonic() + READY_DEADLINE_S
        while master_lists(lab) < 2:  # both hosts' workers listed: the runner's cell is ready
            assert runner.poll() is None, f"xferbench run exited with {runner.returncode} before its load ran"
            assert time.monotonic() < deadline, f"the master did not list both workers within {READY_DEADLINE_S:g} s"
            time.sleep(0.1)
        seen = requests_from(lab, 2)
        while requests_from(lab, 2) < seen + 10:  # the measured load under way from host 2, past that point
            assert runner.poll() is None, f"xferbench run exited with {runner.returncode} before its load ran"
            assert time.monotonic() < deadline, f"no load from host 2 within {READY_DEADLINE_S:g} s"
            time.sleep(0.1)
        assert kill_host(lab, 2), "nothing ran in host 2's namespace"
        t0 = time.monotonic()
        code, output = finish(runner)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    print(f"exit {time.monotonic() - t0:.1f} s after the host died, status {code}")
    assert code == 1, f"exit status {code}:\n{output[-3000:]}"  # every run failed (the report is written)
    assert "Traceback" not in output, output
    got = rows(out)
    assert len(got) == 4 and all(row["status"] == "failed" for row in got), (got, output)
    gen2 = f"gen2 ({lab.host(2)})"
    first, *later = (str(row["error"]) for row in got)
    # The cell then running: its workers' session on gen2 ended under it (ssh's last line said how).
    assert first.startswith(f"the Locust workers on {gen2} lost their ssh session (") and \
        first.endswith(") during the run"), first
    said = " ".join(output.split())  # the terminal's lines are wrapped
    assert " ".join(first.split()) in said, output
    # Every later cell: the workers' session on gen2 cannot start, and ssh says why.
    for reason in later:
        assert f"the Locust workers on {gen2} lost their ssh session (ssh: connect to host {lab.addr(2)} port 22: " \
               in reason and reason.endswith(") before it was ready"), reason
        assert " ".join(reason.split()) in said, output
    lab.wait_nothing_left(GONE_DEADLINE_S)
