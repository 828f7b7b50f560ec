"""Child processes: the server under test and the load generator (xferbench/run/generators.py), each in its own
process group, never orphaned.

- Readiness is the server's `<name> ready key=value ...` stderr line (proto/PROTOCOL.md), read with a
  deadline; a generator's readiness is its metrics port answering, polled with a deadline.
- Every child starts in a new session (its own process group; the terminal's Ctrl-C does not reach it, the
  runner stops it) with PR_SET_PDEATHSIG=SIGKILL, so even a runner killed with SIGKILL takes its direct
  children along. Stopping sends SIGTERM to the whole group, then SIGKILL after a grace period.
- Every live child is in a registry that `kill_all()` (atexit and signal handlers) empties.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import ctypes
import os
import random
import selectors
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from xferbench.analysis.row import Figures
from xferbench.config.files import ROOT
from xferbench.measure import cgroup, tree
from xferbench.measure.cgroup import Cgroup

READY_TIMEOUT_S = 30.0
STOP_GRACE_S = 10.0
REAP_LIMIT_S = 60.0  # after SIGKILL: see stop()
TAIL_LINES = 40
POLL_S = 0.05  # readiness poll interval

_live: set[subprocess.Popen[bytes]] = set()
_live_lock = threading.Lock()


def _preexec(cpus: Sequence[int] | None, die_with_parent: bool, group: Cgroup | None) -> Callable[[], None]:
    def fn() -> None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD)  # spawn held them in the parent; the program gets them
        if group is not None:
            group.enter()  # before exec: the program's first instruction is counted
        if die_with_parent:
            with contextlib.suppress(Exception):
                libc = ctypes.CDLL(None, use_errno=True)
                libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if cpus:
            os.sched_setaffinity(0, set(cpus))

    return fn


def spawn(
    argv: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    stdin: int | IO[Any] | None = subprocess.DEVNULL,
    stdout: int | IO[Any] | None = subprocess.DEVNULL,
    stderr: int | IO[Any] | None = subprocess.PIPE,
    cpus: Sequence[int] | None = None,
    detach: bool = False,
    group: Cgroup | None = None,
) -> subprocess.Popen[bytes]:
    """Starts a child in its own session (and in `group`, from its first instruction). `detach`: a service meant
    to outlive this process (`xferbench stack up`'s Prometheus): no parent-death signal, and not in the registry
    that `kill_all` empties. `stdin`: a pipe for an ssh session of a Locust worker on another host, whose remote
    side ends the worker when the runner closes it, or dies (xferbench/run/generators.py)."""
    # Ctrl-C and SIGTERM are held while the child is forked and registered: a KeyboardInterrupt raised inside
    # Popen (the child still in its pre-exec steps, a cgroup write among them) would leave a child that no
    # registry knows of and that may outlive the runner. They are delivered as soon as the child is registered.
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        proc = _popen(argv, env, cwd, stdout, stderr, cpus, detach, group, stdin)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    return proc


_HELD = {signal.SIGINT, signal.SIGTERM}


def _popen(argv: Sequence[str], env: dict[str, str] | None, cwd: str | Path | None, stdout: int | IO[Any] | None,
           stderr: int | IO[Any] | None, cpus: Sequence[int] | None, detach: bool, group: Cgroup | None,
           stdin: int | IO[Any] | None = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        list(argv),
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        env=env,
        cwd=cwd,
        start_new_session=True,
        preexec_fn=_preexec(cpus, die_with_parent=not detach, group=group),
    )
    if not detach:
        with _live_lock:
            _live.add(proc)
    return proc


def wait_until(
    ready: Callable[[], bool],
    proc: subprocess.Popen[bytes],
    what: str,
    timeout_s: float,
    tail: Callable[[], list[str]] = list,
) -> None:
    """Polls `ready()` until it is true. Raises ServerStartError, with `tail()`, when the child exits first or
    the deadline passes; between polls it waits on the child, so an exit is seen at once."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if proc.poll() is not None:
            raise ServerStartError(f"{what} exited with status {proc.returncode} before it was ready", tail())
        if time.monotonic() > deadline:
            raise ServerStartError(f"{what} was not ready within {timeout_s:.0f}s", tail(), timed_out=True)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=POLL_S)


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, grace_s: float = STOP_GRACE_S) -> int:
    """Signals the process group, waits up to grace_s, then SIGKILLs the group. Returns the exit status."""
    try:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        # The leader may be gone while others in its group (Locust --processes) live on: kill the group.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        # Reaped without a grace: SIGKILL cannot be ignored, but on a busy machine the exit may take longer than
        # the grace did, and a TimeoutExpired raised here (often inside a `finally` during Ctrl-C) would replace
        # the interruption with a failure. REAP_LIMIT_S only bounds a process stuck in the kernel.
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=REAP_LIMIT_S)
        return proc.returncode if proc.returncode is not None else -signal.SIGKILL
    finally:
        with _live_lock:
            _live.discard(proc)


