"""A server's cgroup: the set of processes the kernel counts as one, however the server forks.

Two uses:

- **Every host server in a cgroup of its own** (`Cgroup.create`, placed by the child before it runs the
  server's first instruction: xferbench/run/process.py). Its CPU is the kernel's own clock for the group,
  in nanoseconds (cgroup v1 `cpuacct.usage`, v2 `cpu.stat` usage_usec), counting every process and thread the
  server ever had, exited ones included; its members are read from `cgroup.procs`. It is killed and removed
  when the server stops (`destroy`), and by `destroy_all` when the runner exits or is interrupted; a runner
  killed outright leaves its groups to the next runner's `sweep_orphans` (the runner's pid is in the name).
- **A container's figures** (`figures`), from the cgroup the engine made: memory usage and peak, CPU
  throttling, OOM kills. Read from the host rather than the engine's stats API: Podman's Docker-compatible
  stats leave the throttling figures empty, and the files are what the kernel itself counts.

cgroup v1 (this machine's hybrid layout: one hierarchy per controller) and v2 (one unified hierarchy) alike.
A new group is made below the runner's own group in each hierarchy, so a runner inside a container or a
systemd slice stays inside it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from xferbench.analysis.row import Figures
from xferbench.measure import procfs

CGROUP_ROOT = Path("/sys/fs/cgroup")
PREFIX = "xferbench-"
V2 = ""  # the controller key of the unified hierarchy
# v1: cpuacct is what counts CPU and lists the members; memory gives the group's exact peak when mounted.
V1_CONTROLLERS = ("cpuacct", "memory")
KILL_WAIT_S = 5.0

_owned: set[Cgroup] = set()
_owned_lock = threading.Lock()
_serial = itertools.count(1)
_swept = False


def mounts(text: str | None = None) -> dict[str, Path]:
    """Controller → the mount point of its hierarchy (V2 for the unified one), from /proc/self/mounts."""
    if text is None:
        text = Path("/proc/self/mounts").read_text()
    out: dict[str, Path] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        if fields[2] == "cgroup2":
            out.setdefault(V2, Path(fields[1]))
        elif fields[2] == "cgroup":
            for opt in fields[3].split(","):
                out.setdefault(opt, Path(fields[1]))
    return out


def membership(pid: int | str = "self") -> dict[str, str]:
    """Controller → the process's path inside that hierarchy (V2 for the unified one), from /proc/PID/cgroup."""
    out: dict[str, str] = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, ctls, rel = line.split(":", 2)
        for ctl in ctls.split(",") if ctls else [V2]:
            out[ctl.removeprefix("name=")] = rel
    return out


@dataclass(frozen=True)
class Cgroup:
    """One group: its directory in each hierarchy that counts it (controller → directory; V2 alone on v2)."""

    dirs: tuple[tuple[str, Path], ...]

    @property
    def by_controller(self) -> dict[str, Path]:
        return dict(self.dirs)

    @property
    def version(self) -> str:
        return "v1" if "cpuacct" in self.by_controller else "v2"

    @property
    def _members_dir(self) -> Path:
        d = self.by_controller
        return d.get("cpuacct") or d.get(V2) or self.dirs[0][1]

    @property
    def clock(self) -> str:
        """Where its CPU time comes from, for the report."""
        return "cgroup v1 cpuacct.usage (ns)" if self.version == "v1" else "cgroup v2 cpu.stat usage_usec"

    # ---- reading ---------------------------------------------------------------------------------------

    def cpu_ns(self) -> int | None:
        """CPU time of every process the group ever held, exited ones included; None once it is gone."""
        if self.version == "v1":
            return _int(self._members_dir / "cpuacct.usage")
        usec = _keyed(self._members_dir / "cpu.stat").get("usage_usec")
        return usec * 1000 if usec is not None else None

    def pids(self) -> list[int]:
        """Its processes now (threads are not listed; each process's count of them is in /proc)."""
        try:
            text = (self._members_dir / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    # ---- owning ----------------------------------------------------------------------------------------

    @staticmethod
    def create(label: str) -> Cgroup | None:
        """A new empty group below this runner's own, named for the runner and `label`; None where this machine
        gives none to make (no cgroup file system, cpuacct not mounted, no permission), which the caller
        reports. XFERBENCH_CGROUP=off asks for none."""
        if os.environ.get("XFERBENCH_CGROUP", "").lower() in ("off", "0", "no"):
            return None
        global _swept
        if not _swept:
            _swept = True
            sweep_orphans()
        name = f"{PREFIX}{os.getpid()}-{next(_serial)}-{re.sub(r'[^A-Za-z0-9_.-]', '_', label)[:40]}"
        try:
            where = _parents()
        except OSError:
            return None
        made: list[tuple[str, Path]] = []
        for ctl, parent in where:
            try:
                (parent / name).mkdir()
            except OSError:
                if ctl in ("cpuacct", V2):  # what counts the CPU: without it there is no group to use
                    _rmdirs([d for _, d in made])
                    return None
                continue  # memory is optional: the peak is then the /proc samples'
            made.append((ctl, parent / name))
        if not made:
            return None
        cg = Cgroup(tuple(made))
        with _owned_lock:
            _owned.add(cg)
        return cg

    def enter(self) -> None:
        """Moves the calling process into the group: called in the child between fork and exec, so the server's
        first instruction is already counted."""
        pid = str(os.getpid())
        for _, d in self.dirs:
            with open(d / "cgroup.procs", "w", encoding="ascii") as f:
                f.write(pid)

    def destroy(self) -> None:
        """Kills whatever is left in the group (a child that left the server's process group, a daemonised
        worker) and removes it."""
        deadline = time.monotonic() + KILL_WAIT_S
        while (left := self.pids()) and time.monotonic() < deadline:
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)  # a SIGKILLed process leaves the group on its exit, a moment later; bounded above
        _rmdirs([d for _, d in self.dirs])
        with _owned_lock:
            _owned.discard(self)


