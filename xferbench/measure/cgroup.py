"""A container's own figures from its cgroup files, found through its init process's /proc/PID/cgroup: memory
usage and peak, CPU periods and throttling, OOM kills. cgroup v1 (this machine's hybrid layout) and v2.

Read from the host rather than the engine's stats API: Podman's Docker-compatible stats leave the throttling
figures empty, and the files are what the kernel itself counts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _paths(pid: int) -> dict[str, Path]:
    """Controller → the process's cgroup directory ("" is the v2 unified hierarchy)."""
    out: dict[str, Path] = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, ctls, rel = line.split(":", 2)
        for ctl in ctls.split(",") if ctls else [""]:
            base = CGROUP_ROOT / ctl if ctl else (CGROUP_ROOT / "unified" if (CGROUP_ROOT / "unified").is_dir()
                                                 else CGROUP_ROOT)
            out[ctl] = base / rel.lstrip("/")
    return out


def _int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _keyed(path: Path) -> dict[str, int]:
    try:
        return {k: int(v) for k, v in (ln.split()[:2] for ln in path.read_text().splitlines() if ln.strip())}
    except (OSError, ValueError):
        return {}


def figures(pid: int) -> dict[str, Any]:
    """ctr_* figures of the container whose init process is `pid`; {} when its cgroup is gone."""
    try:
        paths = _paths(pid)
    except OSError:
        return {}
    mem, cpu = paths.get("memory"), paths.get("cpu")
    if mem is not None and mem.is_dir():  # v1
        oom = _keyed(mem / "memory.oom_control")
        out: dict[str, Any] = {
            "ctr_mem_usage_bytes": _int(mem / "memory.usage_in_bytes"),
            "ctr_mem_peak_bytes": _int(mem / "memory.max_usage_in_bytes"),
            "ctr_mem_failcnt": _int(mem / "memory.failcnt"),
            "ctr_oom_kills": oom.get("oom_kill"),
        }
        stat = _keyed(cpu / "cpu.stat") if cpu is not None else {}
        throttled_ns = stat.get("throttled_time")
    else:
        unified = paths.get("")
        if unified is None:
            return {}
        events = _keyed(unified / "memory.events")
        out = {
            "ctr_mem_usage_bytes": _int(unified / "memory.current"),
            "ctr_mem_peak_bytes": _int(unified / "memory.peak"),
            "ctr_mem_failcnt": events.get("max"),
            "ctr_oom_kills": events.get("oom_kill"),
        }
        stat = _keyed(unified / "cpu.stat")
        usec = stat.get("throttled_usec")
        throttled_ns = usec * 1000 if usec is not None else None
    out["ctr_cpu_periods"] = stat.get("nr_periods")
    out["ctr_cpu_throttled_periods"] = stat.get("nr_throttled")
    out["ctr_cpu_throttled_s"] = throttled_ns / 1e9 if throttled_ns is not None else None
    return out
