"""Hosts reached over SSH ([hosts.NAME], [load] hosts), against a lab of real sshds on this machine (scripts/lab.sh:
network namespaces on a bridge of their own, sharing this filesystem, so this checkout and its .venv are there):

- the host check (xferbench/run/hostcheck.py) passes on a healthy lab and records each host's address, kernel,
  CPUs, clock offset and versions, and this machine's address on the lab, where the servers will listen; the clock
  offsets measured again as a sweep's end does (hostcheck.end_clocks);
- it refuses, naming the host, one that does not answer ssh (an address of the lab's subnet where nothing is) and
  one whose Python lacks the project's load code, and `xferbench run` then starts nothing; a host gone when the
  sweep ends has its end clock recorded as missing, with ssh's reason;
- a --quick run of xferd-go here over TLS with Locust's workers on two lab hosts: both hosts' workers served
  requests (their own scrapes), each call a handshake, each host has its own figures (this machine as the
  server's), the report says where everything ran, and no worker is left on any lab host afterwards, neither after
  the run nor after its runner was killed with SIGKILL.

The module has one lab of its own, hk<worker>a on 10.78.<100 + worker>, brought up once and always torn down. Needs
root with the capabilities of network namespaces; the servers must be built (`make build`)."""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.lab import Lab, experiment, two_hosts_up
from tests.support.runs import ROOT, xferbench_run
from xferbench import config as xe
from xferbench.analysis.row import RunRow
from xferbench.analysis.runmeta import HostFacts, Placement
from xferbench.run import hostcheck, lifecycle

MARKER = "xferbench-worker-"  # in the command line of every Locust worker the runner starts on a host




@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with two_hosts_up("hk", 78, tmp_path_factory) as lab:
        yield lab

def hosts_check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xferbench", "hosts", "check", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=180)


def two_hosts(lab: Lab) -> str:
    return f'[hosts.gen1]\nssh = "{lab.host(1)}"\n[hosts.gen2]\nssh = "{lab.host(2)}"\n'


def test_the_check_passes_on_a_healthy_lab_and_records_each_host(lab: Lab, tmp_path: Path) -> None:
    path = experiment(lab, tmp_path, two_hosts(lab) + f'[hosts.other]\nssh = "{lab.host(2)}"\n',
                      'hosts = ["gen1", "gen2"]\n')
    exp = xe.load_file(path)
    assert exp.hosts["gen1"].ssh_config == str(lab.dir / "ssh_config")  # resolved against the file's folder
    placement = hostcheck.check(exp)
    assert placement.server_address == lab.addr(0)  # this machine on the lab's bridge: where the servers will listen
    describe, _ = hostcheck.project_version()
    by_name = {h.name: h for h in placement.hosts}
    assert list(by_name) == ["gen1", "gen2", "other"]
    for i, name in ((1, "gen1"), (2, "gen2"), (2, "other")):
        h = by_name[name]
        assert h.roles == (["load"] if name != "other" else []), h
        assert h.address == lab.addr(i) and h.here == lab.addr(0) and h.hostname == lab.host(i), h
        assert h.kernel == platform.release() and h.cpu_model, h  # the lab's hosts share this machine's kernel
        assert h.cpus is not None and 1 <= h.cpus <= os.cpu_count(), h  # its cpuset's
        assert h.cpus_free is not None and 0 <= h.cpus_free <= h.cpus + 0.05, h
        # one clock for all: the offset is within its own uncertainty (half the best round trip) of 0, plus a margin
        assert h.clock_offset_s is not None and h.clock_uncertainty_s is not None, h
        assert 0 < h.clock_uncertainty_s < 0.5 and abs(h.clock_offset_s) <= h.clock_uncertainty_s + 0.002, h
        assert h.python == str(ROOT / ".venv" / "bin" / "python") and h.python_version == platform.python_version(), h
        assert h.project == describe and h.locust, h
    assert placement.text is not None and f"Locust workers on gen1 ({lab.addr(1)}: " in placement.text
    assert "also checked: other (" in placement.text
    hostcheck.end_clocks(exp, placement)  # as a sweep's end does: the probe again, importing nothing this time
    for h in placement.hosts:
        assert h.clock_end_error is None and h.clock_end_offset_s is not None and h.clock_end_uncertainty_s, h
        assert h.clock_end_uncertainty_s < 0.5 and abs(h.clock_end_offset_s) <= h.clock_end_uncertainty_s + 0.002, h
    assert placement.text.count(" at start, ") == 3 and placement.text.count(" at end)") == 3, placement.text
    r = hosts_check(path)
    assert r.returncode == 0, r.stderr
    assert f"the servers will listen for the load on {lab.addr(0)}" in r.stdout and "gen2" in r.stdout, r.stdout


