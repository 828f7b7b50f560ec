"""A server's container on another host's engine: `[[servers]] host = "NAME"` with `backend = "docker"`, and
`[hosts.NAME] engine = "unix:///PATH"` (the engine's socket there).

- **Before the first cell** (`prepare`): each such host's engine answers through an ssh forward (forward.py); the
  containers that runners of this machine left there when killed outright are removed (and the folders of their
  forwards here); every image its cells use is sent there from this machine's engine unless it has the same image
  id (transfer.py).
- **Each start** (`RemoteContainer`): a forward of its own, open for the container's life; the container created
  and started as on this machine (the same wrapper, limits, ulimits and OOM count), its ports published on the
  host's address as the host check found it, where the load (here or on load hosts) and the scraper connect; its
  cpuset the CPUs the host lets its own processes use (a lab host's cpuset; every CPU of a whole machine), since
  the experiment's server pinning names this machine's CPUs.
- **Measured** by the engine's statistics of the container's cgroup on that host (`tree.TreeOnHost`), read each
  second: CPU in nanoseconds, memory (as RSS: the cgroup's anonymous memory where the engine reports it, else its
  whole usage), tasks. The container's processes are the host's, not this machine's: their context switches, page
  faults and descriptors are not read, and stay empty in the row. Its CPU periods, throttling, memory peak and
  failures are the cgroup's own counters as the container ends, printed by the wrapper inside it (backend.WRAPPER):
  Podman 4.3's statistics report its throttling as 0 and no peak (its cgroup v1 said 21 periods, 12 throttled,
  where they said 0); without that line (a container killed outright) Docker's statistics stand, and for
  Podman the peak is the highest usage of the one-second readings and throttling stays empty.
- **Removed** when it stops, and whatever happens (backend.kill_all removes it through its forward, then closes
  the forwards); a runner killed outright leaves it to the next run's `prepare`.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests.exceptions

from xferbench.analysis.row import Figures
from xferbench.config import Cell, Experiment, Host
from xferbench.measure import tree
from xferbench.run import remote
from xferbench.run.containers import backend, forward, transfer
from xferbench.run.containers.engine import EngineError
from xferbench.run.containers.forward import Forward
from xferbench.run.process import ServerStartError

CLOCK = "the container's cgroup on {host}, as its engine's statistics report it (nanoseconds)"
STATS_MAX_AGE_S = 0.5  # a reading this recent serves the tick's figures and its tree alike: one request a second
# What the engine's statistics cannot say of processes that are another host's: empty in the row, never 0.
NOT_READ: Figures = {
    "procs_peak": None,
    "proc_ctx_switches_per_s": None,
    "proc_page_faults_per_s": None,
    "proc_fds_peak": None,
}
_CPU_LIST = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")


def engine_hosts(exp: Experiment) -> list[Host]:
    """The hosts whose engines run some cell's server, in the experiment's order."""
    if exp.backend != "docker":
        return []
    names = dict.fromkeys(c.host for c in exp.cells if c.host is not None)
    return [exp.hosts[n] for n in names]


def prepare(exp: Experiment, local: docker.DockerClient) -> list[transfer.Sent]:
    """Before the first cell, each engine host's: its engine answers, this machine's dead runners' containers are
    removed there, and every image its cells use is there (sent from `local` when it lacks the id). Raises
    EngineError naming the host."""
    done: list[transfer.Sent] = []

    def say(s: transfer.Sent) -> None:
        print(
            f"xferbench: sent {s.tag} to {s.host}'s engine ({s.bytes / (1 << 20):.0f} MiB, {s.seconds:.0f} s)",
            file=sys.stderr,
            flush=True,
        )

    hosts = engine_hosts(exp)
    if hosts:
        forward.remove_stale()
    for host in hosts:
        fwd = Forward(host)
        try:
            assert fwd.client is not None
            backend.remove_orphans(fwd.client)
            for tag in sorted({backend.image_for(c) for c in exp.cells if c.host == host.name}):
                done.append(transfer.ensure(local, fwd.client, tag, host.describe(), on_send=say))
        except ServerStartError as e:  # image_for: a server with no image of its own
            raise EngineError(str(e)) from None
        finally:
            fwd.close()
    return done


def cpu_list(text: str) -> tuple[int, ...]:
    """ "0-2,5" → (0, 1, 2, 5): the kernel's list format (Cpus_allowed_list)."""
    if not _CPU_LIST.fullmatch(text):
        raise ValueError(f"not a CPU list: {text!r}")
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(out)


def host_cpus(host: Host) -> tuple[int, ...]:
    """The CPUs a process started over the host's ssh may run on: what its containers are pinned to."""
    r = remote.run(host, ["cat", "/proc/self/status"], what="reading its CPUs")
    for line in r.stdout.splitlines():
        key, _, value = line.partition(":")
        if key == "Cpus_allowed_list":
            try:
                return cpu_list(value.strip())
            except ValueError:
                break
    raise remote.RemoteError(f"{host.describe()}: its /proc/self/status gives no Cpus_allowed_list")


