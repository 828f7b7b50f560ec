"""scripts/lab.sh: a lab of hosts on this machine, network namespaces on a private bridge, each with its own sshd
and cpuset, with real processes: every host answers ssh with its own name, sees only its own address, reaches the
others and is reached from this machine; what runs on host 1 keeps host 1's CPUs and what runs on host 2 host 2's;
nothing routes out of the lab; and `down` leaves nothing (namespace, link, sshd, cpuset group, folder, firewall
rule), whether the lab is whole, has processes running on it, or was left half-made by an `up` that failed or was
killed. Each test has a lab of its own, named and numbered from the xdist worker and the test, so that two
workers never share a name or a subnet. Needs root."""

from __future__ import annotations

import errno
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "scripts" / "lab.sh"
# One letter and one subnet per test; a new test takes the next entry.
TESTS = ("hosts", "route", "down", "failed", "killed", "force")
PORT = 7000  # free in any lab namespace: nothing else listens there


@dataclass(frozen=True)
class Lab:
    name: str
    net: str
    hosts: int
    dir: Path

    def host(self, i: int) -> str:
        return f"{self.name}{i}"

    def addr(self, i: int) -> str:
        return f"{self.net}.{1 + i}"

    @property
    def bridge(self) -> str:
        return f"{self.name}br0"

    def env(self) -> dict[str, str]:
        """lab.env: what `up` recorded (the cpuset parent among it)."""
        return dict(line.split("=", 1) for line in (self.dir / "lab.env").read_text().splitlines())


def lab_for(test: str, hosts: int, where: Path) -> Lab:
    """This worker's lab for this test: xlab<worker><letter> (at most 15 characters with br0 and v<N>) on
    10.77.<100 + 8 x worker + test>."""
    m = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    worker, k = (int(m[1]) if m else 0), TESTS.index(test)
    return Lab(f"xlab{worker}{'abcdefgh'[k]}", f"10.77.{100 + (worker * 8 + k) % 150}", hosts, where / "lab")


def run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=kw.pop("timeout", 60), **kw)


