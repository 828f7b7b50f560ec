"""The runner's container backend on the real engine: limits apply and the container's own figures are
recorded; a limit far too small is an OOM-killed, failed cell; no container outlives its cell."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.run.containers.conftest import runner_containers
from xferbench import config as xe
from xferbench.analysis.row import RunRow
from xferbench.measure import cgroup
from xferbench.report import artifacts
from xferbench.run import sweep
from xferbench.run.containers.backend import ContainerServer

MiB = 1 << 20


def _exp(image: str, limits: dict[str, Any], load: dict[str, Any], env: dict[str, str] | None = None) -> xe.Experiment:
    return xe.parse({
        "experiment": {"name": "ctr-test", "repeats": 1, "warmup_s": 1, "duet": False, "backend": "docker"},
        "load": {"transport": "grpc", "users": 2, "spawn_rate": 2, "duration_s": 3, **load},
        "servers": [{"server": "xferd-go", "image": image, "limits": limits, "env": env or {}}],
    })


def _one_row(exp: xe.Experiment, run_dir: Path) -> RunRow:
    res = sweep.sweep(exp, run_dir)
    artifacts.write_all(run_dir)
    assert len(res.rows) == 1 and not res.interrupted
    return res.rows[0]


def test_memory_limit_runs_and_records_container_figures(client: docker.DockerClient, images: dict[str, str],
                                                         tmp_path: Path) -> None:
    limit = 256 * MiB
    exp = _exp(images["xferd-go"], {"cpus": 1, "memory": "256MiB"},
               {"rate": "20", "sizes": "1MiB", "chunk": "256KiB", "mix": "upload:1,download:1"})
    row = _one_row(exp, tmp_path / "run")
    assert row.ok, (row.error, row.stderr_tail)
    assert row.container is not None and row.container["memory_bytes"] == limit and row.container["cpus"] == 1.0
    assert row.client_qps and row.client_qps > 0
    # The cgroup's own figures: memory used below the limit, CFS periods counted (the quota is enforced).
    assert row.ctr_mem_peak_bytes is not None and 0 < row.ctr_mem_peak_bytes < limit
    assert row.ctr_cpu_periods is not None and row.ctr_cpu_periods > 0
    assert row.ctr_cpu_throttled_periods is not None and row.ctr_cpu_throttled_s is not None
    assert row.ctr_oom_kills == 0 and row.ctr_oom_killed is False
    assert runner_containers(client, os.getpid()) == []
    # ... and the report shows them beside the load's figures.
    summary = (tmp_path / "run" / "summary.md").read_text()
    assert "## Containers" in summary and "throttled" in summary


def test_limit_far_too_small_is_an_oom_killed_failed_cell(client: docker.DockerClient, images: dict[str, str],
                                                          tmp_path: Path) -> None:
    exp = _exp(images["xferd-go"], {"memory": "8MiB"},
               {"rate": "4", "sizes": "32MiB", "chunk": "4MiB", "mix": "upload:1"})
    row = _one_row(exp, tmp_path / "run")
    assert row.status == "failed"
    assert row.error is not None and "OOM-killed (memory limit 8 MiB)" in row.error, row.error
    assert row.ctr_oom_killed is True and row.ctr_oom_kills is not None and row.ctr_oom_kills >= 1
    assert runner_containers(client, os.getpid()) == []
    assert "OOM-killed" in (tmp_path / "run" / "summary.md").read_text()


def _cpu_limit(pid: int) -> float | None:
    """The CPU quota of the process's cgroup in CPUs (quota / period), None when unlimited: the cpu
    controller's cpu.cfs_quota_us and cpu.cfs_period_us on cgroup v1, the unified hierarchy's cpu.max on v2.
    Fails, saying what it found, when neither can be read."""
    paths = cgroup._paths(pid)
    v1, v2 = paths.get("cpu"), paths.get("")
    if v1 is not None and (v1 / "cpu.cfs_quota_us").is_file():
        quota, period = int((v1 / "cpu.cfs_quota_us").read_text()), int((v1 / "cpu.cfs_period_us").read_text())
        return None if quota == -1 else quota / period
    if v2 is not None and (v2 / "cpu.max").is_file():
        quota_text, period_text = (v2 / "cpu.max").read_text().split()
        return None if quota_text == "max" else int(quota_text) / int(period_text)
    pytest.fail(f"pid {pid}: no CPU quota to read: neither cpu.cfs_quota_us (cgroup v1) nor cpu.max (v2) under "
                f"{ {k: str(v) for k, v in paths.items()} }", pytrace=False)


def _started(client: docker.DockerClient, image: str, cpus: float, env: dict[str, str],
             pin: tuple[int, ...] = ()) -> tuple[int, float | None, set[int]]:
    """xferd-go in a container limited to `cpus` (and pinned to the CPUs `pin` when given, as the runner
    pins a cell's server): its ready line's gomaxprocs=, the CPU quota its cgroup really has, and the CPUs
    the kernel lets it run on."""
    cell = _exp(image, {"cpus": cpus}, {"rate": "1"}, env).cells[0]
    server = ContainerServer(client, cell, cpus=pin)
    try:
        return int(server.ready["gomaxprocs"]), _cpu_limit(server.pid), os.sched_getaffinity(server.pid)
    finally:
        server.stop()


def test_cpu_limit_reaches_the_go_runtime(client: docker.DockerClient, images: dict[str, str]) -> None:
    """Go >= 1.25 sets GOMAXPROCS from the cgroup CPU limit: ceil(limit), at least 2, at most the CPUs it may
    use. On a 2-CPU machine a quota alone gives 2 at every limit, the same as no limit, so the quota cell shows
    only that the quota is in place and the runtime agrees with the rule; what tells the settings apart is
    the CPU set: a server pinned to one CPU (the experiment's server pinning, as the runner passes it) may
    use one CPU, whatever its quota, and must get GOMAXPROCS 1; and GOMAXPROCS set in the cell's environment
    must be the ready line's value, even one no rule gives here (3: more than the CPUs)."""
    image = images["xferd-go"]
    every = os.sched_getaffinity(0)
    # A quota alone: cfs_quota / period is the limit, the container may use every CPU, and the rule holds.
    got, limit, where = _started(client, image, 0.5, {})
    assert limit == 0.5 and where == every, (limit, where)
    assert got == min(len(where), max(2, math.ceil(0.5))), got
    # Pinned to the first of the experiment's server CPUs, with a quota above one CPU: the CPU set wins.
    pin = xe.parse({"experiment": {"name": "pin"}, "load": {"transport": "grpc"}, "servers": [{"server": "xferd-go"}],
                    "pinning": {"server": [min(every)]}}).pinning.server
    got, limit, where = _started(client, image, 1.5, {}, pin)
    assert limit == 1.5 and where == set(pin) == {min(every)}, (limit, where)
    assert got == 1, f"pinned to CPU {pin}: gomaxprocs={got}"
    # GOMAXPROCS from the environment reaches the runtime and its ready line unchanged.
    got, limit, _ = _started(client, image, 1.5, {"GOMAXPROCS": "3"})
    assert limit == 1.5 and got == 3, (limit, got)