def test_an_unreachable_host_is_refused_naming_it_before_any_cell(lab: Lab, tmp_path: Path) -> None:
    nobody = f"{lab.net}.99"  # the lab's subnet, no host there
    path = experiment(lab, tmp_path, f'[hosts.gen1]\nssh = "{lab.host(1)}"\n[hosts.gen2]\nssh = "root@{nobody}"\n',
                      'hosts = ["gen1", "gen2"]\n')
    r = hosts_check(path)
    assert r.returncode == 2, r.stdout + r.stderr
    line = r.stderr.strip().splitlines()[-1]  # ssh's own last line: "No route to host" where nothing answers ARP
    assert line.startswith(f"error: host check: gen2 (root@{nobody}): ssh: connect to host {nobody} port 22: "), line
    out = tmp_path / "run"
    r = xferbench_run(str(path), "--out", str(out))
    assert r.returncode == 2 and f"host check: gen2 (root@{nobody})" in r.stderr, r.stderr
    assert not out.exists()  # refused before anything was written or started
    # a host gone by the sweep's end: its end clock is missing, with ssh's reason; the others' are measured
    placement = Placement(lab.addr(0), [HostFacts("gen1", lab.host(1), ["load"]), HostFacts("gen2", f"root@{nobody}")])
    hostcheck.end_clocks(xe.load_file(path), placement)
    gen1, gen2 = placement.hosts
    assert gen1.clock_end_offset_s is not None and gen1.clock_end_error is None, gen1
    assert gen2.clock_end_offset_s is None and str(gen2.clock_end_error).startswith(
        f"ssh: connect to host {nobody} port 22: "), gen2


def test_a_host_without_the_load_code_is_refused_naming_it(lab: Lab, tmp_path: Path) -> None:
    path = experiment(lab, tmp_path, two_hosts(lab).replace(f'ssh = "{lab.host(2)}"\n',
                                                            f'ssh = "{lab.host(2)}"\npython = "/usr/bin/python3"\n'),
                      'hosts = ["gen1", "gen2"]\n')
    r = hosts_check(path)
    assert r.returncode == 2, r.stdout + r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: host check: gen2 ({lab.host(2)}): /usr/bin/python3 (root {ROOT}) cannot import "), line
    assert "install the project there into a venv" in line, line
    path = experiment(lab, tmp_path, two_hosts(lab).replace(f'ssh = "{lab.host(1)}"\n',
                                                            f'ssh = "{lab.host(1)}"\nroot = "/nonexistent"\n'),
                      'hosts = ["gen1", "gen2"]\n')
    with pytest.raises(hostcheck.HostCheckError, match=rf"^gen1 \({lab.host(1)}\): running .* in /nonexistent: exit "
                       r"status 2: .*/nonexistent"):
        hostcheck.check(xe.load_file(path))


def _rows(run_dir: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run_dir / "runs.jsonl").read_text().splitlines()]


