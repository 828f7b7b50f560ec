"""Starting a command server (`server = "command"`, xferbench/config/command.py) as a host process.

Each start gives every port placeholder a free loopback port and `{addr}` 127.0.0.1 (`launch`: also the start of
a command in a container, where `{addr}` is 0.0.0.0, and on another host, xferbench/run/remoteserver.py, where it
is the host's address and the ports are the host's), makes its {dir} and {tmpdir} and renders its
[servers.files] there (xferbench/run/commandfolders.py), sets the cell's environment (its [servers.env], then
LD_PRELOAD for alloc and GOGC, ... for the Go keys), and polls the ready condition: a TCP connection
accepted, a line of its output (stdout and stderr, merged) matching, or an HTTP 2xx. Nothing here sleeps in
place of readiness: between polls it waits on the child's output or its exit. Once ready, an alloc is checked
in /proc/PID/maps: a preload that did not load fails the run rather than measuring glibc under another name.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from xferbench.config import Cell, command, placeholders
from xferbench.measure import procfs
from xferbench.run.commandfolders import Folders
from xferbench.run.live import CellFailed
from xferbench.run.process import POLL_S, Server, ServerStartError, free_port, port_open, spawn

CHECK_EVERY_S = 0.1  # a port or URL is tried at most this often, however much the server prints
LOOPBACK = "127.0.0.1"  # {addr} of a host process here, and where a container's published ports are reached
ANY = "0.0.0.0"  # {addr} inside a container: its published ports reach it on every interface there


class ReadyCheck:
    """A command's ready condition, polled: the one check of a command run as a host process (CommandServer)
    and in a container (xferbench/run/containers/backend.py), and on another host (xferbench/run/remoteserver.py),
    whose `address` a ready port is connected to from here. Its output's lines are shown to it by `see`."""

    def __init__(self, cond: command.Ready, address: str = LOOPBACK) -> None:
        self.cond = cond
        self.address = address
        self.matched = False
        self._http_error = "no answer"

    def condition(self) -> str:
        """What must become true, as the error names it."""
        kind, value = self.cond.kind, self.cond.value
        if kind == "port":
            return f"ready.port: a TCP connection accepted on {placeholders.in_url(self.address)}:{value}"
        if kind == "log":
            return f"ready.log: a line of its output matching {value!r}"
        return f"ready.http: {value} answering 2xx (last: {self._http_error})"

    def see(self, line: str) -> None:
        if self.cond.kind == "log" and not self.matched and re.search(self.cond.value, line):
            self.matched = True

    def met(self) -> bool:
        if self.cond.kind == "port":
            return port_open(self.address, int(self.cond.value))
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
        cwd: Path | None = None,
        folders: Folders | None = None,
    ) -> None:
        self._check = ReadyCheck(ready)
        self._addrs = addrs
        self._cwd = cwd
        self._folders = folders
        if not Path(argv[0]).is_file():  # it was there when the experiment was read
            raise ServerStartError(f"command[0]: {argv[0]} does not exist (any more)", [])
        super().__init__(Path(argv[0]).name, argv, env, log_path=log_path, cpus=cpus, ready_timeout_s=ready.timeout_s,
                         own_cgroup=True)

    def _spawn(self, env: dict[str, str], cpus: Sequence[int] | None) -> subprocess.Popen[bytes]:
        # Its output, whichever stream it writes to, is the log, the tail and what ready.log reads.
        return spawn(self.argv, env=env, cpus=cpus, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, group=self.cgroup,
                     cwd=self._cwd)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Stops it, then removes its {tmpdir} (and a {dir} no run folder keeps)."""
        try:
            return super().stop(sig)
        finally:
            if self._folders is not None:
                self._folders.remove()

    def condition(self) -> str:
        """What must become true, as the error names it."""
        return self._check.condition()

    def watch_tree(self, alloc: str | None, go_env: dict[str, str]) -> None:
        """Checks the preload and the Go settings in every process now, and in each one the server starts later
        (`sample`, every tick): a server that forks its workers after it listens (nginx's master) is checked in
        them too."""
        self._tree_check = (alloc, go_env)
        pids = self.tree.pids()
        self.ready.update(checked_tree(pids, alloc, go_env))
        self._checked = set(pids)

    def sample(self) -> None:
        """The processes that appeared since the last tick, checked as at ready; raises CellFailed naming one
        that lacks the preload or the Go settings."""
        if not getattr(self, "_tree_check", None):
            return
        new = [p for p in self.tree.pids() if p not in self._checked]
        if not new:
            return
        try:
            checked_tree(new, *self._tree_check)
        except ServerStartError as e:
            raise CellFailed(str(e), list(self.tail)) from None
        self._checked.update(new)
        self.ready["procs_checked"] = str(len(self._checked))

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


def _command(cell: Cell) -> command.Command:
    """The cell's kind, a command (the launcher its kind names brought it here)."""
    if not isinstance(cell.kind, command.Command):
        raise TypeError(f"cell {cell.name!r}: a {cell.server} server is not started as a command")
    return cell.kind


@dataclass(frozen=True)
class Launch:
    """A command's start with its placeholders filled: the same for a host process and a container."""

    argv: list[str]
    env: dict[str, str]
    ready: command.Ready
    addrs: dict[str, str]  # grpc=, frame=, metrics= (host:port), metrics_url=, ports= and addr= as the runner reads them
    ports: dict[str, int]  # each placeholder's free port
    values: dict[str, object]  # every placeholder's value: the ports, {addr}, and {dir} and {tmpdir} when given


@dataclass(frozen=True)
class Where:
    """Where a start listens (`{addr}` in what the server is given) and where the runner reaches it (`{addr}` in a
    URL it reads, and the load's target), and its ports (None: free ones of this machine)."""

    listen: str = LOOPBACK
    reach: str = LOOPBACK
    ports: Mapping[str, int] | None = None


def launch(cell: Cell, env: dict[str, str], folders: Mapping[str, str] | None = None, where: Where | None = None) -> Launch:
    """The cell's command on fresh free ports; `env` its environment, the cell's own [servers.env] among it
    (their placeholders are filled here); `folders` the {dir} and {tmpdir} of this start (a host process's);
    `where` its addresses and ports (default: a host process here, or 0.0.0.0 in a container)."""
    cmd = _command(cell)
    where = where or (Where(listen=ANY) if cell.image else Where())
    ports = dict(where.ports) if where.ports is not None else {name: free_port() for name in cmd.ports}
    values: dict[str, object] = {**ports, placeholders.ADDR: where.listen, **(folders or {})}
    urls: dict[str, object] = {**ports, placeholders.ADDR: placeholders.in_url(where.reach)}
    env = {k: cmd.fill(v, values) if k in cell.env else v for k, v in env.items()}
    addrs = {transport: f"{placeholders.in_url(where.reach)}:{ports['port']}" for transport in ("grpc", "frame")}
    if cmd.metrics_url:
        # The whole URL is what is scraped (any path, https); host:port names the target, as for our servers.
        addrs["metrics_url"] = cmd.fill(cmd.metrics_url, urls)
        addrs["metrics"] = urllib.parse.urlsplit(addrs["metrics_url"]).netloc
    addrs["ports"] = ",".join(f"{k}={v}" for k, v in ports.items())
    addrs[placeholders.ADDR] = where.reach
    return Launch([cmd.fill(a, values) for a in cmd.argv], env, _ready(cmd, values, urls), addrs, ports, values)


def _ready(cmd: command.Command, values: Mapping[str, object], urls: Mapping[str, object]) -> command.Ready:
    """The ready condition filled: a log's expression with the values escaped (a folder's dots are no wildcards),
    a URL with the address the runner reaches."""
    kind = cmd.ready.kind
    filled = {k: re.escape(str(v)) for k, v in values.items()} if kind == "log" else urls if kind == "http" else values
    return command.Ready(kind, cmd.fill(cmd.ready.value, filled), cmd.ready.timeout_s)


def start(cell: Cell, log_path: Path | None, cpus: Sequence[int] | None, run_folder: Path | None = None,
          tls: Mapping[str, str] | None = None) -> CommandServer:
    """The cell's command on fresh free ports, up once its ready condition holds, its preload and Go settings
    checked in every process it runs; its templates rendered into `run_folder` ({dir}; None: a temporary
    folder); `tls` its {cert} and {key}. Raises ServerStartError with its output's tail."""
    cmd = _command(cell)
    folders = Folders(cmd, run_folder)
    try:
        run = launch(cell, cell.server_env(), {**folders.values, **(tls or {})})
        folders.render(cmd, run.values)
        runtime = command.runtime_env(cell.flags, run.env)
        server = CommandServer(run.argv, {**run.env, **runtime}, run.ready, run.addrs, log_path=log_path, cpus=cpus,
                               cwd=cmd.cwd, folders=folders)
    except BaseException:
        folders.remove()
        raise
    try:
        server.watch_tree(cell.flags.get("alloc"), {k: v for k, v in runtime.items() if k != "LD_PRELOAD"})
    except ServerStartError as e:
        server.stop()
        raise ServerStartError(str(e), list(server.tail)) from None
    return server


def checked_tree(pids: Sequence[int], alloc: str | None, go_env: dict[str, str]) -> dict[str, str]:
    """The allocator mapped and the Go settings in the environment of every process of `pids` (a forking
    server's workers, a wrapper's program): the ready fields that record it. Raises ServerStartError naming the
    first process where either is missing; one that exited meanwhile is skipped."""
    out: dict[str, str] = {}
    checked = 0
    for pid in pids:
        if not procfs.running(pid):
            continue
        checked += 1
        if alloc:
            lib = mapped_allocator(pid, alloc)
            if lib is None:
                checked -= 1
                continue
            out["alloc"], out["alloc_lib"] = alloc, lib
        if go_env:
            env = procfs.environ(pid)
            if env is not None and (why := go_env_error(pid, f"({procfs.exe(pid)}) ", env, go_env)):
                raise ServerStartError(why, [])
            out["go_env"] = " ".join(f"{k}={v}" for k, v in sorted(go_env.items()))
    out["procs_checked"] = str(checked)
    return out


def go_env_error(pid: int | str, what: str, env: Mapping[str, str | None], go_env: dict[str, str],
                 where: str = "") -> str | None:
    """Why the process `pid` (`what` it is, "" or "(/usr/bin/foo) "), whose environment is `env`, lacks the Go
    settings `go_env` it was started with; None when it has them. `where`: " on HOST" for another host's /proc."""
    wrong = {k: env.get(k) for k, v in go_env.items() if env.get(k) != v}
    if not wrong:
        return None
    return (f"process {pid} {what}of the server does not have the Go settings it was started with: "
            f"{', '.join(f'{k}={v!r}' for k, v in wrong.items())} in /proc/{pid}/environ{where}, "
            f"{', '.join(f'{k}={go_env[k]!r}' for k in wrong)} expected (did a wrapper clear its environment?)")


def mapped_allocator(pid: int, alloc: str) -> str | None:
    """The file of the allocator's library mapped into the process (glibc: libc itself); None when the process
    has exited meanwhile. Raises ServerStartError when it is not mapped."""
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as f:
            mapped = {parts[-1] for line in f if len(parts := line.split()) >= 6 and parts[-1].startswith("/")}
    except (FileNotFoundError, ProcessLookupError):
        return None
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
