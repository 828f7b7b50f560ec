"""The host check's probe (xferbench/run/hostcheck.py), run on a host as `PYTHON -c <this file's text> ROOT` from
ROOT: it must run where xferbench does not import (that is one thing it checks), so it imports the standard
library only, and is sent as text rather than imported there.

Its first line is a JSON object: the facts, or {"error"}. Then it answers each line of stdin: "t" with its clock,
"connect ADDR PORT TIMEOUT" with {"ok"} or {"error"}, "end SECONDS" with the idle CPUs over the session (at least
SECONDS), after which it exits.

As `PYTHON -c <this file's text> --clock` (the clock measured again when a sweep ends, hostcheck.end_clocks) it
imports nothing, and its first line is {"clock": true}; then the same exchanges.
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import socket
import subprocess
import sys
import time
from types import ModuleType
from typing import Any

MODULES = ("locust", "loadgen", "xferbench")


def stat(mine: set[int]) -> dict[str, tuple[float, float]]:
    """Each CPU this process may use: (all its time, its idle and iowait time), from /proc/stat."""
    out = {}
    with open("/proc/stat") as f:
        for ln in f:
            w = ln.split()
            if w and w[0].startswith("cpu") and w[0][3:].isdigit() and int(w[0][3:]) in mine:
                v = [float(x) for x in w[1:9]]
                out[w[0]] = (sum(v), v[3] + v[4])
    return out


def say(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def describe(root: str) -> str | None:
    """The checkout's `git describe --always --dirty`, None outside one."""
    try:
        r = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=root, capture_output=True, text=True,
                           timeout=30)
        return r.stdout.strip() if r.returncode == 0 else None
    except Exception:
        return None


def package_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("xferbench")
    except Exception:
        return None


def cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                key, _, value = ln.partition(":")
                if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return None


def facts(root: str, mine: set[int], mods: dict[str, ModuleType]) -> dict[str, Any]:
    loadgen_file = mods["loadgen"].__file__ or ""
    return {"hostname": platform.node(), "kernel": platform.release(), "cpu_model": cpu_model() or platform.machine(),
            "cpus": len(mine), "python": sys.executable, "python_version": platform.python_version(),
            "locust": getattr(mods["locust"], "__version__", None), "describe": describe(root),
            "package": package_version(), "loadgen": os.path.dirname(loadgen_file),
            "ssh_connection": os.environ.get("SSH_CONNECTION", "")}


def answer(mine: set[int], t0: float, s0: dict[str, tuple[float, float]]) -> None:
    """The exchanges of stdin, until "end" or EOF."""
    for line in sys.stdin:
        word = line.split()
        if not word:
            continue
        if word[0] == "t":
            say(time.time())
        elif word[0] == "connect":
            try:
                socket.create_connection((word[1], int(word[2])), timeout=float(word[3])).close()
                say({"ok": True})
            except OSError as e:
                say({"error": str(e) or type(e).__name__})
        elif word[0] == "end":
            time.sleep(max(0.0, float(word[1]) - (time.monotonic() - t0)))
            s1 = stat(mine)
            free = [(s1[c][1] - s0[c][1]) / (s1[c][0] - s0[c][0]) for c in s1 if c in s0 and s1[c][0] > s0[c][0]]
            say({"cpus_free": sum(free) if free else None})
            break


def main() -> None:
    root = sys.argv[1]
    mine = os.sched_getaffinity(0)
    t0, s0 = time.monotonic(), stat(mine)
    if root == "--clock":
        say({"clock": True})
        answer(mine, t0, s0)
        return
    mods: dict[str, ModuleType] = {}
    for name in MODULES:
        try:
            mods[name] = importlib.import_module(name)
        except BaseException as e:
            say({"error": f"cannot import {name}: {type(e).__name__}: {e}".strip()})
            sys.exit(0)
    say(facts(root, mine, mods))
    answer(mine, t0, s0)


if __name__ == "__main__":
    main()