def lab_sh(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run(["bash", str(LAB), *args], env={**os.environ, **(env or {})})


def up(lab: Lab, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return lab_sh("up", "--name", lab.name, "--net", lab.net, "--hosts", str(lab.hosts), "--dir", str(lab.dir),
                  *extra, env=env)


def down(lab: Lab) -> subprocess.CompletedProcess[str]:
    return lab_sh("down", "--name", lab.name, "--dir", str(lab.dir))


def ssh_argv(lab: Lab, i: int, command: str) -> list[str]:
    return ["ssh", "-F", str(lab.dir / "ssh_config"), lab.host(i), command]


def ssh(lab: Lab, i: int, command: str) -> subprocess.CompletedProcess[str]:
    r = run(ssh_argv(lab, i, command), stdin=subprocess.DEVNULL, timeout=30)
    assert r.returncode == 0, f"ssh {lab.host(i)} {command}: exit {r.returncode}\n{r.stdout}{r.stderr}"
    return r


def started(lab: Lab, i: int, command: str) -> tuple[subprocess.Popen[str], int]:
    """`command` over ssh on host i, left running; its remote pid (a pid of this machine: namespaces of the network
    and the host name only) is the first line it prints."""
    p = subprocess.Popen(ssh_argv(lab, i, f"echo $$; {command}"), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    line = p.stdout.readline()
    assert line.strip().isdigit(), f"ssh {lab.host(i)} printed {line!r}"
    return p, int(line)


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def cpus(text: str) -> set[int]:
    """A CPU list ("0-2,5") as a set."""
    out: set[int] = set()
    for part in filter(None, text.strip().split(",")):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def in_namespace(pid: int, ns: str) -> bool:
    return os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(f"/run/netns/{ns}").st_ino


def cgroup_mounts() -> list[Path]:
    out = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, mnt, fstype, opts, *_ = line.split()
        if fstype == "cgroup2" or (fstype == "cgroup" and "cpuset" in opts.split(",")):
            out.append(Path(mnt))
    return out


def leftovers(lab: Lab, cpuset_parent: str | None = None) -> list[str]:
    """What of the lab is still on this machine."""
    out = []
    for line in run(["ip", "netns", "list"]).stdout.splitlines():
        if re.fullmatch(rf"{lab.name}\d+", line.split()[0]):
            out.append(f"namespace {line.split()[0]}")
    for line in run(["ip", "-o", "link", "show"]).stdout.splitlines():
        link = line.split(": ")[1].split("@")[0]
        if re.fullmatch(rf"{lab.name}(br0|v\d+)", link):
            out.append(f"link {link}")
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            args = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "sshd" in args and f"{lab.dir}/" in args:
            out.append(f"sshd {proc.name}: {args}")
    groups = {m / f"xferbench-{lab.name}" for m in cgroup_mounts()} | ({Path(cpuset_parent)} if cpuset_parent else set())
    out += [f"cpuset group {g}" for g in sorted(groups) if g.exists()]
    if lab.dir.exists():
        out.append(f"folder {lab.dir}")
    if route := run(["ip", "-4", "route", "show", "root", f"{lab.net}.0/24"]).stdout.strip():
        out.append(f"route {route}")
    if shutil.which("iptables") and lab.bridge in run(["iptables", "-w", "-S", "FORWARD"]).stdout:
        out.append(f"iptables rule on {lab.bridge}")
    return out


@pytest.fixture
def new_lab(tmp_path: Path) -> Iterator[Callable[[str, int], Lab]]:
    """Makes this test's Lab (not brought up); whatever the test leaves of it is taken down after."""
    made: list[Lab] = []

    def make(test: str, hosts: int) -> Lab:
        lab = lab_for(test, hosts, tmp_path)
        assert not leftovers(lab), f"lab {lab.name} exists before the test: {leftovers(lab)}"
        made.append(lab)
        return lab

    yield make
    for lab in made:
        down(lab)


def brought_up(lab: Lab) -> Lab:
    r = up(lab)
    assert r.returncode == 0, f"lab.sh up: exit {r.returncode}\n{r.stdout}{r.stderr}"
    return lab


LISTEN = """
import socket, sys
s = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
for _ in range(int(sys.argv[3])):
    c, a = s.accept()
    c.sendall(f"{socket.gethostname()} {a[0]}".encode())
    c.close()
"""
CONNECT = ("import socket, sys; s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5); "
           "print(b''.join(iter(lambda: s.recv(100), b'')).decode())")
# TCP and UDP to addresses outside the lab (TEST-NET-1 and a private one nothing routes): the errno and how long.
PROBE = """
import errno, socket, time
for addr in ("192.0.2.1", "10.255.255.1"):
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        t0 = time.monotonic()
        s = socket.socket(socket.AF_INET, kind)
        s.settimeout(5)
        try:
            s.connect((addr, 9)) if kind == socket.SOCK_STREAM else s.sendto(b"x", (addr, 9))
            print(addr, kind.name, "sent", time.monotonic() - t0)
        except OSError as e:
            print(addr, kind.name, errno.errorcode.get(e.errno, e), time.monotonic() - t0)
"""


def test_three_hosts_answer_reach_each_other_and_keep_their_own_cpus(new_lab: Callable[[str, int], Lab]) -> None:
    lab = brought_up(new_lab("hosts", 3))
    hosts = range(1, lab.hosts + 1)
    assert (lab.dir / "hosts").read_text().splitlines() == [f"{lab.host(i)} {lab.addr(i)}" for i in hosts]
    config = (lab.dir / "ssh_config").read_text()
    for i in hosts:
        assert f"Host {lab.host(i)}\n  HostName {lab.addr(i)}\n" in config

    # Each host: its own name, its own address and nothing else.
    for i in hosts:
        out = ssh(lab, i, "hostname; ip -o -4 addr show; ip -o link show").stdout
        assert out.splitlines()[0] == lab.host(i)
        assert set(re.findall(r"\binet (\S+)", out)) == {"127.0.0.1/8", f"{lab.addr(i)}/24"}, out
        assert {m.split("@")[0] for m in re.findall(r"^\d+: (\S+):", out, re.M)} == {"lo", "eth0"}, out

    # A second up of the same lab is refused, and leaves the lab be.
    again = up(lab)
    assert again.returncode != 0 and "exists" in again.stderr, again.stderr
    assert len(again.stderr.strip().splitlines()) == 1, again.stderr
    ssh(lab, 1, "true")

    # Every host reaches every other one, from its own address, and this machine (the bridge, .1) reaches each.
    for j in hosts:
        listener = subprocess.Popen(ssh_argv(lab, j, f"python3 -c {shlex.quote(LISTEN)} {lab.addr(j)} {PORT} "
                                                     f"{lab.hosts}"),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        assert listener.stdout is not None
        try:
            assert listener.stdout.readline().strip() == "ready"
            for i in hosts:
                if i != j:
                    got = ssh(lab, i, f"python3 -c {shlex.quote(CONNECT)} {lab.addr(j)} {PORT}").stdout.strip()
                    assert got == f"{lab.host(j)} {lab.addr(i)}", f"host {i} → host {j}"
            with socket.create_connection((lab.addr(j), PORT), timeout=5) as s:
                got = b"".join(iter(lambda: s.recv(100), b"")).decode()
            assert got == f"{lab.host(j)} {lab.net}.1", f"this machine → host {j}"
            assert listener.wait(timeout=10) == 0
        finally:
            listener.kill()

    # Host 1 (the server host) has the first half of the lab's CPUs, the others the rest; what runs over ssh on a
    # host is in its cpuset and runs only there.
    groups = {h: (Path(g), cpus(c)) for h, g, c in (line.split() for line in (lab.dir / "cpusets").read_text().splitlines())}
    parent = Path(lab.env()["CPUSET_PARENT"])
    every = cpus(next((parent / f).read_text() for f in ("cpuset.effective_cpus", "cpuset.cpus.effective")
                      if (parent / f).exists()))
    half = max(1, len(every) // 2)
    assert groups[lab.host(1)][1] == set(sorted(every)[:half])
    assert groups[lab.host(2)][1] == groups[lab.host(3)][1] == (set(sorted(every)[half:]) or set(sorted(every)[:half]))
    if len(every) >= 2:
        assert groups[lab.host(1)][1].isdisjoint(groups[lab.host(2)][1])
    sleepers = []
    for i in (1, 2):
        p, pid = started(lab, i, "exec sleep 60")
        sleepers.append((p, pid))
        group, mine = groups[lab.host(i)]
        assert Path(f"/proc/{pid}/cpuset").read_text().strip().endswith(f"/xferbench-{lab.name}/{lab.host(i)}")
        assert str(pid) in (group / "cgroup.procs").read_text().split()
        allowed = re.search(r"^Cpus_allowed_list:\s*(\S+)", Path(f"/proc/{pid}/status").read_text(), re.M)
        assert allowed and cpus(allowed[1]) == mine
        assert os.sched_getaffinity(pid) == mine
        taskset = run(["taskset", "-cp", str(pid)]).stdout
        assert cpus(taskset.rsplit(":", 1)[1]) == mine, taskset

    status = lab_sh("status", "--name", lab.name, "--dir", str(lab.dir))
    assert status.returncode == 0, status.stdout + status.stderr
    for i in hosts:
        assert re.search(rf"^{lab.host(i)}\s+{re.escape(lab.addr(i))}\s+\d+\s+\S+\s+yes$", status.stdout, re.M), \
            status.stdout

    r = down(lab)
    assert r.returncode == 0, r.stderr
    for p, pid in sleepers:
        p.wait(timeout=10)
        assert not alive(pid), f"{pid} (started over ssh) outlived down"
    assert leftovers(lab, str(parent)) == []


def test_nothing_routes_out_of_the_lab(new_lab: Callable[[str, int], Lab]) -> None:
    lab = brought_up(new_lab("route", 1))
    out = ssh(lab, 1, "ip -4 route show; echo --; ip -6 route show").stdout
    v4, v6 = out.split("--\n")
    assert "default" not in out
    assert [line.split()[:3] for line in v4.splitlines()] == [[f"{lab.net}.0/24", "dev", "eth0"]], out
    assert v6.strip() == "", "IPv6 is off inside a host"

    # Outside the lab's subnet, every send fails at once: there is no route to try.
    probes = ssh(lab, 1, f"python3 -c {shlex.quote(PROBE)}").stdout.splitlines()
    assert len(probes) == 4, probes
    for line in probes:
        _addr, _kind, outcome, seconds = line.split()
        assert outcome == errno.errorcode[errno.ENETUNREACH], line
        assert float(seconds) < 1.0, line

    # This machine's side: the bridge has the lab's subnet only, nothing it gets from the lab is routed on (even
    # were a host to add a default route), and no NAT rule names the lab.
    bridge_routes = run(["ip", "-4", "route", "show", "dev", lab.bridge]).stdout.splitlines()
    assert [r.split()[0] for r in bridge_routes] == [f"{lab.net}.0/24"], bridge_routes
    assert Path(f"/proc/sys/net/ipv4/conf/{lab.bridge}/forwarding").read_text().strip() == "0"
    get = run(["ip", "route", "get", "192.0.2.1", "from", lab.addr(1), "iif", lab.bridge])
    assert get.returncode != 0, f"this machine would route a lab host's packet out: {get.stdout}"
    if shutil.which("iptables"):
        assert lab.net not in run(["iptables", "-w", "-t", "nat", "-S"]).stdout


def test_down_kills_what_runs_on_the_hosts_and_leaves_nothing(new_lab: Callable[[str, int], Lab]) -> None:
    lab = brought_up(new_lab("down", 2))
    parent = lab.env()["CPUSET_PARENT"]
    detached = int(ssh(lab, 1, "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!").stdout)
    attached, attached_pid = started(lab, 2, "exec sleep 300")
    # Started in the namespace without ssh (so outside the host's cpuset): down finds it by its namespace.
    direct = subprocess.Popen(["ip", "netns", "exec", lab.host(2), "sleep", "300"])
    try:
        for pid, i in ((detached, 1), (attached_pid, 2)):
            assert alive(pid) and in_namespace(pid, lab.host(i))
        r = down(lab)
        assert r.returncode == 0, r.stderr
        assert direct.wait(timeout=10) == -signal.SIGTERM
        attached.wait(timeout=10)
        for pid in (detached, attached_pid):
            assert not alive(pid), f"{pid} outlived down"
        assert leftovers(lab, parent) == []
    finally:
        direct.kill()
        attached.kill()

    again = down(lab)
    assert again.returncode == 0 and "nothing to remove" in again.stdout, again.stdout + again.stderr


def test_an_up_that_fails_halfway_undoes_what_it_made(new_lab: Callable[[str, int], Lab]) -> None:
    lab = new_lab("failed", 3)
    r = up(lab, env={"XFERBENCH_LAB_FAIL_AFTER": "sshd2"})  # after the cpusets, bridge, namespaces and two sshds
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "sshd2" in lines[0], r.stderr
    assert leftovers(lab) == []


def test_down_clears_an_up_killed_halfway(new_lab: Callable[[str, int], Lab]) -> None:
    lab = new_lab("killed", 3)
    p = subprocess.Popen(["bash", str(LAB), "up", "--name", lab.name, "--net", lab.net, "--hosts", "3",
                          "--dir", str(lab.dir)],
                         env={**os.environ, "XFERBENCH_LAB_HANG_AFTER": "sshd2"}, stdin=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    watchdog = threading.Timer(30, p.kill)
    watchdog.start()
    assert p.stderr is not None
    try:
        line = p.stderr.readline()
        assert "hanging after sshd2" in line, line
        parent = lab.env()["CPUSET_PARENT"]
        made = leftovers(lab, parent)
        assert sum(x.startswith("sshd ") for x in made) == 2 and f"namespace {lab.host(3)}" in made, made
        os.killpg(p.pid, signal.SIGKILL)  # no trap runs: what it made stays
        p.wait(timeout=10)
    finally:
        watchdog.cancel()
        p.kill()

    refused = up(lab)
    assert refused.returncode != 0 and "exists" in refused.stderr, refused.stderr
    status = lab_sh("status", "--name", lab.name, "--dir", str(lab.dir))
    assert status.returncode != 0 and re.search(rf"^{lab.host(3)}\s.*\bno$", status.stdout, re.M), status.stdout
    r = down(lab)
    assert r.returncode == 0, r.stderr
    assert leftovers(lab, parent) == []


def test_up_force_replaces_a_lab_of_the_same_name(new_lab: Callable[[str, int], Lab]) -> None:
    lab = brought_up(new_lab("force", 2))
    old_sshds = [int((lab.dir / lab.host(i) / "sshd.pid").read_text()) for i in (1, 2)]
    sleeper = int(ssh(lab, 1, "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!").stdout)
    r = up(lab, "--force")
    assert r.returncode == 0, r.stderr
    assert not any(alive(pid) for pid in (*old_sshds, sleeper))
    for i in (1, 2):
        assert ssh(lab, i, "hostname").stdout.strip() == lab.host(i)
    parent = lab.env()["CPUSET_PARENT"]
    assert down(lab).returncode == 0
    assert leftovers(lab, parent) == []
