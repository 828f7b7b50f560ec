"""A Docker-API engine to talk to: DOCKER_HOST when set, else one that already answers, else a Podman API
service this project starts itself (socket, pid file, log and containers.conf under build/podman/).

Why Podman with runc: these machines have no Docker daemon; Podman 4.3's default runtime crun refuses the
hybrid cgroup v1 layout while runc works. The runtime is set in a project-owned containers.conf (through
CONTAINERS_CONF) and on the command line, never in /etc. The service is detached: it outlives the runner, so
the next run finds it answering. `stop_service()` ends it by its pid file (`python -m xferbench.run.containers
--stop`, which `make test` and `make test-slow` end with), and it exits by itself after IDLE_S without a request
(`--time`), so a suite killed before its stop leaves nothing behind for long; the next caller starts it again.

Every failure is an EngineError whose message says, in one line, why no engine can be had.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import requests.exceptions

from xferbench.config import ROOT

PODMAN_DIR = ROOT / "build" / "podman"
SOCKET = PODMAN_DIR / "api.sock"
PID_FILE = PODMAN_DIR / "service.pid"
LOG_FILE = PODMAN_DIR / "service.log"
CONF_FILE = PODMAN_DIR / "containers.conf"
# The engines a machine may already run, tried in order when DOCKER_HOST is unset.
KNOWN_SOCKETS = (Path("/var/run/docker.sock"), Path("/run/podman/podman.sock"))
START_TIMEOUT_S = 30.0
# Seconds without an API request before the service exits (podman's --time; an open connection counts as a
# request): a backstop for a suite that was killed before its own `--stop`. Longer than any pause between two
# container tests of one suite, whose session-wide client would not survive a restart.
IDLE_S = 1800
# A service that is already running may be slow to answer while it holds the storage lock for someone else's
# image build or import (the engine is shared): waited for longer than a fresh start.
BUSY_TIMEOUT_S = 120.0
PING_TIMEOUT_S = 15  # version="auto" asks /version, which Podman 4.3 answered in 3.5-5 s on a loaded 2-core machine
POLL_S = 0.1
# Long enough for a container start or an image import on a loaded machine.
CLIENT_TIMEOUT_S = 300
CONTAINERS_CONF = (
    "# Written by xferbench (xferbench/run/containers/engine.py): crun refuses cgroup v1 here, runc works.\n"
    '[engine]\nruntime = "runc"\n'
)


class EngineError(RuntimeError):
    """No Docker-API engine can be had; the message says why in one line."""


def _client(base_url: str) -> docker.DockerClient:
    # version="auto" asks the engine: Podman 4.3 serves API 1.41, older than the SDK's default.
    return docker.DockerClient(base_url=base_url, version="auto", timeout=CLIENT_TIMEOUT_S)


def _answers(base_url: str) -> docker.DockerClient | None:
    """A client when the engine at base_url answers a ping, else None."""
    try:
        client = docker.DockerClient(base_url=base_url, version="auto", timeout=PING_TIMEOUT_S)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError):
        return None
    client.close()
    return _client(base_url)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def ensure() -> docker.DockerClient:
    """A client of an engine that answers. DOCKER_HOST wins when set (and must answer); otherwise a known
    socket, then this project's own Podman service, started when needed."""
    host = os.environ.get("DOCKER_HOST")
    if host:
        try:
            client = docker.DockerClient(base_url=host, version="auto", timeout=PING_TIMEOUT_S)
            client.ping()
            client.close()
        except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as e:
            raise EngineError(f"DOCKER_HOST={host} does not answer: {_one_line(str(e))}") from e
        return _client(host)
    for sock in (SOCKET, *KNOWN_SOCKETS):
        found = _answers(f"unix://{sock}") if sock.exists() else None
        if found is not None:
            return found
    return start_service()


def why_not_podman() -> str | None:
    """Why this project cannot start its own Podman service here, or None when it can."""
    if shutil.which("podman") is None:
        return "no container engine: DOCKER_HOST is unset and podman is not installed (apt-get install podman runc)"
    if shutil.which("runc") is None:
        return "no container engine: podman is installed but runc is not (apt-get install runc; crun refuses cgroup v1)"
    if os.geteuid() != 0:
        return f"no container engine: DOCKER_HOST is unset and starting podman's API service needs root (uid {os.geteuid()})"
    return why_not_cgroups()


