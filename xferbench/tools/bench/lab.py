"""The lab path of `make bench`: two network-namespace hosts of scripts/lab.sh (the server host and a load host,
on the lab's bridge), brought up on the first use in a sitting and torn down at its end. Through it a transfer
crosses two veth pairs and a bridge, as a packet between two machines crosses their NICs and a switch, but on
one kernel and with no wire: the figure says what the path costs beside loopback, not what a network does."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from xferbench.config.files import ROOT
from xferbench.tools.bench.tools import BenchError, Route

LAB = ROOT / "scripts" / "lab.sh"
NAME = "xbench"  # its own name and range: a user's lab (lab, 10.77.0) and the tests' labs stay untouched
NET = "10.76.0"
TIMEOUT_S = 60.0


@dataclass(frozen=True)
class BenchLab:
    dir: Path

    @property
    def route(self) -> Route:
        """The server on host 1, its clients on host 2; each process keeps the bench's own CPU pinning (no cpuset)."""
        return Route(f"{NET}.2", f"{NAME}1", f"{NAME}2")

    @classmethod
    def up(cls, tmp: Path) -> BenchLab:
        if os.geteuid() != 0:
            raise BenchError("the lab case needs root (network namespaces, a bridge): run as root, or leave it out "
                             "with --cases")
        lab = cls(tmp / "lab")
        _lab_sh("up", "--name", NAME, "--net", NET, "--hosts", "2", "--dir", str(lab.dir), "--no-cpuset", "--force")
        return lab

    def down(self) -> None:
        _lab_sh("down", "--name", NAME, "--dir", str(self.dir))


def _lab_sh(*args: str) -> None:
    r = subprocess.run(["bash", str(LAB), *args], capture_output=True, text=True, timeout=TIMEOUT_S)
    if r.returncode != 0:
        raise BenchError(f"scripts/lab.sh {args[0]}: {(r.stderr or r.stdout).strip()[-600:]}")
