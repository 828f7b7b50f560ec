"""The runner's container backend on the real engine: limits apply and the container's own figures are
recorded; a limit far too small is an OOM-killed, failed cell; no container outlives its cell."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import docker

from tests.containers.conftest import runner_containers
from xferbench import experiment as xe
from xferbench import report, runner
from xferbench.containers import cgroup
from xferbench.containers.backend import ContainerServer
from xferbench.row import RunRow

MiB = 1 << 20


def _exp(image: str, limits: dict[str, Any], load: dict[str, Any], env: dict[str, str] | None = None) -> xe.Experiment:
    return xe.parse({
        "experiment": {"name": "ctr-test", "repeats": 1, "warmup_s": 1, "duet": False, "backend": "docker"},
        "load": {"transport": "grpc", "users": 2, "spawn_rate": 2, "duration_s": 3, **load},
        "servers": [{"server": "xferd-go", "image": image, "limits": limits, "env": env or {}}],
    })


def _one_row(exp: xe.Experiment, run_dir: Path) -> RunRow:
    res = runner.sweep(exp, run_dir)
    report.write_all(run_dir)
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


def _ready_gomaxprocs(client: docker.DockerClient, image: str, cpus: float, env: dict[str, str]) -> tuple[int, int]:
    """gomaxprocs= of xferd-go's ready line in a container limited to `cpus`, and the CFS quota (µs per 100 ms
    period) its cgroup really has."""
    cell = _exp(image, {"cpus": cpus}, {"rate": "1"}, env).cells[0]
    server = ContainerServer(client, cell)
    try:
        cpu_dir = cgroup._paths(server.proc.pid).get("cpu")
        quota = int((cpu_dir / "cpu.cfs_quota_us").read_text()) if cpu_dir else -1
        return int(server.ready["gomaxprocs"]), quota
    finally:
        server.stop()


def test_cpu_limit_reaches_the_go_runtime(client: docker.DockerClient, images: dict[str, str]) -> None:
    """Go >= 1.25 sets GOMAXPROCS from the cgroup CPU limit: ceil(limit), at least 2, at most the CPUs it may
    use. On a 2-CPU machine that rule gives 2 for every limit, the same as no limit: then this test shows the
    quota is in place and the runtime's choice matches the rule, but cannot tell a cgroup-aware runtime from
    an unaware one (BENCHMARKS.md "Containers" says so)."""
    ncpu = len(os.sched_getaffinity(0))
    for cpus in (0.5, 1.5):
        got, quota = _ready_gomaxprocs(client, images["xferd-go"], cpus, {})
        if quota != -1:  # cgroup v1: the quota per 100 ms period
            assert quota == round(cpus * 100_000), quota
        assert got == min(ncpu, max(2, math.ceil(cpus))), (cpus, got)
    pinned, _ = _ready_gomaxprocs(client, images["xferd-go"], 1.5, {"GOMAXPROCS": "1"})
    assert pinned == 1  # the field is the runtime's live value, not a constant
