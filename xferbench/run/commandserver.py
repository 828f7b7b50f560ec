"""Starting a command server (`server = "command"`, xferbench/config/command.py) as a host process.

Each start gives every port placeholder a free loopback port, sets the cell's environment (its [servers.env],
then LD_PRELOAD for alloc and GOGC, ... for the Go keys), and polls the ready condition: a TCP connection
accepted, a line of its output (stdout and stderr, merged) matching, or an HTTP 2xx. Nothing here sleeps in
place of readiness: between polls it waits on the child's output or its exit. Once ready, an alloc is checked
in /proc/PID/maps: a preload that did not load fails the run rather than measuring glibc under another name.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from xferbench.config import Cell, command
from xferbench.measure import procfs
from xferbench.run.process import POLL_S, Server, ServerStartError, free_port, port_open, spawn

CHECK_EVERY_S = 0.1  # a port or URL is tried at most this often, however much the server prints


class ReadyCheck:
    """A command's ready condition, polled: the one check of a command run as a host process (CommandServer)
    and in a container (xferbench/run/containers/backend.py). Its output's lines are shown to it by `see`."""

    def __init__(self, cond: command.Ready) -> None:
        self.cond = cond
        self.matched = False
        self._http_error = "no answer"

    def condition(self) -> str:
        """What must become true, as the error names it."""
        kind, value = self.cond.kind, self.cond.value
        if kind == "port":
            return f"ready.port: a TCP connection accepted on 127.0.0.1:{value}"
        if kind == "log":
            return f"ready.log: a line of its output matching {value!r}"
        return f"ready.http: {value} answering 2xx (last: {self._http_error})"

    def see(self, line: str) -> None:
        if self.cond.kind == "log" and not self.matched and re.search(self.cond.value, line):
            self.matched = True

    def met(self) -> bool:
        if self.cond.kind == "port":
            return port_open("127.0.0.1", int(self.cond.value))
        if self.cond.kind == "log":
            return self.matched
        try:
            with urllib.request.urlopen(self.cond.value, timeout=0.5) as resp:
                ok: bool = 200 <= resp.status < 300
                self._http_error = f"status {resp.status}"
                return ok
        except urllib.error.HTTPError as e:
            self._http_error = f"status {e.code}"
        except (urllib.error.URLError, OSError, ValueError) as e:
            self._http_error = str(getattr(e, "reason", e))
        return False


class CommandServer(Server):
    """A `Server` whose readiness is a polled condition instead of a ready line; its `ready` holds the
    addresses the runner reads (grpc=, frame= and metrics=) and what was checked after ready."""

    def __init__(
        self,
        argv: Sequence[str],
        env: dict[str, str],
        ready: command.Ready,
        addrs: dict[str, str],
        log_path: Path | None = None,
        cpus: Sequence[int] | None = None,
    ) -> None:
        self._check = ReadyCheck(ready)
        self._addrs = addrs
        super().__init__(Path(argv[0]).name, argv, env, log_path=log_path, cpus=cpus, ready_timeout_s=ready.timeout_s,
                         own_cgroup=True)

    def _spawn(self, env: dict[str, str], cpus: Sequence[int] | None) -> subprocess.Popen[bytes]:
        # Its output, whichever stream it writes to, is the log, the tail and what ready.log reads.
        return spawn(self.argv, env=env, cpus=cpus, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, group=self.cgroup)

    def condition(self) -> str:
        """What must become true, as the error names it."""
        return self._check.condition()

    def _wait_ready(self, timeout_s: float) -> None:
        assert self._pipe is not None
        fd = self._pipe.fileno()
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        self._buf = b""
        deadline = time.monotonic() + timeout_s
        next_check = 0.0
        try:
            while True:
                now = time.monotonic()
                if now >= next_check or self._check.cond.kind == "log":
                    if self._check.met():
                        break
                    next_check = now + CHECK_EVERY_S
                if self.proc.poll() is not None:
                    self._read(sel, fd, 0)  # its last words
                    raise ServerStartError(
                        f"{self.name} exited with status {self.proc.returncode} before it was "
                        f"ready ({self.condition()}){self._last()}",
                        list(self.tail),
                    )
                if now > deadline:
                    raise ServerStartError(
                        f"{self.name} was not ready within {timeout_s:g}s: no {self.condition()}{self._last()}",
                        list(self.tail),
                        timed_out=True,
                    )
                if not self._read(sel, fd, POLL_S):
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self.proc.wait(timeout=POLL_S)  # its output is closed: wait on its exit instead
        finally:
            sel.close()
        self.ready = dict(self._addrs)
        self.ready_line = self.condition()

    def _read(self, sel: selectors.BaseSelector, fd: int, timeout: float) -> bool:
        """Reads what the server wrote within `timeout`; False once its output is closed."""
        if not sel.get_map():
            return False
        if not sel.select(timeout=timeout):
            return True
        chunk = os.read(fd, 65536)
        if not chunk:
            sel.unregister(fd)
            return False
        self._buf += chunk
        while b"\n" in self._buf:
            raw, self._buf = self._buf.split(b"\n", 1)
            line = raw.decode(errors="replace")
            self._line(line)
            self._check.see(line)
        return True

    def _last(self) -> str:
        lines = [ln for ln in self.tail if ln.strip()][-3:]
        return "; its last output: " + " | ".join(lines) if lines else "; it printed nothing"