def _parents() -> list[tuple[str, Path]]:
    """(controller, this runner's own group's directory) for each hierarchy a server's group is made in: the
    unified one on a pure v2 machine, else cpuacct and memory of v1."""
    mnt, mine = mounts(), membership()
    if "cpuacct" not in mnt and V2 in mnt and mnt[V2] == CGROUP_ROOT:
        return [(V2, mnt[V2] / mine[V2].lstrip("/"))]
    return [(c, mnt[c] / mine[c].lstrip("/")) for c in V1_CONTROLLERS if c in mnt and c in mine]


def _rmdirs(dirs: list[Path]) -> None:
    for d in dirs:
        with contextlib.suppress(FileNotFoundError):
            try:
                d.rmdir()
            except OSError:  # EBUSY: a member that has not quite exited; once more after a moment
                time.sleep(0.1)
                with contextlib.suppress(OSError):
                    d.rmdir()


def destroy_all() -> None:
    """Every group this runner made and has not removed (atexit, Ctrl-C, SIGTERM)."""
    with _owned_lock:
        owned = list(_owned)
    for cg in owned:
        cg.destroy()


def sweep_orphans() -> list[Path]:
    """Removes the groups of runners that no longer live (killed outright, so nothing of theirs ran at exit),
    killing what is left in them; returns their directories."""
    try:
        where = _parents()
    except OSError:
        return []
    gone: list[Path] = []
    for ctl, parent in where:
        for d in parent.glob(f"{PREFIX}*"):
            owner = d.name[len(PREFIX):].split("-", 1)[0]
            if owner.isdigit() and not procfs.pid_alive(int(owner)):
                Cgroup(((ctl, d),)).destroy()
                gone.append(d)
    return gone


def of_pid(pid: int) -> Cgroup | None:
    """The group a process is in (a container's, made by its engine), in the hierarchies that count CPU and
    memory; None when the process is gone or no such hierarchy is mounted."""
    try:
        mnt, mine = mounts(), membership(pid)
    except OSError:
        return None
    dirs = [(c, mnt[c] / mine[c].lstrip("/")) for c in V1_CONTROLLERS if c in mnt and c in mine]
    if not any(c == "cpuacct" for c, _ in dirs):
        if V2 not in mnt or V2 not in mine:
            return None
        dirs = [(V2, mnt[V2] / mine[V2].lstrip("/"))]
    return Cgroup(tuple(dirs))


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


# ---- a container's own figures --------------------------------------------------------------------------


def _paths(pid: int) -> dict[str, Path]:
    """Controller → the process's cgroup directory (V2 is the unified hierarchy)."""
    mnt = mounts()
    out: dict[str, Path] = {}
    for ctl, rel in membership(pid).items():
        base = mnt.get(ctl)
        if base is not None:
            out[ctl] = base / rel.lstrip("/")
    return out


def figures(pid: int) -> Figures:
    """ctr_* figures of the container whose init process is `pid`; {} when its cgroup is gone."""
    try:
        paths = _paths(pid)
    except OSError:
        return {}
    mem, cpu = paths.get("memory"), paths.get("cpu")
    if mem is not None and mem.is_dir():  # v1
        oom = _keyed(mem / "memory.oom_control")
        out: Figures = {
            "ctr_mem_usage_bytes": _int(mem / "memory.usage_in_bytes"),
            "ctr_mem_peak_bytes": _int(mem / "memory.max_usage_in_bytes"),
            "ctr_mem_failcnt": _int(mem / "memory.failcnt"),
            "ctr_oom_kills": oom.get("oom_kill"),
        }
        stat = _keyed(cpu / "cpu.stat") if cpu is not None else {}
        throttled_ns = stat.get("throttled_time")
    else:
        unified = paths.get(V2)
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
