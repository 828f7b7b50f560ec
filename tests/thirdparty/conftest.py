"""Two servers nobody here wrote, Debian's memcached and etcd (scripts/bootstrap.sh installs them), started on
free loopback ports for the tests that drive them directly, and what their own counters say."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from xferbench.run.process import free_port, port_open, wait_until

ROOT = Path(__file__).resolve().parents[2]
THIRD_PARTY = ROOT / "experiments" / "third-party"
READY_S = 30.0


def program(name: str) -> str:
    """The Debian program's path; missing is a failure (bootstrap installs it), not a skip."""
    path = shutil.which(name)
    assert path, f"{name} is not installed: run scripts/bootstrap.sh (Debian's etcd-server and memcached)"
    return path


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture
def memcached() -> Iterator[int]:
    """A memcached listening on a free loopback port (its port). -u root is read only when run as root, which
    memcached otherwise refuses."""
    port = free_port()
    argv = [program("memcached"), "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", "2", "-m", "64", "-u", "root"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: port_open("127.0.0.1", port), proc, "memcached", READY_S)
        yield port
    finally:
        _stop(proc)


def memcached_stats(port: int) -> dict[str, str]:
    """memcached's `stats`: every STAT line's name and value."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s, s.makefile("rb") as f:
        s.sendall(b"stats\r\n")
        stats = {}
        for _ in range(1000):  # about 80 lines; bounded in case END never comes
            line = f.readline().decode().strip()
            if line == "END" or not line:
                break
            _, name, value = line.split(" ", 2)
            stats[name] = value
        return stats


@dataclass(frozen=True)
class Etcd:
    port: int  # gRPC (client URLs)
    metrics_port: int

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[Etcd]:
    """A one-member etcd on free loopback ports, its data under tmp_path; ready once /health answers 200 (it
    has elected itself leader; its client port opens before that)."""
    port, peer, metrics = free_port(), free_port(), free_port()
    peer_url = f"http://127.0.0.1:{peer}"
    argv = [
        program("etcd"), "--name", "default", "--data-dir", str(tmp_path / "etcd"),
        "--listen-client-urls", f"http://127.0.0.1:{port}", "--advertise-client-urls", f"http://127.0.0.1:{port}",
        "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
        "--initial-cluster", f"default={peer_url}", "--listen-metrics-urls", f"http://127.0.0.1:{metrics}",
    ]  # fmt: skip
    log = (tmp_path / "etcd.log").open("wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: _healthy(f"http://127.0.0.1:{metrics}/health"), proc, "etcd", READY_S)
        yield Etcd(port, metrics)
    finally:
        _stop(proc)
        log.close()


def metric(url: str, series: str) -> float:
    """The value of one series (name and labels exactly as exposed) on a Prometheus text page."""
    with urllib.request.urlopen(url, timeout=5) as resp:
        text = resp.read().decode()
    m = re.search(rf"^{re.escape(series)} (\S+)$", text, re.M)
    assert m, f"{series} is not on {url}"
    return float(m.group(1))


def locust_total(stdout: str) -> tuple[int, int]:
    """(requests, failures) over every entry of Locust's --json statistics, printed once its users have
    stopped (its --csv files are rewritten each second and may miss the last one)."""
    entries = json.loads(stdout)
    return sum(e["num_requests"] for e in entries), sum(e["num_failures"] for e in entries)