@dataclass(frozen=True)
class Launch:
    """A command's start with its placeholders filled: the same for a host process and a container."""

    argv: list[str]
    env: dict[str, str]
    ready: command.Ready
    addrs: dict[str, str]  # grpc=, frame=, metrics= and ports= as the runner reads them
    ports: dict[str, int]  # each placeholder's free loopback port


def launch(cell: Cell, env: dict[str, str]) -> Launch:
    """The cell's command on fresh free ports; `env` its environment, the cell's own [servers.env] among it
    (their placeholders are filled here)."""
    cmd = cell.command
    assert cmd is not None, "a command cell"
    ports = {name: free_port() for name in cmd.ports}
    env = {k: cmd.fill(v, ports) if k in cell.env else v for k, v in env.items()}
    addrs = {transport: f"127.0.0.1:{ports['port']}" for transport in ("grpc", "frame")}
    if cmd.metrics:
        addrs["metrics"] = urllib.parse.urlsplit(cmd.fill(cmd.metrics, ports)).netloc
    addrs["ports"] = ",".join(f"{k}={v}" for k, v in ports.items())
    ready = command.Ready(
        cmd.ready.kind, cmd.ready.value if cmd.ready.kind == "log" else cmd.fill(cmd.ready.value, ports), cmd.ready.timeout_s
    )
    return Launch([cmd.fill(a, ports) for a in cmd.argv], env, ready, addrs, ports)


def start(cell: Cell, log_path: Path | None, cpus: Sequence[int] | None) -> CommandServer:
    """The cell's command on fresh free ports, up once its ready condition holds, its preload and Go settings
    checked in every process it runs. Raises ServerStartError with its output's tail."""
    run = launch(cell, cell.server_env())
    runtime = command.runtime_env(cell.flags, run.env)
    server = CommandServer(run.argv, {**run.env, **runtime}, run.ready, run.addrs, log_path=log_path, cpus=cpus)
    try:
        server.ready.update(checked_tree(server.tree.pids(), cell.flags.get("alloc"),
                                         {k: v for k, v in runtime.items() if k != "LD_PRELOAD"}))
    except ServerStartError as e:
        server.stop()
        raise ServerStartError(str(e), list(server.tail)) from None
    return server


def checked_tree(pids: Sequence[int], alloc: str | None, go_env: dict[str, str]) -> dict[str, str]:
    """The allocator mapped and the Go settings in the environment of every process of the server once ready
    (a forking server's workers, a wrapper's program): the ready fields that record it. Raises ServerStartError
    naming the first process where either is missing."""
    out: dict[str, str] = {"procs_checked": str(len(pids))}
    for pid in pids:
        if alloc:
            out["alloc"] = alloc
            out["alloc_lib"] = mapped_allocator(pid, alloc)
        if go_env:
            env = procfs.environ(pid)
            wrong = {k: (env or {}).get(k) for k, v in go_env.items() if (env or {}).get(k) != v}
            if wrong and env is not None:
                raise ServerStartError(
                    f"process {pid} ({procfs.exe(pid)}) of the server does not have the Go settings it was started "
                    f"with: {', '.join(f'{k}={v!r}' for k, v in wrong.items())} in /proc/{pid}/environ, "
                    f"{', '.join(f'{k}={go_env[k]!r}' for k in wrong)} expected (did a wrapper clear its environment?)",
                    [],
                )
            out["go_env"] = " ".join(f"{k}={v}" for k, v in sorted(go_env.items()))
    return out


def mapped_allocator(pid: int, alloc: str) -> str:
    """The file of the allocator's library mapped into the process (glibc: libc itself). Raises
    ServerStartError when it is not mapped."""
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as f:
            mapped = {parts[-1] for line in f if len(parts := line.split()) >= 6 and parts[-1].startswith("/")}
    except OSError as e:
        raise ServerStartError(f"alloc = {alloc!r}: cannot read /proc/{pid}/maps: {e.strerror}", []) from None
    lib = command.alloc_library(alloc)
    if lib is None:
        found = sorted(p for p in mapped if re.fullmatch(r"libc(-[0-9.]+)?\.so(\.[0-9]+)?", Path(p).name))
    else:
        want = os.path.realpath(lib)
        found = sorted(p for p in mapped if os.path.realpath(p) == want)
    if not found:
        raise ServerStartError(
            f"alloc = {alloc!r}: {lib or 'libc'} is not mapped in /proc/{pid}/maps ({procfs.exe(pid)}, a process of the "
            "server) once ready: the program did not load it (it re-executed without LD_PRELOAD, or is setuid "
            "or static?)",
            [],
        )
    return found[0]