@pytest.mark.slow  # a whole run across lab hosts (see test_remote_server.py)
def test_a_quick_run_with_its_workers_on_two_lab_hosts(lab: Lab, tmp_path: Path) -> None:
    """xferd-go here, listening on the lab's bridge over TLS; Locust's master here, a worker on each of two lab
    hosts, each call a new connection and so a handshake, checked against the run's CA by the name the certificate
    gives this machine's lab address."""
    path = experiment(lab, tmp_path, two_hosts(lab), 'hosts = ["gen1", "gen2"]\nusers = 4\nrate = "40"\n'
                      'mix = "echo:1"\ntls = "on"\nconnections = "call"\n')
    out = tmp_path / "run"
    r = xferbench_run(str(path), "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    (row,) = _rows(out)
    assert row["status"] == "ok", row
    ready = row["ready"]
    assert isinstance(ready, dict) and ready["tls_grpc"].startswith(f"{lab.addr(0)}:"), ready
    assert row["client_failures"] == 0 and 0.5 < row["tls_handshakes_per_s"] / row["client_qps"] < 1.5, row
    assert ready["metrics"].startswith("127.0.0.1:"), ready  # only the runner reads it
    hosts = row["load_hosts"]
    assert isinstance(hosts, dict) and sorted(hosts) == ["gen1", "gen2"], hosts
    for i, name in ((1, "gen1"), (2, "gen2")):
        h = hosts[name]
        assert h["address"] == lab.addr(i) and h["processes"] == 1, h
        assert h["client_qps"] > 0 and h["client_requests"] > 0, h  # scraped at the worker, on its host
        assert h["gen_cpu_cores"] > 0 and h["cpus_idle_cores"] is not None and h["saturated"] in (True, False), h
        assert (out / "logs" / f"go_grpc_tls=on.r1.locust.{name}.log").exists()
    assert row["client_qps"] == pytest.approx(hosts["gen1"]["client_qps"] + hosts["gen2"]["client_qps"], rel=0.05)
    own = row["hosts"]  # each host's own figures (tests/run/test_host_figures.py has their sums)
    assert list(own) == ["this machine", "gen1", "gen2"] and own["this machine"]["roles"] == ["server", "master",
                                                                                             "runner"], own
    for name, h in own.items():
        assert all("error" not in h[part] for part in ("cpu", "net", "tcp")), (name, h)
    sent = own["gen1"]["net"]["tx_bytes_per_s"] + own["gen2"]["net"]["tx_bytes_per_s"]
    assert own["this machine"]["net"]["rx_bytes_per_s"] >= 0.7 * sent, own  # the load hosts send to this machine
    meta = json.loads((out / "experiment.json").read_text())
    assert meta["placement"]["server_address"] == lab.addr(0)
    assert [h["name"] for h in meta["placement"]["hosts"]] == ["gen1", "gen2"]
    assert all(h["roles"] == ["load"] and h["clock_uncertainty_s"] > 0 for h in meta["placement"]["hosts"])
    summary = (out / "summary.md").read_text()
    assert f"- **Placement**: servers and the Locust master on this machine, listening on {lab.addr(0)}; Locust " \
           f"workers on gen1 ({lab.addr(1)}: " in summary, summary
    assert f"gen2 ({lab.addr(2)}: " in summary
    assert "<b>Placement</b>" in (out / "report.html").read_text()
    assert lab.left_over() == [] and lab.sessions_here() == []


@pytest.mark.slow  # a whole run across lab hosts (see test_remote_server.py)
def test_no_worker_is_left_when_the_runner_is_killed(lab: Lab, tmp_path: Path) -> None:
    """SIGKILL leaves the runner no time to stop anything: its ssh sessions die with it (the parent-death signal),
    and each host's watch then ends its workers."""
    path = experiment(lab, tmp_path, two_hosts(lab), 'hosts = ["gen1", "gen2"]\nusers = 2\nrate = "10"\n'
                      'mix = "echo:1"\nduration_s = 60\n')
    runner = subprocess.Popen([sys.executable, "-m", "xferbench", "run", str(path), "--out", str(tmp_path / "run")],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not (any(MARKER in p for p in lab.namespace_processes(1))
                   and any(MARKER in p for p in lab.namespace_processes(2))):
            assert runner.poll() is None, f"xferbench run exited with {runner.returncode} before its workers ran"
            assert time.monotonic() < deadline, "no worker on the lab's hosts within 60 s"
            time.sleep(0.2)
        time.sleep(1.0)  # the load under way
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=30)
    lab.wait_nothing_left(20)


def test_a_saturated_load_host_is_named_in_the_warnings() -> None:
    """The saturation check per load host (no lab needed): a host's workers above 0.9 cores each, or its CPUs
    without 0.1 core idle, is named; the sum over every worker (2 cores here) is not what is judged."""
    exp = xe.parse({"hosts": {"gen1": {"ssh": "a"}, "gen2": {"ssh": "b"}, "gen3": {"ssh": "c"}},
                    "load": {"hosts": ["gen1", "gen2", "gen3"], "processes": 2}, "servers": [{"server": "xferd-go"}]},
                   "e.toml")
    cell = exp.cells[0]
    row = RunRow(cell.name, cell.server, cell.transport, gen_cpu_cores=2.0, server_qps=10.0)
    host = {"processes": 2, "gen_cpu_cores": 0.4, "gen_cpu_cores_per_process": 0.2, "cpus_idle_cores": 1.5,
            "saturated": False}
    row.load_hosts = {"gen1": {**host, "address": "10.78.0.2"},
                      "gen2": {**host, "address": "10.78.0.3", "gen_cpu_cores_per_process": 0.95, "saturated": True},
                      "gen3": {**host, "address": "10.78.0.4", "cpus_idle_cores": 0.05, "saturated": True}}
    said = [w for w in lifecycle.warnings(row, cell) if "saturated" in w]
    assert said == [
        "load generator saturated on gen2 (10.78.0.3): 0.95 cores per Locust worker (> 0.9 cores); the figures may "
        "describe the generator rather than the server",
        "load generator saturated on gen3 (10.78.0.4): its CPUs 0.05 cores idle (< 0.1); the figures may describe "
        "the generator rather than the server",
    ]
    row.load_hosts = {"gen1": {**host, "address": "10.78.0.2"}}
    assert not [w for w in lifecycle.warnings(row, cell) if "saturated" in w]
