"""The watch of a server run on another host ([[servers]] host, xferbench/run/remoteserver.py), run there as
`PYTHON -X MARKER -c <this file's text> SERVER ARGV...` over one ssh session. Sent as text and standard library
only, like the Locust workers' watch (remote_watch.py), with the text of xferbench/measure/hoststat.py before it
(xferbench/run/programs.py): it needs nothing of xferbench on the host.

- It starts the server in a process group of its own, the server's stdout and stderr on its stderr (the ssh
  session's stderr: the runner reads the ready line and keeps the log there), and says {"pid": PID} on stdout.
- It answers each line of stdin on stdout, one JSON object each: "stat" with the server tree's figures from this
  host's /proc (the leader and its live descendants: CPU seconds with the children they reaped, RSS, threads,
  descriptors, context switches, page faults, processes and their pids), and the host's own counters (`host`:
  hoststat.sample()); "maps" with the shared objects each process maps (the allocator preload's check);
  "env KEY..." with each process's value of each KEY in its /proc/PID/environ, null where unset (the Go settings'
  check); "stop GRACE" ends the server: SIGTERM to its group, SIGKILL GRACE seconds later.
- EOF on stdin (the runner closed it, or the ssh session died), SIGTERM, SIGHUP or SIGINT end the server's group
  the same way, with a grace of KILL_AFTER_S.
- When the server exits it says {"exit": STATUS} (negative: the signal that ended it, as Popen says) and exits.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from typing import Any

from xferbench.measure.hoststat import sample

KILL_AFTER_S = 5.0
PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")
_out = threading.Lock()


def say(obj: Any) -> None:
    with _out:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command's name (field 3, the state, is [0])."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def tree(root: int) -> list[int]:
    """The root and its live descendants, by the parent of every process in /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (f := stat_fields(int(name))) is not None:
            children.setdefault(int(f[1]), []).append(int(name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def switches(pid: int) -> int:
    total = 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for ln in f:
                if ln.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    total += int(ln.split()[1])
    except (OSError, ValueError):
        pass
    return total


def fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def figures(root: int) -> dict[str, Any]:
    """The tree's figures now, as xferbench/measure/tree.py's Sample holds them; {"procs": 0} once it is gone."""
    cpu = 0.0
    rss = threads = faults = ctx = nfds = procs = 0
    for pid in tree(root):
        f = stat_fields(pid)
        if f is None or f[0] == "Z":
            continue
        procs += 1
        cpu += sum(int(x) for x in f[11:15]) / TICK  # utime, stime, cutime, cstime
        rss += int(f[21]) * PAGE
        threads += int(f[17])
        faults += int(f[7]) + int(f[9])
        ctx += switches(pid)
        nfds += fds(pid)
    return {"cpu_s": cpu, "rss_bytes": rss, "threads": threads, "ctx_switches": ctx, "page_faults": faults,
            "fds": nfds, "procs": procs, "pids": sorted(tree(root))}


def maps(root: int) -> dict[str, list[str]]:
    """The shared objects each process of the tree maps."""
    out: dict[str, list[str]] = {}
    for pid in tree(root):
        try:
            with open(f"/proc/{pid}/maps") as f:
                libs = {ln.split()[-1] for ln in f if ".so" in ln and ln.split()[-1].startswith("/")}
        except OSError:
            continue
        out[str(pid)] = sorted(libs)
    return out


def environ(root: int, keys: list[str]) -> dict[str, dict[str, str | None]]:
    """Each process's value of each of `keys` in its environment (None where unset)."""
    out: dict[str, dict[str, str | None]] = {}
    for pid in tree(root):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                pairs = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        env = dict(p.split("=", 1) for p in pairs if "=" in p)
        out[str(pid)] = {k: env.get(k) for k in keys}
    return out


class Watch:
    """The server's process group, and how it is ended."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=2, start_new_session=True)

    def kill(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except OSError:
            pass

    def end(self, grace_s: float = KILL_AFTER_S) -> None:
        """SIGTERM to the group now, SIGKILL `grace_s` later."""
        self.kill(signal.SIGTERM)
        t = threading.Timer(grace_s, self.kill, (signal.SIGKILL,))
        t.daemon = True
        t.start()

    def answer(self) -> None:
        """The lines of stdin; its end (EOF) ends the server."""
        for line in sys.stdin:
            word = line.split()
            if word == ["stat"]:
                say({**figures(self.proc.pid), "host": sample()})
            elif word == ["maps"]:
                say({"maps": maps(self.proc.pid)})
            elif word[:1] == ["env"]:
                say({"env": environ(self.proc.pid, word[1:])})
            elif word[:1] == ["stop"]:
                self.end(float(word[1]) if len(word) > 1 else KILL_AFTER_S)
        self.end()


def main() -> None:
    watch = Watch(sys.argv[1:])
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, lambda *_: watch.end())
    say({"pid": watch.proc.pid})
    threading.Thread(target=watch.answer, daemon=True).start()
    code = watch.proc.wait()
    watch.kill(signal.SIGKILL)  # what the server forked and left behind
    say({"exit": code})
    sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
