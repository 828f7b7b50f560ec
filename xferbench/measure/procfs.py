"""What the kernel says one process holds: resident memory, threads and open descriptors, its CPU time, context
switches and page faults, from /proc/PID; the CPUs' idle time and the TCP tables.

Read directly rather than from the server's /metrics, so every server is measured the same way whichever
metrics source the run uses (xferbench/measure/tree.py sums them over a server's processes); every reader
returns None once the process is gone.
"""

from __future__ import annotations

import contextlib
import os


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (another user's process counts: it exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running(pid: int) -> bool:
    """Whether the process exists and has not exited (a zombie waiting to be reaped has no maps, no environment)."""
    return pid_alive(pid) and not status(pid).get("State", "").startswith("Z")


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


def status(pid: int | str) -> dict[str, str]:
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


# ---- one process's counters (xferbench/measure/tree.py sums them over a server's processes) ----------------


def stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name, from the state on (field 3 of proc(5) is [0]); None once
    the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()  # the name may hold spaces and parentheses: skip past it
    return fields if len(fields) >= 22 else None


def cpu_s(fields: list[str], children: bool = False) -> float:
    """utime + stime (proc(5) fields 14 and 15), every thread, in seconds; with `children`, also the CPU of the
    children it has waited for (cutime + cstime, fields 16 and 17)."""
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process so far; None once it is gone."""
    fields = stat(pid)
    return cpu_s(fields) if fields is not None else None


def switches(pid: int) -> int:
    """Context switches of the live threads: status counts them per thread, so every task's is summed (a thread
    that has ended takes its count along)."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        st = status(f"{pid}/task/{tid}")
        total += sum(int(v) for k in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")
                     if (v := st.get(k, "")).isdigit())
    return total


def environ(pid: int) -> dict[str, str] | None:
    """/proc/PID/environ as a dict (the environment the process started with); None once it is gone."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    out = {}
    for item in raw.split(b"\0"):
        k, sep, v = item.partition(b"=")
        if sep:
            out[k.decode(errors="replace")] = v.decode(errors="replace")
    return out


def exe(pid: int) -> str | None:
    with contextlib.suppress(OSError):
        return os.readlink(f"/proc/{pid}/exe")
    return None


# ---- TCP sockets (/proc/net/tcp, /proc/net/tcp6) ----------------------------------------------------------

TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
TCP_TIME_WAIT = 0x06  # include/net/tcp_states.h


def tcp_sockets(text: str) -> list[tuple[int, int, int]]:
    """(local port, remote port, state) of every socket of a /proc/net/tcp or tcp6 table. Addresses are
    ADDR:PORT with the port in hex, the state a hex number (06 = TIME_WAIT); the first line is the header."""
    out = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 4:
            continue
        try:
            out.append((int(fields[1].rpartition(":")[2], 16), int(fields[2].rpartition(":")[2], 16),
                        int(fields[3], 16)))
        except ValueError:
            continue
    return out


def time_wait(ports: set[int], tables: tuple[str, ...] = TCP_TABLES) -> int | None:
    """TIME_WAIT sockets of connections to or from `ports`, IPv4 and IPv6. On loopback both ends of a
    connection are in this host's tables: the server's end (local port in `ports`) when the server closed first,
    the client's (remote port in `ports`) when the client did. None when no table could be read."""
    n, read = 0, 0
    for path in tables:
        try:
            with open(path, encoding="ascii") as f:
                text = f.read()
        except OSError:
            continue
        read += 1
        n += sum(1 for lp, rp, st in tcp_sockets(text) if st == TCP_TIME_WAIT and (lp in ports or rp in ports))
    return n if read else None
