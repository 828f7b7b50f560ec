"""What the kernel says a process holds: resident memory, threads and open descriptors, from /proc/PID.

Read directly rather than from the server's /metrics, so both servers are measured the same way whichever
metrics source the run uses; every reader returns None once the process is gone.
"""

from __future__ import annotations

import os


def cpu_idle_steal(cpus: tuple[int, ...]) -> tuple[float, float] | None:
    """Seconds the CPUs have spent idle (idle + iowait) and stolen by the hypervisor so far, from /proc/stat;
    None when a CPU is not listed there."""
    tick = os.sysconf("SC_CLK_TCK")
    want = {f"cpu{c}" for c in cpus}
    idle = steal = 0
    try:
        with open("/proc/stat", encoding="ascii") as f:
            lines = [line.split() for line in f if line.startswith("cpu")]
    except OSError:
        return None
    found = 0
    for fields in lines:
        if fields[0] in want:
            found += 1
            idle += int(fields[4]) + int(fields[5])
            steal += int(fields[8]) if len(fields) > 8 else 0
    return (idle / tick, steal / tick) if found == len(want) else None


def status(pid: int) -> dict[str, str]:
    """/proc/PID/status as {field: value}; empty when the process is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in lines)}


def rss_bytes(st: dict[str, str]) -> int | None:
    """VmRSS ("12345 kB") in bytes."""
    v = st.get("VmRSS", "").split()
    return int(v[0]) * 1024 if v and v[0].isdigit() else None


def threads(st: dict[str, str]) -> int | None:
    v = st.get("Threads", "")
    return int(v) if v.isdigit() else None


def open_fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
