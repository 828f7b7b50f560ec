"""Every host's own figures in a run across hosts (RunRow.hosts, xferbench/run/hostwindow.py), against a lab of real
sshds on this machine (scripts/lab.sh): xferd-c on lab host 1, Locust's worker on lab host 2, its master and the
runner here. Each of the three hosts has its CPU time adding up to the CPUs it may use (a lab host: its cpuset's), its
network counters moving, what host 2 sent host 1 received, its TCP retransmits recorded, and its window stamped
with this machine's clock; the clocks, one for all in a lab, are offset by little at the sweep's start and end; the
report shows the hosts.

The module has one lab of its own, hx<worker>a on 10.81.<100 + worker>, brought up once and always torn down. Needs
root with the capabilities of network namespaces; the servers must be built (`make build`)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.lab import Lab, experiment, two_hosts_up
from tests.support.runs import xferbench_run
from xferbench.measure import hoststat

# A whole run across lab hosts, as tests/run/test_remote_server.py's: in make test-slow.
pytestmark = pytest.mark.slow

# One upload user and one download user (Locust gives each user class one of the two users): 256 KiB each way, five
# times a second, far above what else crosses the hosts' links (scrapes, ssh, Locust's reports).
LOAD = (
    'hosts = ["gen"]\nprocesses = 1\nusers = 2\nrate = "10"\nmix = "upload:1,download:1"\n'
    'sizes = "256KiB"\nchunk = "64KiB"\ntransport = "frame"\n'
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with two_hosts_up("hx", 81, tmp_path_factory) as lab:
        yield lab


def check_cpu(name: str, h: dict[str, Any], cpus: int) -> None:
    """Every tick of each CPU it may use is counted somewhere: their count in cores, give or take a tenth."""
    cpu = h["cpu"]
    assert "error" not in cpu and cpu["cpus"] == cpus, (name, h)
    total = sum(cpu[k] for k in hoststat.CPU_SHOWN)
    assert abs(total - cpus) <= 0.1 * cpus + 0.05, (name, total, cpu)
    assert cpu["busy"] > 0 and all(cpu[k] >= 0 for k in hoststat.CPU_SHOWN), (name, cpu)


def test_each_host_of_a_run_across_lab_hosts_has_its_own_figures(lab: Lab, tmp_path: Path) -> None:
    hosts = f'[hosts.app]\nssh = "{lab.host(1)}"\n[hosts.gen]\nssh = "{lab.host(2)}"\n'
    path = experiment(lab, tmp_path, hosts, LOAD, 'server = "xferd-c"\nhost = "app"\n')
    out = tmp_path / "run"
    r = xferbench_run(str(path), "--out", str(out), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (row,) = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert row["status"] == "ok", row
    got = row["hosts"]
    assert list(got) == ["this machine", "app", "gen"], got
    here, app, gen = got["this machine"], got["app"], got["gen"]
    assert (here["roles"], app["roles"], gen["roles"]) == (["master", "runner"], ["server"], ["load"]), got
    assert (here["address"], app["address"], gen["address"]) == (lab.addr(0), lab.addr(1), lab.addr(2)), got
    meta = json.loads((out / "experiment.json").read_text())
    facts = {h["name"]: h for h in meta["placement"]["hosts"]}
    # a lab host's CPUs are its cpuset's, as the host check found them too; this machine's, the runner's own
    expect = {"this machine": len(os.sched_getaffinity(0)), "app": facts["app"]["cpus"], "gen": facts["gen"]["cpus"]}
    for name, h in got.items():
        check_cpu(name, h, expect[name])
        # stamped by this machine's clock, measured by its own: one clock in a lab, so the two spans agree
        assert h["span_s"] > 1 and abs((h["end_at"] - h["start_at"]) - h["span_s"]) < 0.25, (name, h)
        assert "error" not in h["net"] and h["net"]["rx_bytes"] > 0 and h["net"]["tx_bytes"] > 0, (name, h)
        tcp = h["tcp"]
        assert "error" not in tcp and tcp["out_segs"] > 0 and tcp["retrans_segs"] >= 0, (name, tcp)
        assert 0 <= tcp["retrans_share"] <= 1 and tcp["retrans_per_s"] >= 0, (name, tcp)
    assert app["net"]["interfaces"] == ["eth0"] and gen["net"]["interfaces"] == ["eth0"], (app, gen)
    # the uploads go from gen to app and the downloads back: what one sent, the other received (the runner's scrapes,
    # ssh and acknowledgements beside them, and windows cut a few milliseconds apart)
    assert row["client_upload_bytes_per_s"] > 500_000 and row["client_download_bytes_per_s"] > 500_000, row
    for sent, received in ((gen, app), (app, gen)):
        ratio = received["net"]["rx_bytes_per_s"] / sent["net"]["tx_bytes_per_s"]
        assert 0.8 <= ratio <= 1.25, (ratio, sent["net"], received["net"])
    for h in meta["placement"]["hosts"]:
        for offset, uncertainty in (
            ("clock_offset_s", "clock_uncertainty_s"),
            ("clock_end_offset_s", "clock_end_uncertainty_s"),
        ):
            assert 0 < h[uncertainty] < 0.5 and abs(h[offset]) <= h[uncertainty] + 0.002, h
    summary = (out / "summary.md").read_text()
    placement = next(line for line in summary.splitlines() if line.startswith("- **Placement**"))
    assert placement.count(" at start, ") == 2 and placement.count(" at end)") == 2, placement
    table = summary[summary.index("## Hosts") :]
    for name, roles in (("this machine", "master, runner"), ("app", "server"), ("gen", "load")):
        assert f" | {name} | {roles} | " in table, table
    assert "missing" not in table.split("\n## ")[0], table
    assert "<h2>Hosts</h2>" in (out / "report.html").read_text()
    lab.wait_nothing_left(20)
