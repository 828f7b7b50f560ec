"""Helpers for the tests that run xferbench: experiment files, `xferbench run` as a process, the real server
binaries, and orphan checks over /proc."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil

from xferbench import config as xe
from xferbench.run.containers import engine

ROOT = Path(__file__).resolve().parents[2]


def one_round(name: str) -> str:
    """The head of an experiment TOML whose every cell runs once and alone (one round, no duet) over the frame
    transport; [load] is left open, for the test's own load keys and then its [[servers]]."""
    return f'[experiment]\nname = "{name}"\nrepeats = 1\nduet = false\n[load]\ntransport = "frame"\n'


def xferbench_run(*args: str, timeout: float = 180, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m xferbench run ARGS --quick` from the repository root, its output captured as text."""
    return subprocess.run([sys.executable, "-m", "xferbench", "run", *args, "--quick"], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=env)


def experiment_file(path: Path, text: str) -> xe.Experiment:
    """Writes an experiment TOML file and loads it as `xferbench run` would; every binary it names must be
    built (a missing one is a failure, not a skip)."""
    path.write_text(text)
    exp = xe.load_file(path)
    for binary in sorted({c.binary for c in exp.cells}):
        assert Path(binary).exists(), f"{binary} is not built: run `make build` (these tests do not skip)"
    return exp


def processes_mentioning(token: str) -> list[str]:
    """Every live process (but this one) whose command line contains `token`, e.g. a store folder under the
    test's tmp_path that only the servers it started were given."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        cmd = " ".join(p.info.get("cmdline") or [])
        if token in cmd and p.pid != os.getpid() and p.info.get("status") != psutil.STATUS_ZOMBIE:
            found.append(f"{p.pid}: {cmd}")
    return found


def stray_children() -> list[psutil.Process]:
    """This test process's children, but the container engine's API service: whichever test first needs the
    engine starts it as a child of the test process, and it serves every later test (and, under pytest-xdist,
    it belongs to whichever worker ran that test first)."""
    socket = str(engine.SOCKET)
    return [c for c in psutil.Process().children(recursive=True) if socket not in " ".join(_cmdline(c))]


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:  # gone, or a zombie: not the engine
        return []


def running(p: psutil.Process) -> bool:
    """Still there and not a zombie; psutil's is_running() also rejects a recycled pid."""
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
