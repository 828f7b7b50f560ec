"""Another host's container engine ([hosts.NAME] engine = "unix:///PATH"), reached through an OpenSSH unix-socket
forward over the host's own ssh: `ssh -N -L LOCAL.sock:PATH TARGET`, with the options of every session of
xferbench/run/remote.py (BatchMode, a bounded connect, keep-alives).

Why a forward: it speaks to Docker's and Podman's sockets alike, needs no TCP port open on the host (an engine's
API is root there), and asks nothing of the host but its sshd. The local end is a socket in a folder of its own
(mode 0700, named after this runner's pid, removed on close); ssh dies with this process (PR_SET_PDEATHSIG), so a
runner killed outright leaves no forward behind, and the next runner removes its folder (`remove_stale`). Every
forward open is in a registry that `close_all()` empties: the container backend's `kill_all` calls it once it has
removed the containers reached through them.

Every failure is an EngineError naming the host and what ssh said last."""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import docker
import docker.errors
import requests.exceptions

from xferbench.config import Host
from xferbench.measure import procfs
from xferbench.run import remote
from xferbench.run.containers.engine import CLIENT_TIMEOUT_S, PING_TIMEOUT_S, POLL_S, EngineError

OPEN_TIMEOUT_S = 20.0  # ssh's connect (remote.CONNECT_TIMEOUT_S) and the first answer through it
# The forward's own options: fail at once when the local socket cannot be bound; only this user may connect to it;
# ssh's INFO level, where it says that a connection through the forward failed ("channel 1: open failed: ...").
SESSION_OPTIONS = tuple("LogLevel=INFO" if o == "LogLevel=ERROR" else o for o in remote.OPTIONS)
FORWARD_OPTIONS = (
    "-N",
    "-o",
    "ExitOnForwardFailure=yes",
    "-o",
    "StreamLocalBindUnlink=yes",
    "-o",
    "StreamLocalBindMask=0177",
)

PREFIX = "xferbench-engine-"
_FOLDER = re.compile(re.escape(PREFIX) + r"(\d+)-\w+")
_open: set[Forward] = set()
_open_lock = threading.Lock()


def _die_with_parent() -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def argv(host: Host, local: Path) -> list[str]:
    """The ssh command line of the forward from `local` to the host's engine socket."""
    assert host.engine_socket is not None, "a host with an engine"
    config = ["-F", host.ssh_config] if host.ssh_config else []
    return [remote.SSH, *SESSION_OPTIONS, *FORWARD_OPTIONS, "-L", f"{local}:{host.engine_socket}", *config, host.ssh]


class Forward:
    """One ssh forward to `host`'s engine, and a Docker client through it; open until `close()`."""

    def __init__(self, host: Host, timeout_s: float = OPEN_TIMEOUT_S) -> None:
        if host.engine is None:
            raise EngineError(f"{host.describe()}: no engine (its [hosts.{host.name}] engine)")
        if host.ssh_config and not Path(host.ssh_config).is_file():
            raise EngineError(f"{host.describe()}: ssh_config {host.ssh_config}: no such file")
        self.host = host
        self.folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))  # 0700
        self.socket = self.folder / "engine.sock"
        self._stderr = open(self.folder / "ssh.log", "w+", encoding="utf-8")
        self.client: docker.DockerClient | None = None
        try:
            self.proc = subprocess.Popen(
                argv(host, self.socket),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        except FileNotFoundError:
            self.close()
            raise EngineError(f"{host.describe()}: no `{remote.SSH}` on this machine (install openssh-client)") from None
        with _open_lock:
            _open.add(self)
        try:
            self.client = self._connect(timeout_s)
        except BaseException:
            self.close()
            raise

    def _said(self) -> str:
        self._stderr.flush()
        self._stderr.seek(0)
        return remote.last_line(self._stderr.read())

    def _connect(self, timeout_s: float) -> docker.DockerClient:
        """Waits for the local socket, then for the engine to answer a ping through it."""
        deadline = time.monotonic() + timeout_s
        where = f"{self.host.describe()}: the engine at {self.host.engine}"
        while not self.socket.exists():
            if self.proc.poll() is not None:
                failed = remote.failure(self.host, self.proc.returncode, self._said(), "ssh -L to its engine")
                raise EngineError(str(failed)) from None
            if time.monotonic() > deadline:
                raise EngineError(f"{where}: ssh made no forward within {timeout_s:g}s: {self._said() or 'no output'}")
            time.sleep(POLL_S)
        url = f"unix://{self.socket}"
        try:
            probe = docker.DockerClient(base_url=url, version="auto", timeout=PING_TIMEOUT_S)
            probe.ping()
            probe.close()
        except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as e:
            raise EngineError(self._why_silent(where, " ".join(str(e).split()))) from None
        return docker.DockerClient(base_url=url, version="auto", timeout=CLIENT_TIMEOUT_S)

    def _why_silent(self, where: str, client_said: str) -> str:
        """Why the engine did not answer: no socket at its path on the host, or what ssh (or the client) said."""
        path = self.host.engine_socket
        try:
            r = remote.run(
                self.host,
                [
                    "sh",
                    "-c",
                    'if [ -S "$1" ]; then echo socket; elif [ -e "$1" ]; then echo other; else echo none; fi',
                    "sh",
                    str(path),
                ],
                what="looking for its socket",
            )
            found = r.stdout.strip()
        except remote.RemoteError as e:
            return f"{where} does not answer through ssh: {self._said() or e}"
        if found == "none":
            return f"{where}: {self.host.name} has no {path} (is its engine's service running?)"
        if found == "other":
            return f"{where}: {path} on {self.host.name} is not a socket"
        return f"{where} does not answer through ssh: {self._said() or client_said}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        """Ends ssh and removes the local socket's folder; a second call does nothing."""
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.close()
            self.client = None
        proc = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._stderr.close()
        shutil.rmtree(self.folder, ignore_errors=True)
        with _open_lock:
            _open.discard(self)


def close_all() -> None:
    """Every forward still open (after the containers reached through them were removed)."""
    with _open_lock:
        forwards = list(_open)
    for f in forwards:
        f.close()


def remove_stale() -> list[Path]:
    """Removes the forwards' folders of runners that no longer live (killed outright: no close ran)."""
    gone = []
    for d in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
        m = _FOLDER.fullmatch(d.name)
        if m and d.is_dir() and int(m[1]) != os.getpid() and not procfs.pid_alive(int(m[1])):
            shutil.rmtree(d, ignore_errors=True)
            gone.append(d)
    return gone


def open_count() -> int:
    with _open_lock:
        return len(_open)