def stats_figures(stats: dict[str, Any], throttling_known: bool = True) -> tuple[tree.Sample | None, Figures]:
    """An engine's statistics of a container (the Docker API's, Podman's compatible ones): its tree's sample (None
    when the container has no task left) and its ctr_* figures (`throttling_known` False: an engine that reports
    throttling as 0 whatever it was, whose figures are left empty)."""
    mem = stats.get("memory_stats") or {}
    cpu = stats.get("cpu_stats") or {}
    throttling = (cpu.get("throttling_data") or {}) if throttling_known else {}
    throttled_ns = throttling.get("throttled_time")
    figures: Figures = {
        "ctr_mem_usage_bytes": mem.get("usage"),
        "ctr_mem_peak_bytes": mem.get("max_usage"),
        "ctr_mem_failcnt": mem.get("failcnt"),
        "ctr_cpu_periods": throttling.get("periods"),
        "ctr_cpu_throttled_periods": throttling.get("throttled_periods"),
        "ctr_cpu_throttled_s": throttled_ns / 1e9 if throttled_ns is not None else None,
    }
    tasks = (stats.get("pids_stats") or {}).get("current")
    cpu_ns = (cpu.get("cpu_usage") or {}).get("total_usage")
    usage = mem.get("usage")
    if not tasks or cpu_ns is None or usage is None:
        return None, figures
    detail = mem.get("stats") or {}
    rss = detail.get("rss", detail.get("anon", usage))  # cgroup v1's rss, v2's anon: the usage less page cache
    return tree.Sample(time.time(), cpu_ns / 1e9, int(rss), int(tasks), 0, 0, 0, 0), figures


def exit_figures(at_exit: dict[str, int]) -> Figures:
    """The ctr_* figures of the cgroup's final counters, as the wrapper printed them (backend.WRAPPER)."""
    out: Figures = {}
    if "nr_periods" in at_exit:
        out["ctr_cpu_periods"] = at_exit["nr_periods"]
    if "nr_throttled" in at_exit:
        out["ctr_cpu_throttled_periods"] = at_exit["nr_throttled"]
    if "throttled_time" in at_exit:  # v1: nanoseconds
        out["ctr_cpu_throttled_s"] = at_exit["throttled_time"] / 1e9
    elif "throttled_usec" in at_exit:  # v2
        out["ctr_cpu_throttled_s"] = at_exit["throttled_usec"] / 1e6
    if "mem_peak" in at_exit:
        out["ctr_mem_peak_bytes"] = at_exit["mem_peak"]
    if "failcnt" in at_exit:
        out["ctr_mem_failcnt"] = at_exit["failcnt"]
    return out


def is_podman(client: docker.DockerClient) -> bool:
    """Whether the engine is Podman (its /version names a "Podman Engine" component)."""
    components = client.version().get("Components") or []
    return any("podman" in str(c.get("Name", "")).lower() for c in components)


class RemoteContainer(backend.ContainerServer):
    """A cell's server in a container on `host`'s engine, published on `address` (the host's, as the host check
    found it): the runner's ServerHandle, as ContainerServer is on this machine's engine."""

    def __init__(self, cell: Cell, host: Host, address: str, log_path: Path | None, run_label: str = "") -> None:
        self.host = host
        self.publish_at = address
        self._last: tuple[float, tree.Sample | None] | None = None
        self._peak: int | None = None
        try:
            self.forward = Forward(host)
            assert self.forward.client is not None
            self._throttling_known = not is_podman(self.forward.client)
            cpus = host_cpus(host)
        except (EngineError, remote.RemoteError, docker.errors.DockerException, requests.exceptions.RequestException) as e:
            if hasattr(self, "forward"):
                self.forward.close()
            raise ServerStartError(" ".join(str(e).split()), []) from None
        try:
            super().__init__(self.forward.client, cell, log_path, cpus, run_label=run_label)
        except BaseException:
            self.forward.close()
            raise
        self.ready["host"] = host.name

    def _measure(self, wrapper_pid: int) -> None:
        self._pid = wrapper_pid  # its pid on the host: the wrapper's, whose children this machine cannot list
        # The container's cgroup, in nanoseconds: no tick to bound its CPU by.
        self.tree = tree.TreeOnHost(CLOCK.format(host=self.host.describe()), lambda: self.pid, self.read_stats,
                                    step_s=None)

    def read_stats(self, max_age_s: float = STATS_MAX_AGE_S) -> tree.Sample | None:
        """The container's sample now (a reading younger than `max_age_s` serves again); its ctr_* figures kept."""
        now = time.monotonic()
        if self._last is not None and now - self._last[0] < max_age_s:
            return self._last[1]
        try:
            stats = self.container.stats(stream=False, one_shot=True)
        except (docker.errors.DockerException, requests.exceptions.RequestException, ValueError):
            return None
        if not isinstance(stats, dict):
            return None
        sample, figures = stats_figures(stats, self._throttling_known)
        if sample is not None:
            usage = figures.get("ctr_mem_usage_bytes")
            if usage is not None:
                self._peak = max(self._peak or 0, int(usage))
            self.figures = {**figures, "ctr_mem_peak_bytes": figures.get("ctr_mem_peak_bytes") or self._peak}
        self._last = (now, sample)
        return sample

    def sample(self) -> None:
        if self.alive():
            self.read_stats()

    def row_figures(self) -> Figures:
        return {**super().row_figures(), **exit_figures(self.at_exit), **NOT_READ}

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "host": self.host.name, "engine": self.host.engine}

    def _remove(self) -> None:
        super()._remove()
        self.forward.close()


def start(cell: Cell, host: Host, address: str, log_path: Path | None, run_label: str = "") -> RemoteContainer:
    """The cell's server in a container on `host`'s engine, its ports published on `address`."""
    return RemoteContainer(cell, host, address, log_path, run_label)
