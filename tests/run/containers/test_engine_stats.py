"""What a container on another host's engine is measured by, checked on this machine's engine against the
container's cgroup read here (xferbench/run/containers/remote.py): the engine's statistics give its CPU, memory and
tasks; the wrapper prints the cgroup's final CPU-period and memory-peak counters as the container ends
(backend.WRAPPER), which become its ctr_* figures. The same readings on a lab host's engine are
tests/run/containers/test_remote_engine.py's."""

from __future__ import annotations

import time

import docker
import pytest

from xferbench import config as xe
from xferbench.measure import cgroup
from xferbench.run.containers.backend import ContainerServer
from xferbench.run.containers.remote import exit_figures, is_podman, stats_figures

MiB = 1 << 20


def test_the_engines_statistics_and_the_wrappers_last_counters_are_the_cgroups(
    client: docker.DockerClient, images: dict[str, str]
) -> None:
    cell = xe.parse(
        {
            "experiment": {"name": "stats", "backend": "docker"},
            "load": {"transport": "grpc"},
            "servers": [{"server": "xferd-go", "image": images["xferd-go"], "limits": {"cpus": 0.2, "memory": "128MiB"}}],
        }
    ).cells[0]
    server = ContainerServer(client, cell)
    try:
        time.sleep(0.3)  # a few of the quota's 100 ms periods, each with the server's start in it
        here = cgroup.figures(server.pid)
        stats = server.container.stats(stream=False, one_shot=True)
        sample, figures = stats_figures(stats, throttling_known=not is_podman(client))
        assert sample is not None, stats
        # CPU by the cgroup's nanosecond clock, memory and tasks: the server's threads and the wrapper's shell
        assert sample.cpu_s > 0 and sample.threads >= 3, sample
        usage, usage_here = figures["ctr_mem_usage_bytes"], here["ctr_mem_usage_bytes"]
        assert usage is not None and usage_here is not None and 0.5 < usage / usage_here < 2, (figures, here)
        assert 0 < sample.rss_bytes <= usage, sample
        periods_before = here["ctr_cpu_periods"]
    finally:
        server.stop()
    got = exit_figures(server.at_exit)
    assert set(got) >= {
        "ctr_cpu_periods",
        "ctr_cpu_throttled_periods",
        "ctr_cpu_throttled_s",
        "ctr_mem_peak_bytes",
        "ctr_mem_failcnt",
    }, server.at_exit
    # Counters of the container's whole life, read as it ended: no lower than the cgroup's earlier readings here.
    assert periods_before is not None and (got["ctr_cpu_periods"] or 0) >= periods_before > 0, (got, periods_before)
    assert (got["ctr_mem_peak_bytes"] or 0) >= usage_here and (got["ctr_mem_peak_bytes"] or 0) < 128 * MiB, got
    assert got["ctr_mem_failcnt"] == 0 and server.oom_kills == 0


def test_an_engine_that_hides_throttling_leaves_it_empty() -> None:
    """Podman 4.3 reports throttling_data as 0 whatever the cgroup says: those figures are left empty, not 0."""
    stats = {
        "memory_stats": {"usage": 8 * MiB},
        "pids_stats": {"current": 7},
        "cpu_stats": {
            "cpu_usage": {"total_usage": 2_000_000_000},
            "throttling_data": {"periods": 0, "throttled_periods": 0, "throttled_time": 0},
        },
    }
    sample, figures = stats_figures(stats, throttling_known=False)
    assert sample is not None and sample.cpu_s == pytest.approx(2.0) and sample.rss_bytes == 8 * MiB
    assert figures["ctr_cpu_periods"] is None and figures["ctr_cpu_throttled_s"] is None
    _, figures = stats_figures(stats)
    assert figures["ctr_cpu_periods"] == 0 and figures["ctr_cpu_throttled_s"] == 0.0
    # Docker on cgroup v1 separates the page cache: its rss is the sample's RSS
    sample, _ = stats_figures({**stats, "memory_stats": {"usage": 8 * MiB, "stats": {"rss": 5 * MiB}}})
    assert sample is not None and sample.rss_bytes == 5 * MiB
    assert stats_figures({**stats, "pids_stats": {"current": 0}})[0] is None  # no task left: the tree is gone