def kill_all() -> None:
    """Every child still registered, then every server cgroup this runner made (with what is left in it)."""
    with _live_lock:
        procs = list(_live)
    for p in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            p.wait(timeout=5)
        with _live_lock:
            _live.discard(p)
    cgroup.destroy_all()


atexit.register(kill_all)


def live_pids() -> list[int]:
    with _live_lock:
        return [p.pid for p in _live if p.poll() is None]


# Where free_port looks: below the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by default),
# from which every outgoing connection on the machine takes its source port. A port of that range handed to a child
# can be taken by any connect() between the check and the child's bind: etcd once failed "bind: address already in
# use" so, while the tests beside it made connections.
LISTEN_PORTS_FROM = 10000
EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
# The OS's randomness, not the random module's state: a test run seeds that alike in every worker process
# (pytest-randomly), which would have them all try the same ports in the same order.
_pick = random.SystemRandom()


def free_port() -> int:
    """A loopback port free right now, for a child that cannot report the port it bound (Locust's metrics
    port, a command server's {port}, a test's Prometheus): a random one below the ephemeral range that binds now,
    else (that range too small, or full) one the kernel picks. The one implementation: tests and the stack import
    it from here."""
    try:
        below = int(EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        below = 0
    for _ in range(64 if below - LISTEN_PORTS_FROM >= 1000 else 0):
        port = _pick.randrange(LISTEN_PORTS_FROM, below)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use (or in TIME_WAIT): another
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class ServerStartError(RuntimeError):
    """A child that never became ready; `tail` holds its last output lines, `timed_out` says whether it was
    still running (no ready line within the deadline) rather than gone."""

    def __init__(self, message: str, tail: list[str], *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.tail = tail
        self.timed_out = timed_out


def parse_ready_line(line: str, name: str) -> dict[str, str] | None:
    words = line.split()
    if len(words) < 2 or words[0] != name or words[1] != "ready":
        return None
    return dict(w.split("=", 1) for w in words[2:] if "=" in w)


def _build_hint(program: str) -> str:
    """`make build` builds the repository's own programs only; another's path is the user's to fix."""
    return "; run `make build`" if Path(program).resolve().is_relative_to(ROOT / "build") else ""


class Server:
    """A running server: its ready-line fields, a stderr tail kept by a drain thread, and a log file. It is
    the runner's server handle (xferbench/run/handle.py) for a host process.

    The one implementation of "start a server, wait for its ready line, stop it": the runner uses it, and so
    does every test suite (through tests/support/servers.py). `tail_lines=None` keeps every stderr line.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        env: dict[str, str],
        log_path: Path | None = None,
        cpus: Sequence[int] | None = None,
        ready_timeout_s: float = READY_TIMEOUT_S,
        tail_lines: int | None = TAIL_LINES,
        ready_word: str | None = None,
        own_cgroup: bool = False,
    ) -> None:
        self.name = name
        self._ready_word = ready_word or name  # a server's ready line begins with its name unless told otherwise
        self.argv = list(argv)
        self.tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
        self.ready: dict[str, str] = {}
        self.ready_line = ""
        self._stopped = False
        self._log = open(log_path, "w", encoding="utf-8") if log_path else None
        if not Path(self.argv[0]).exists():
            self._close_log()
            raise ServerStartError(f"{self.name}: {self.argv[0]} does not exist{_build_hint(self.argv[0])}", [])
        # `own_cgroup`: the runner's servers, each measured whole in a group of its own (xferbench/measure/tree.py)
        self.cgroup = Cgroup.create(name) if own_cgroup else None
        try:
            self.proc = self._spawn(env, cpus)
        except BaseException:
            self._release()
            raise
        self.tree = tree.of_server(self.proc.pid, self.cgroup)
        try:
            self._wait_ready(ready_timeout_s)
        except BaseException:
            stop(self.proc, signal.SIGKILL, 2)
            self._drain_rest()
            self._release()
            raise
        self._drainer = threading.Thread(target=self._drain, name=f"{name}-stderr", daemon=True)
        self._drainer.start()

    def _spawn(self, env: dict[str, str], cpus: Sequence[int] | None) -> subprocess.Popen[bytes]:
        return spawn(self.argv, env=env, cpus=cpus, group=self.cgroup)

    def _release(self) -> None:
        """The log closed and the cgroup removed, with whatever is left in it."""
        self._close_log()
        if self.cgroup is not None:
            self.cgroup.destroy()

    @property
    def _pipe(self) -> IO[bytes] | None:
        """What the tail and the log read: stderr, or stdout when a subclass merged stderr into it."""
        return self.proc.stderr if self.proc.stderr is not None else self.proc.stdout

    def _line(self, line: str) -> None:
        self.tail.append(line)
        if self._log:
            self._log.write(line + "\n")
            self._log.flush()

    def _wait_ready(self, timeout_s: float) -> None:
        assert self._pipe is not None
        fd = self._pipe.fileno()
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout_s
        self._buf = b""
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ServerStartError(
                        f"{self.name} printed no ready line within {timeout_s:.0f}s", list(self.tail), timed_out=True
                    )
                if not sel.select(timeout=left):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    try:
                        code = self.proc.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        code = None
                    raise ServerStartError(f"{self.name} exited with status {code} before it was ready", list(self.tail))
                self._buf += chunk
                while b"\n" in self._buf:
                    raw, self._buf = self._buf.split(b"\n", 1)
                    line = raw.decode(errors="replace")
                    self._line(line)
                    ready = parse_ready_line(line, self._ready_word)
                    if ready is not None:
                        self.ready, self.ready_line = ready, line
                        return
        finally:
            sel.close()

    def _drain(self) -> None:
        assert self._pipe is not None
        fd = self._pipe.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except (OSError, ValueError):
                break
            if not chunk:
                break
            self._buf += chunk
            while b"\n" in self._buf:
                raw, self._buf = self._buf.split(b"\n", 1)
                self._line(raw.decode(errors="replace"))
        if self._buf:
            self._line(self._buf.decode(errors="replace"))
            self._buf = b""

    def _drain_rest(self) -> None:
        if self._pipe is None:
            return
        with contextlib.suppress(OSError, ValueError):
            rest = self._pipe.read()
            for line in (getattr(self, "_buf", b"") + rest).decode(errors="replace").splitlines():
                self._line(line)

    def _close_log(self) -> None:
        if self._log:
            self._log.close()
            self._log = None

    def addr(self, key: str) -> str:
        if key not in self.ready:
            raise KeyError(f"{self.name}'s ready line has no {key}= address: {self.ready_line!r}")
        return self.ready[key]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait(self, timeout_s: float) -> bool:
        """Waits up to timeout_s for the server to exit; whether it has."""
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    def sample(self) -> None:
        """A host process has no figures of its own to take here: the runner reads its /proc (procfs)."""

    def row_figures(self) -> Figures:
        return {}

    def exit_text(self) -> str:
        return f"exited with status {self.proc.returncode}"

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Stops the server (its whole process group) and returns its exit status. A second call only
        returns the status: the group, gone by then, is not signalled again."""
        if self._stopped:
            return self.proc.returncode
        self._stopped = True
        code = stop(self.proc, sig)
        self._drainer.join(timeout=5)
        with contextlib.suppress(Exception):
            if self._pipe:
                self._pipe.close()
        self._release()
        return code