def why_not_cgroups() -> str | None:
    """Why containers here could not be given memory and CPU limits, or None when they can."""
    cg = Path("/sys/fs/cgroup")
    if (cg / "cgroup.controllers").exists():  # unified (v2)
        have = set((cg / "cgroup.controllers").read_text().split())
        missing = {"memory", "cpu"} - have
        return f"cgroup v2 lacks the {' and '.join(sorted(missing))} controller(s): no container limits" if missing else None
    for ctl in ("memory", "cpu"):
        if not (cg / ctl).is_dir() and not (cg / "cpu,cpuacct").is_dir():
            return f"cgroup v1 has no {ctl} hierarchy under {cg}: no container limits"
    return None


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    """One starter at a time per checkout (parallel test processes may all find no engine)."""
    PODMAN_DIR.mkdir(parents=True, exist_ok=True)
    with open(PODMAN_DIR / "start.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def service_pid() -> int | None:
    """The pid of this project's Podman service when its pid file names a live process."""
    try:
        pid = int(PID_FILE.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def start_service(timeout_s: float = START_TIMEOUT_S) -> docker.DockerClient:
    """Starts (or waits for) `podman system service` on build/podman/api.sock and returns a client."""
    if why := why_not_podman():
        raise EngineError(why)
    url = f"unix://{SOCKET}"
    with _lock():
        proc = _spawn_service() if service_pid() is None or not SOCKET.exists() else None
        proc_pid = service_pid()
        if proc is None:
            timeout_s = max(timeout_s, BUSY_TIMEOUT_S)
        deadline = time.monotonic() + timeout_s
        while (client := _answers(url)) is None:
            # Our own child is polled (a dead child is a zombie that kill(pid, 0) still finds).
            if (proc.poll() is not None) if proc else service_pid() is None:
                raise EngineError(f"podman system service exited at once: {_log_tail()}")
            if time.monotonic() > deadline:
                raise EngineError(f"podman system service (pid {proc_pid}) did not answer on {SOCKET} within "
                                  f"{timeout_s:.0f}s: {_log_tail()}")
            time.sleep(POLL_S)
    return client


def service_env() -> dict[str, str]:
    """The environment podman runs with here: the project's containers.conf (runtime runc)."""
    PODMAN_DIR.mkdir(parents=True, exist_ok=True)
    if not CONF_FILE.exists() or CONF_FILE.read_text() != CONTAINERS_CONF:
        CONF_FILE.write_text(CONTAINERS_CONF)
    return {**os.environ, "CONTAINERS_CONF": str(CONF_FILE)}


def _spawn_service() -> subprocess.Popen[bytes]:
    with contextlib.suppress(FileNotFoundError):
        SOCKET.unlink()  # stale: nothing alive serves it
    env = service_env()
    with open(LOG_FILE, "ab") as log:
        # Its own session and no parent-death signal: the service outlives this process on purpose. Its
        # folder is build/podman/: conmon writes an empty file `oom` into its working directory when a
        # container is OOM-killed, which left one at the repository's root.
        proc = subprocess.Popen(
            ["podman", "--runtime", "runc", "system", "service", f"--time={IDLE_S}", f"unix://{SOCKET}"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True, cwd=PODMAN_DIR,
        )
    PID_FILE.write_text(f"{proc.pid}\n")
    return proc


def _log_tail() -> str:
    try:
        lines = [ln for ln in LOG_FILE.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "(no log)"
    return _one_line(lines[-1]) if lines else "(empty log)"


def stop_service(grace_s: float = 10.0) -> bool:
    """Stops this project's Podman service (by its pid file). True when one was running."""
    pid = service_pid()
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while service_pid() is not None and time.monotonic() < deadline:
        time.sleep(POLL_S)
    if service_pid() is not None:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(FileNotFoundError):
        PID_FILE.unlink()
    return True
