"""Helpers for runner tests: stand-in servers (tests/runner/fakes) and an orphan check over /proc."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import psutil
import pytest

FAKES = Path(__file__).parent / "fakes"
FAKE_LOADGEN = FAKES / "loadgen"


def make_fake_binaries(d: Path) -> dict[str, Path]:
    out = {}
    for name in ("xferd-go", "xferd-c"):
        p = d / name
        # The run folder is on the command line so that the orphan check can find every such process.
        p.write_text(
            f'#!/bin/sh\nexec "{sys.executable}" "{FAKES / "fake_server.py"}" {name} "$@" --tag={d}\n'
        )
        p.chmod(p.stat().st_mode | stat.S_IXUSR)
        out[name] = p
    return out


def processes_mentioning(token: str) -> list[str]:
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info.get("cmdline") or [])
        if token in cmd and p.pid != os.getpid():
            found.append(f"{p.pid}: {cmd}")
    return found


@pytest.fixture
def fake_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("XFERBENCH_LOADGEN", str(FAKE_LOADGEN))
    return make_fake_binaries(tmp_path)
