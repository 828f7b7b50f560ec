"""A lab of network-namespace hosts for one test module (scripts/lab.sh), and what the tests ask of it: its hosts'
names and addresses, the processes in each, an experiment file that reaches them, and that a run left nothing."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.runs import ROOT, processes_mentioning

LAB = ROOT / "scripts" / "lab.sh"


@dataclass(frozen=True)
class Lab:
    name: str
    net: str
    dir: Path

    def host(self, i: int) -> str:
        return f"{self.name}{i}"

    def addr(self, i: int) -> str:
        return f"{self.net}.{1 + i}"

    def namespace_processes(self, i: int) -> list[str]:
        """Every process in host i's network namespace, as "pid: command line"."""
        r = subprocess.run(["ip", "netns", "pids", self.host(i)], capture_output=True, text=True, timeout=10,
                           check=True)
        out = []
        for pid in r.stdout.split():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            except OSError:
                continue
            out.append(f"{pid}: {cmd}")
        return out

    def left_over(self) -> list[str]:
        """What runs on the lab's hosts besides their sshd (the listener, and the session of a check in flight)."""
        return [p for i in (1, 2) for p in self.namespace_processes(i) if not p.split(": ", 1)[1].startswith("sshd")]

    def sessions_here(self) -> list[str]:
        """The runner's ssh sessions to this lab on this machine: they name its ssh_config, which no other lab's do
        (whatever other tests run beside)."""
        return processes_mentioning(str(self.dir / "ssh_config"))

    def wait_nothing_left(self, within_s: float = 20.0) -> None:
        """No process of a run on the hosts (but their sshd) nor here, within `within_s`."""
        deadline = time.monotonic() + within_s
        while self.left_over() or self.sessions_here():
            assert time.monotonic() < deadline, f"left after {within_s:g} s: {self.left_over()} {self.sessions_here()}"
            time.sleep(0.2)


def lab_sh(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(LAB), *args], capture_output=True, text=True, timeout=120)


@contextmanager
def two_hosts_up(prefix: str, second_octet: int, tmp_path_factory: pytest.TempPathFactory,
                 *up_args: str) -> Iterator[Lab]:
    """A lab of two hosts for one module: named `<prefix><worker>a` on 10.<second_octet>.<100 + worker>, so that the
    modules and the pytest-xdist workers never share one (`up_args`: more of lab.sh up's, e.g. "--engine"); always
    torn down."""
    m = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    worker = int(m[1]) if m else 0
    lab = Lab(f"{prefix}{worker}a", f"10.{second_octet}.{100 + worker % 150}", tmp_path_factory.mktemp(prefix) / "lab")
    try:
        up = lab_sh("up", "--name", lab.name, "--net", lab.net, "--hosts", "2", "--dir", str(lab.dir), "--force",
                    *up_args)
        assert up.returncode == 0, f"scripts/lab.sh up: {up.stdout}{up.stderr}"
        yield lab
    finally:
        down = lab_sh("down", "--name", lab.name, "--dir", str(lab.dir))
        assert down.returncode == 0, f"scripts/lab.sh down: {down.stdout}{down.stderr}"


def app_and_gen(lab: Lab) -> str:
    """[hosts] of a server host "app" (the lab's first) and a load host "gen" (its second)."""
    return f'[hosts.app]\nssh = "{lab.host(1)}"\n[hosts.gen]\nssh = "{lab.host(2)}"\n'


def experiment(lab: Lab, tmp_path: Path, hosts: str, load: str = "", servers: str = 'server = "xferd-go"\n') -> Path:
    """An experiment file in a folder beside the lab's, its ssh_config given relative to it (as every path of an
    experiment is read); `hosts` the [hosts.*] tables (their ssh_config added), `load` the [load] keys."""
    folder = tmp_path / "experiments"
    folder.mkdir(exist_ok=True)
    config = os.path.relpath(lab.dir / "ssh_config", folder)
    tables = re.sub(r"^(\[hosts\.[^]]+\])$", rf'\1\nssh_config = "{config}"', hosts, flags=re.M)
    path = folder / "hosts.toml"
    path.write_text('[experiment]\nname = "hosts"\nrepeats = 1\nduet = false\nwarmup_s = 1\n'
                    f'{tables}\n[load]\n{load}\n[[servers]]\n{servers}')
    return path
