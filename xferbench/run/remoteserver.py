"""A server on another host (`[[servers]] host = "NAME"`), started over SSH and measured there: a registry server or a
command server (`server = "command"`), one class for both; what differs is made by `PLANS`, by the kind's launcher.

- **Its program**: a registry server's is the local binary's path on the host when a file there has the same
  SHA-256 (a host sharing this filesystem, or the same build installed at the same path); otherwise the local
  binary copied into a folder of this start's own on the host (`/tmp/xferbench-server-…`, checksum checked;
  removed when the server stops). A command's is the host's own (command[0], which the host check found there).
- **Started** under a watch (remote_server_watch.py, sent as text) in one ssh session: the server in a process
  group of its own, which the watch ends when the session ends or on a signal; its listeners bound to the host's
  address as the host check found it, so that the load (here or on other hosts) and the runner's scraper reach
  them (a registry server's flags say so; a command's `{addr}`, its ports free ones the host gave); the cell's env
  (a command's: its [servers.env], then LD_PRELOAD for alloc and GOGC, ... for the Go keys) and a marker
  (XFERBENCH_MARKER, in every process it forks) set there.
- **Ready** at its ready line, read from the session's stderr (the log here); a command at its ready condition: a
  line of that output matching, or from here a TCP connection accepted at the host's address, or an HTTP 2xx.
- **Measured** by the watch: each tick's "stat" is the /proc tree of the server on that host (tree.py's ProcTree,
  read there) and the host's own counters (xferbench/measure/hoststat.py: the run's `hosts` figures). The
  allocator its `alloc` asks for is checked in that host's /proc/PID/maps of each of its processes, and a
  command's Go settings in their /proc/PID/environ, once ready and again whenever a process appears (a server that
  forks its workers after it listens). No cgroup is made on the host.
- **Stopped** with SIGTERM then SIGKILL (the watch's "stop GRACE"), its exit status the watch's; as a backstop, a
  remote pkill of the watch's marker and a kill of every process whose environment carries it.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import itertools
import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from xferbench.analysis.row import Figures
from xferbench.config import Cell, Host, command, servers
from xferbench.config.command import ALLOC_LIBS
from xferbench.measure import hoststat, tree
from xferbench.run import commandserver, process, programs, remote, remote_server_watch
from xferbench.run.commandserver import CHECK_EVERY_S, ReadyCheck
from xferbench.run.live import CellFailed
from xferbench.run.process import READY_TIMEOUT_S, STOP_GRACE_S, TAIL_LINES, ServerStartError, parse_ready_line, spawn

# Sent as text: the host needs a Python, not xferbench (xferbench/run/remote_server_watch.py).
SERVER_WATCH = programs.program(remote_server_watch, hoststat)
ANSWER_TIMEOUT_S = 3.0  # a "stat" or "maps" answer, within the runner's one-second tick or a little more
CLOCK = "the remote /proc process tree on {host} (10 ms ticks; live processes and the children they reaped)"
_starts = itertools.count(1)


def marker() -> str:
    """A name for one start's processes on the host, unique to this runner and start; of a fixed width, so that no
    marker is the beginning of another (the backstop's pkill -f matches a part of a command line)."""
    return f"xferbench-server-{os.getpid():07d}-{next(_starts):06d}"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def place_binary(host: Host, local: str, folder: str) -> tuple[str, bool]:
    """The path the host runs `local` from, and whether it was copied (into `folder`) rather than found there."""
    path = Path(local)
    if not path.is_file():
        raise ServerStartError(f"{local} does not exist on this machine; run `make build`", [])
    digest = file_sha256(path)
    if remote.sha256(host, local) == digest:
        return local, False
    dest = f"{folder}/{path.name}"
    remote.copy(host, path, dest, digest)
    return dest, True


def alloc_lib(alloc: str, mapped: dict[str, list[str]]) -> str | None:
    """The allocator's library as mapped by a process of the server (glibc: libc itself), or None."""
    want = ALLOC_LIBS.get(alloc, "libc.so.6")
    for libs in mapped.values():
        for lib in libs:
            if os.path.basename(lib) == want:
                return lib
    return None


def unmapped(alloc: str, mapped: dict[str, list[str]]) -> list[str]:
    """The processes (pids) of the server that do not map the allocator's library."""
    return [pid for pid, libs in mapped.items() if alloc_lib(alloc, {pid: libs}) is None]


# The host's free ports, bound all at once (so they differ) at its address, then closed: `python -c` it, ADDRESS N.
FREE_PORTS = ("import socket, sys\n"
              "a, n = sys.argv[1], int(sys.argv[2])\n"
              "s = [socket.socket(socket.AF_INET6 if ':' in a else socket.AF_INET) for _ in range(n)]\n"
              "for x in s: x.bind((a, 0))\n"
              "print(' '.join(str(x.getsockname()[1]) for x in s))\n")


def free_ports(host: Host, address: str, n: int) -> list[int]:
    """`n` ports free at `address` on the host now. Raises RemoteError."""
    r = remote.run(host, [host.python, "-c", FREE_PORTS, address, str(n)], what="asking for free ports")
    words = r.stdout.split()
    if len(words) != n or not all(w.isdigit() for w in words):
        raise remote.RemoteError(f"{host.describe()}: asking for {n} free ports, it answered {r.stdout.strip()!r}")
    return [int(w) for w in words]


class ReadyLine:
    """A registry server's readiness: its ready line (`<word> ready key=value ...`) among its output's lines."""

    def __init__(self, word: str) -> None:
        self.word = word
        self.fields: dict[str, str] | None = None
        self.line = ""

    def see(self, line: str) -> None:
        if self.fields is None and (fields := parse_ready_line(line, self.word)) is not None:
            self.fields, self.line = fields, line

    def met(self) -> bool:
        return self.fields is not None

    def condition(self) -> str:
        return "its ready line"


@dataclass
class Plan:
    """What a start on the host is made of, which the kind decides: the server's name, command line and environment
    there ("" unsets a variable), how it is known to be ready, and the ready fields known before it starts."""

    name: str
    argv: list[str]
    env: dict[str, str]
    check: ReadyLine | ReadyCheck
    fields: dict[str, str] = field(default_factory=dict)


def registry_plan(cell: Cell, host: Host, address: str, folder: str) -> Plan:
    """A registry server: its binary placed on the host (copied into `folder` when it lacks it), every listener at
    the host's address (the runner scrapes the metrics listener from here), up at its ready line."""
    spec = cell.kind
    assert isinstance(spec, servers.ServerSpec), "a registry kind"
    binary, copied = place_binary(host, cell.binary, folder)
    at = f"[{address}]" if ":" in address else address
    ports = [f"--{k}-addr={at}:0" for k in spec.ports]
    argv = [binary, *ports, *(f"--{k}={v}" for k, v in cell.flags.items()), *cell.args]
    return Plan(cell.server, argv, dict(cell.env), ReadyLine(spec.ready_word),
                {"binary_copied_to": folder} if copied else {})


def command_plan(cell: Cell, host: Host, address: str, folder: str) -> Plan:
    """A command: its placeholders filled with free ports of the host and `{addr}` its address, its alloc and Go
    keys in its environment, up at its ready condition (a port or URL tried from here)."""
    cmd = cell.kind
    assert isinstance(cmd, command.Command), "a command"
    ports = dict(zip(cmd.ports, free_ports(host, address, len(cmd.ports)), strict=True))
    run = commandserver.launch(cell, dict(cell.env), where=commandserver.Where(address, address, ports))
    env = {**run.env, **command.runtime_env(cell.flags, run.env)}
    return Plan(Path(run.argv[0]).name, run.argv, env, ReadyCheck(run.ready, address), dict(run.addrs))


# How each launcher's server is made on a host (as xferbench/run/serverstart.py's table for this machine).
PLANS: dict[servers.Launcher, Callable[[Cell, Host, str, str], Plan]] = {
    "registry": registry_plan,
    "command": command_plan,
}


def read_tree(server: RemoteServer) -> tree.Sample | None:
    """The server's process tree on its host, as its watch reads it; the host's own counters kept beside."""
    t0 = time.time()
    got = server.ask("stat")
    t = (t0 + time.time()) / 2  # this machine's clock: the windows are cut by it
    if got and isinstance(got.get("host"), dict):
        server.host_sample = {**got["host"], "at": t}
    if got and isinstance(got.get("pids"), list):
        server.pids = {str(p) for p in got["pids"]}
    if not got or not got.get("procs"):
        return None
    return tree.Sample(t, float(got["cpu_s"]), int(got["rss_bytes"]), int(got["threads"]), int(got["ctx_switches"]),
                       int(got["page_faults"]), int(got["fds"]), int(got["procs"]))


class RemoteServer:
    """A server on `host` (a registry server or a command, its `Plan`), behind one ssh session to its watch: the
    runner's ServerHandle."""

    def __init__(self, cell: Cell, host: Host, address: str, log_path: Path | None,
                 ready_timeout_s: float | None = None) -> None:
        self.name, self.host, self.address = cell.server, host, address
        self.marker = marker()
        self.folder = f"/tmp/{self.marker}"
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.ready: dict[str, str] = {}
        self.ready_line = ""
        self.exit_code: int | None = None
        # The host's own counters at the last tick (hoststat.sample(), "at" this machine's time): the run's `hosts`.
        self.host_sample: dict[str, Any] | None = None
        self.pids: set[str] = set()  # the server's processes at the last tick, as the watch listed them
        self._checked: set[str] = set()  # the processes the last check of the tree covered
        self._alloc = cell.flags.get("alloc")
        # A command's Go settings are its environment's (a registry server takes its own as flags).
        self._go_env = ({v: cell.flags[k] for k, v in command.GO_ENV.items() if k in cell.flags}
                        if isinstance(cell.kind, command.Command) else {})
        self._pid: int | None = None
        self._answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self._asking = threading.Lock()
        self._output = threading.Event()  # a line of its output came: a ready line or a log condition may hold
        self._stopped = False
        self._log: IO[str] | None = open(log_path, "w", encoding="utf-8") if log_path else None
        try:
            self.plan = PLANS[cell.kind.launcher](cell, host, address, self.folder)
            self.name = self.plan.name
            self.proc = spawn(remote.argv(host, self._command()), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
        except remote.RemoteError as e:
            self._release()
            raise ServerStartError(str(e), []) from None
        except BaseException:
            self._release()
            raise
        self.tree = tree.TreeOnHost(CLOCK.format(host=host.describe()), lambda: self.pid, lambda: read_tree(self),
                                    step_s=1 / os.sysconf("SC_CLK_TCK"))
        self._readers = [threading.Thread(target=self._read_answers, daemon=True, name=f"{self.name}-answers"),
                         threading.Thread(target=self._read_log, daemon=True, name=f"{self.name}-stderr")]
        for t in self._readers:
            t.start()
        timeout_s = ready_timeout_s or (cell.kind.ready.timeout_s if isinstance(cell.kind, command.Command)
                                        else READY_TIMEOUT_S)
        try:
            self._wait_ready(timeout_s)
            self._check_tree()
        except BaseException:
            self.stop(grace_s=1.0)
            raise

    @property
    def copied(self) -> bool:
        """Whether its binary was copied to the host (a registry server's, which the host lacked)."""
        return "binary_copied_to" in self.plan.fields

    def _command(self) -> list[str]:
        """The watch with the marker in its environment, and the server's command line under `env` with the plan's
        variables: the server's alone, so that the watch's own Python runs without its LD_PRELOAD or GOGC (`env`
        execs the program: the watch's child is the server itself)."""
        env = self.plan.env
        unset = [a for k, v in env.items() if v == "" for a in ("-u", k)]
        assign = [f"{k}={v}" for k, v in env.items() if v != ""]
        return ["env", f"XFERBENCH_MARKER={self.marker}", self.host.python, "-X", self.marker, "-c", SERVER_WATCH,
                "env", *unset, *assign, *self.plan.argv]

    # --- the session's two streams ---

    def _read_answers(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            with contextlib.suppress(ValueError):
                data = json.loads(raw)
                if not isinstance(data, dict):
                    continue
                if "pid" in data and self._pid is None:
                    self._pid = int(data["pid"])
                elif "exit" in data:
                    self.exit_code = int(data["exit"])
                else:
                    self._answers.put(data)

    def _read_log(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            self.tail.append(line)
            if self._log is not None:
                with contextlib.suppress(ValueError):
                    self._log.write(line + "\n")
                    self._log.flush()
            self.plan.check.see(line)
            self._output.set()

    def _wait_ready(self, timeout_s: float) -> None:
        """Until its ready line or condition holds (a port or URL tried at most every CHECK_EVERY_S, a line of its
        output looked at as it comes); then its ready fields."""
        check = self.plan.check
        deadline = time.monotonic() + timeout_s
        while not check.met():
            if self.proc.poll() is not None:
                self._readers[1].join(timeout=2)
                raise ServerStartError(f"{self.name} {self.exit_text()} before it was ready{self._what()}",
                                       list(self.tail))
            if time.monotonic() > deadline:
                raise ServerStartError(f"{self.host.describe()}: {self.name} {self._not_ready(timeout_s)}",
                                       list(self.tail), timed_out=True)
            self._output.wait(CHECK_EVERY_S)
            self._output.clear()
        if isinstance(check, ReadyLine):
            assert check.fields is not None
            self.ready, self.ready_line = {**check.fields, "host": self.host.name, **self.plan.fields}, check.line
        else:
            self.ready, self.ready_line = {**self.plan.fields, "host": self.host.name}, check.condition()

    def _what(self) -> str:
        """A command's condition, as its errors name it."""
        return "" if isinstance(self.plan.check, ReadyLine) else f" ({self.plan.check.condition()})"

    def _not_ready(self, timeout_s: float) -> str:
        if isinstance(self.plan.check, ReadyLine):
            return f"printed no ready line within {timeout_s:.0f}s"
        return f"was not ready within {timeout_s:g}s: no {self.plan.check.condition()}"

    def _check_tree(self) -> None:
        """The allocator and the Go settings in every process of the server on its host (read there, by the
        watch); raises ServerStartError naming the first process without them."""
        self._check_alloc(self._alloc)
        self._check_go_env(self._go_env)

    def _check_go_env(self, go_env: dict[str, str]) -> None:
        """The Go settings the command was started with, in the environment of every process of the server."""
        if not go_env:
            return
        got = self.ask("env " + " ".join(sorted(go_env)))
        envs: dict[str, dict[str, str | None]] = got.get("env", {}) if got else {}
        if not envs:
            raise ServerStartError(f"{self.host.describe()}: the Go settings: no /proc/PID/environ of the server "
                                   f"could be read on {self.host.name}", list(self.tail))
        for pid, env in sorted(envs.items()):
            if why := commandserver.go_env_error(pid, "", env, go_env, f" on {self.host.name}"):
                raise ServerStartError(f"{self.host.describe()}: {why}", list(self.tail))
        self.ready["go_env"] = " ".join(f"{k}={v}" for k, v in sorted(go_env.items()))
        self._checked |= set(envs)
        self.ready["procs_checked"] = str(len(self._checked))

    def _check_alloc(self, alloc: str | None) -> None:
        """The allocator `alloc` asks for, mapped by every process of the server on its host (read there, by the
        watch)."""
        if not alloc or alloc == "pool":
            return
        got = self.ask("maps")
        mapped: dict[str, list[str]] = got.get("maps", {}) if got else {}
        lib = alloc_lib(alloc, mapped)
        missing = unmapped(alloc, mapped)
        if lib is None or missing:
            who = f"its process {missing[0]}'s" if lib is not None else "its"
            raise ServerStartError(f"{self.host.describe()}: alloc = {alloc!r}: {ALLOC_LIBS.get(alloc, 'libc')} is "
                                   f"not mapped by the server ({who} /proc/PID/maps on {self.host.name}): the program "
                                   "did not load it", list(self.tail))
        self.ready["alloc_lib"] = lib
        self._checked |= set(mapped)
        self.ready["procs_checked"] = str(len(self._checked))

    def ask(self, what: str) -> dict[str, Any] | None:
        """The watch's answer to one line ("stat", "maps"), or None (the session gone, or no answer in time)."""
        with self._asking:
            while not self._answers.empty():  # a late answer to an earlier question
                self._answers.get_nowait()
            if not self._send(what):
                return None
            try:
                return self._answers.get(timeout=ANSWER_TIMEOUT_S)
            except queue.Empty:
                return None

    def _send(self, line: str) -> bool:
        if self.proc.poll() is not None or self.proc.stdin is None:
            return False
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):
            return False
        return True

    # --- the ServerHandle ---

    @property
    def pid(self) -> int:
        """Its pid on its host (not a pid of this machine's, except on a lab sharing its pid namespace)."""
        return self._pid or 0

    def addr(self, key: str) -> str:
        if key not in self.ready:
            raise KeyError(f"{self.name}'s ready line has no {key}= address: {self.ready_line!r}")
        return self.ready[key]

    def alive(self) -> bool:
        return self.proc.poll() is None and self.exit_code is None

    def wait(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while self.alive():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=min(left, 0.1))
        return True

    def sample(self) -> None:
        """Its figures are read by its tree, each tick; a process that appeared since the last check is checked as
        at ready (raises CellFailed naming one without the preload or the Go settings)."""
        if not (self._alloc or self._go_env) or self.pids <= self._checked:
            return
        try:
            self._check_tree()
        except ServerStartError as e:
            raise CellFailed(str(e), list(self.tail)) from None
        self._checked |= self.pids

    def row_figures(self) -> Figures:
        return {}

    def exit_text(self) -> str:
        """"on app (root@10.77.0.2): the server exited with status -9", or why the session ended without it (the
        runner prefixes the server's name)."""
        if self.exit_code is None and self.proc.poll() is not None:
            time.sleep(0.2)  # the watch's last line may still be on its way
        if self.exit_code is not None:
            return f"on {self.host.describe()}: the server exited with status {self.exit_code}"
        if self.proc.poll() is None:
            return f"on {self.host.describe()}: the server is running"
        said = remote.last_line("\n".join(self.tail))
        return f"on {self.host.describe()}: ssh session ended (status {self.proc.returncode})" + (f": {said}" if said
                                                                                                else "")

    def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """SIGTERM, then SIGKILL `grace_s` later (by the watch); the session closed; the backstop; the copied
        binary removed. Its exit status (None when it is unknown: the session was lost)."""
        if self._stopped:
            return self.exit_code
        self._stopped = True
        self._send(f"stop {grace_s:g}")
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=grace_s + 5)
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        process.stop(self.proc, grace_s=2.0)  # the ssh process here, should it linger
        for t in self._readers:
            t.join(timeout=5)
        self._release()
        return self.exit_code

    def _release(self) -> None:
        """The backstop on the host, the start's folder removed there, the log closed."""
        with contextlib.suppress(remote.RemoteError, ValueError):
            remote.kill_marked(self.host, self.marker)
        with contextlib.suppress(remote.RemoteError):  # each on its own: a host gone fails all, one at a time
            remote.run(self.host, ["sh", "-c", _KILL_BY_ENVIRON, "sh", self.marker], what="kill by environment")
        with contextlib.suppress(remote.RemoteError):
            remote.run(self.host, ["rm", "-rf", "--", self.folder], what=f"removing {self.folder}")
        if self._log is not None:
            self._log.close()
            self._log = None


# Every process whose environment carries the start's marker (what the server forked, should the watch have been
# killed outright): SIGKILL. The environ files are read with grep -z; a process that exits meanwhile is skipped.
_KILL_BY_ENVIRON = ('for e in /proc/[0-9]*/environ; do p=${e#/proc/}; p=${p%/environ}; '
                    '[ "$p" = "$$" ] && continue; '
                    'grep -qzx "XFERBENCH_MARKER=$1" "$e" 2>/dev/null && kill -9 "$p" 2>/dev/null; done; exit 0')


def start(cell: Cell, host: Host, address: str, log_path: Path | None) -> RemoteServer:
    """The cell's server on `host`, listening at `address` (its address as the host check found it)."""
    return RemoteServer(cell, host, address, log_path)

