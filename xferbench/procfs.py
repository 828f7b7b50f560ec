"""What the kernel says a process holds: resident memory, threads and open descriptors, from /proc/PID.

Read directly rather than from the server's /metrics, so both servers are measured the same way whichever
metrics source the run uses; every reader returns None once the process is gone.
"""

from __future__ import annotations

import os


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
