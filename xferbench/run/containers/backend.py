"""The runner's container backend: one cell's server in a container, started and stopped like a process.

`ContainerServer` is the runner's server handle (xferbench/run/handle.py) for a container, as
`xferbench.run.process.Server` is for a host process, so the runner's start/measure/stop steps are the same for
both backends:

- the server listens on 0.0.0.0 inside the container on its image's ports (deploy/docker/*.Dockerfile), each
  published to a free 127.0.0.1 port; its ready line is read from the container's log stream and its
  addresses rewritten to the published ones, so Locust and the scraper connect as to a host process;
- a command server (`server = "command"` with the user's `image`) runs its command under the same wrapper
  (the image needs /bin/sh), each placeholder port published on the same number of 127.0.0.1, and is ready by
  xferbench/run/commandserver.py's `ReadyCheck`, polled as for a host process; the rest is the same lifecycle;
- [servers.limits] become cgroup limits (nano_cpus, mem_limit with no swap beyond it) and the experiment's
  server pinning a cpuset; every container gets `base.ulimits()`;
- the log stream ends when the container exits: that is `wait()`; then the engine says whether the
  kernel OOM-killed it (`exit_text()`);
- the container's own figures (`cgroup.figures`) are read at each `sample()` and before it is stopped;
  stopping removes it;
- every live container is in a registry that `kill_all()` (atexit, the runner's Ctrl-C/SIGTERM path) removes;
- on another host's engine (xferbench/run/containers/remote.py) the same lifecycle, through an ssh forward: its
  ports published on that host's address, and its figures from that engine's statistics.

One file a little over the project's 400 lines, on purpose: the handle adds itself to that registry when it
creates a container and leaves it when it removes one, and `kill_all` and `remove_orphans` act on the same
containers; split apart, each half would reach into the other's state.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests.exceptions
from docker.models.containers import Container

from xferbench.analysis.row import Figures
from xferbench.config import Cell, Limits, servers
from xferbench.measure import cgroup, procfs, tree
from xferbench.measure.tree import Tree
from xferbench.run import commandserver
from xferbench.run.containers import LABEL, images
from xferbench.run.containers.base import ulimits
from xferbench.run.process import READY_TIMEOUT_S, TAIL_LINES, ServerStartError, parse_ready_line

RUNNER_PID_LABEL = "io.xferbench.runner-pid"
# The machine of that pid: an engine on another host may serve runners of several machines, and a pid is only
# known alive on its own.
RUNNER_HOST_LABEL = "io.xferbench.runner-host"
# The server runs under a small sh (PID 1) that forwards SIGTERM/SIGINT, and once the server is gone prints
# the cgroup's OOM-kill count before the cgroup disappears with the container. Why: Podman 4.3 with runc on
# cgroup v1 reports OOMKilled=false for a server the kernel OOM-killed (exit 137), and the host-side cgroup
# files vanish with it. "$0" is the server, "$@" its arguments; the count line is OOM_MARK oom_kill=N. It also
# prints the cgroup's final CPU-period and memory-peak counters, one OOM_MARK KEY=N line each: on another host's
# engine they are where those figures come from (Podman's statistics report no throttling and no peak).
OOM_MARK = "xferbench-container"
WRAPPER = (
    # Traps first: a stop that comes before the server's pid is known is kept. Before the server starts, it
    # never starts; while it starts, the stop is handed on once its pid is known.
    "pid=; sig=; code=\n"
    "trap 'if [ -n \"$pid\" ]; then kill -TERM $pid; else sig=TERM; code=143; fi' TERM\n"
    "trap 'if [ -n \"$pid\" ]; then kill -INT $pid; else sig=INT; code=130; fi' INT\n"
    '[ -z "$sig" ] || exit $code\n'
    '"$0" "$@" & pid=$!\n'
    '[ -z "$sig" ] || kill -$sig $pid\n'
    "wait $pid; code=$?\n"
    # wait returns early (status > 128) when a trapped signal arrives: wait again for the server's own exit
    "while kill -0 $pid 2>/dev/null; do wait $pid; code=$?; done\n"
    # The server may have ended between that early return and kill -0, leaving 143 in place of its status: the
    # shell still holds it for one more wait (127 where a shell has already given it out: keep the code then).
    "wait $pid 2>/dev/null; last=$?; [ $last -ne 127 ] && code=$last\n"
    "for f in /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events; do\n"
    '  [ -r "$f" ] && while read -r k v; do [ "$k" = oom_kill ] && echo "' + OOM_MARK + ' oom_kill=$v" >&2; done < "$f"\n'
    "done\n"
    # cgroup v1 (cpu or cpu,cpuacct) or v2; v2's memory.events "max" is v1's failcnt
    "for f in /sys/fs/cgroup/cpu/cpu.stat /sys/fs/cgroup/cpu,cpuacct/cpu.stat /sys/fs/cgroup/cpu.stat; do\n"
    '  [ -r "$f" ] || continue\n'
    '  while read -r k v; do case $k in nr_periods|nr_throttled|throttled_time|throttled_usec) echo "'
    + OOM_MARK + ' $k=$v" >&2;; esac; done < "$f"\n'
    "  break\n"
    "done\n"
    "for f in /sys/fs/cgroup/memory/memory.max_usage_in_bytes:mem_peak /sys/fs/cgroup/memory.peak:mem_peak "
    "/sys/fs/cgroup/memory/memory.failcnt:failcnt; do\n"
    '  [ -r "${f%:*}" ] && read -r v < "${f%:*}" && echo "' + OOM_MARK + ' ${f##*:}=$v" >&2\n'
    "done\n"
    '[ -r /sys/fs/cgroup/memory.events ] && while read -r k v; do [ "$k" = max ] && echo "'
    + OOM_MARK + ' failcnt=$v" >&2; done < /sys/fs/cgroup/memory.events\n'
    "exit $code\n"
)
STOP_GRACE_S = 10

# Over 400 lines: one container's whole lifecycle, for our servers and for commands, kept in one class.
_live: dict[str, Container] = {}
_live_lock = threading.Lock()


def image_env(server: str) -> str:
    """The variable that names another image for a server, as XFERD_GO_BIN names another binary:
    XFERBENCH_IMAGE_XFERD_GO, XFERBENCH_IMAGE_XFERD_C."""
    return "XFERBENCH_IMAGE_" + server.upper().replace("-", "_")


def default_image(kind: servers.ServerKind) -> str | None:
    """The image `xferbench images build` makes for a kind of server, None if it has none (a command's is the user's)."""
    image = kind.image
    return images.tag(image.name) if image else None


def image_for(cell: Cell) -> str:
    """The cell's image: [[servers]] image, else $XFERBENCH_IMAGE_<SERVER>, else the server's default."""
    image = cell.image or os.environ.get(image_env(cell.server)) or default_image(cell.kind)
    if image is None:
        raise ServerStartError(f"{cell.server} has no default image: name one with `image =` in [[servers]]", [])
    return image


def ports(server: str) -> Mapping[str, int]:
    """The ports the server listens on inside its image (the EXPOSE of deploy/docker/<server>.Dockerfile)."""
    return servers.get(server).ports


def container_argv(cell: Cell) -> list[str]:
    """The server's arguments inside the container (the image's entrypoint is the server): its listeners on
    0.0.0.0 at the image's ports, then the cell's flags and args."""
    listen = [f"--{k}-addr=0.0.0.0:{p}" for k, p in ports(cell.server).items()]
    return [*listen, *(f"--{k}={v}" for k, v in cell.flags.items()), *cell.args]


def container_env(cell: Cell) -> dict[str, str]:
    """Only the cell's own environment: the host's (PATH, HOME, ...) means nothing inside the image."""
    return {k: v for k, v in cell.env.items() if v != ""}


def limit_kwargs(limits: Limits, cpus: tuple[int, ...]) -> dict[str, Any]:
    """The SDK's create() arguments for the cell's limits and the server's CPU pinning."""
    kw: dict[str, Any] = {"ulimits": ulimits()}
    if limits.cpus is not None:
        kw["nano_cpus"] = round(limits.cpus * 1e9)
    if limits.memory is not None:
        kw["mem_limit"] = limits.memory
        kw["memswap_limit"] = limits.memory  # no swap beyond the limit: over it is an OOM kill, as in production
    if cpus:
        kw["cpuset_cpus"] = ",".join(map(str, cpus))
    return kw


@dataclass(frozen=True)
class _Start:
    """How a kind's server starts in a container: ours by its image's entrypoint, ready at the ready line that
    begins with its word; a command by its own command line (placeholders filled), ready once its condition holds."""

    ready_word: str | None
    launch: commandserver.Launch | None


def _start_registry(cell: Cell) -> _Start:
    spec = cell.kind
    assert isinstance(spec, servers.ServerSpec), "a registry kind"
    return _Start(spec.ready_word, None)


def _start_command(cell: Cell) -> _Start:
    return _Start(None, commandserver.launch(cell, container_env(cell)))


# Each kind's start in a container, by its `launcher` (as xferbench/run/serverstart.py's for a host process).
STARTS: dict[servers.Launcher, Callable[[Cell], _Start]] = {"registry": _start_registry, "command": _start_command}


class ContainerServer:
    """One cell's server in a container, up once its ready line is read from the container's log."""

    publish_at = "127.0.0.1"  # the address its ports are published on, where the load and the scraper connect

    def __init__(
        self,
        client: docker.DockerClient,
        cell: Cell,
        log_path: Path | None = None,
        cpus: tuple[int, ...] = (),
        ready_timeout_s: float = READY_TIMEOUT_S,
        run_label: str = "",
    ) -> None:
        self.name = cell.server
        how = STARTS[cell.kind.launcher](cell)
        self._ready_word, self._launch = how.ready_word, how.launch
        self._check = commandserver.ReadyCheck(self._launch.ready) if self._launch else None
        if self._launch:
            self.name = Path(self._launch.argv[0]).name
            ready_timeout_s = self._launch.ready.timeout_s
        self.image = image_for(cell)
        self.limits = cell.limits
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.ready: dict[str, str] = {}
        self.ready_line = ""
        self.figures: Figures = {}
        self.oom_killed = False
        self.oom_kills: int | None = None  # the cgroup's count, printed by the wrapper as the container ends
        self.at_exit: dict[str, int] = {}  # the cgroup's other final counters, printed by the wrapper alike
        self.returncode: int | None = None  # set once the container has exited
        self._pid = 0  # the wrapper's host pid once started, then the server's under it
        self._client = client
        self._stopped = False
        self._exited = threading.Event()
        self._ready_seen = threading.Event()
        self._log = open(log_path, "w", encoding="utf-8") if log_path else None
        self.container = self._create(cell, cpus, run_label)
        try:
            self._start(ready_timeout_s)
        except BaseException:
            self._remove()
            raise

    def _create(self, cell: Cell, cpus: tuple[int, ...], run_label: str) -> Container:
        try:
            self._client.images.get(self.image)
        except docker.errors.ImageNotFound:
            self._close_log()
            how = (
                "pull or build it (xferbench never builds a command's image)"
                if self._launch
                else "build it with `xferbench images build`"
            )
            raise ServerStartError(f"image {self.image} not found: {how}", []) from None
        labels = {
            LABEL: "runner",
            RUNNER_PID_LABEL: str(os.getpid()),
            RUNNER_HOST_LABEL: socket.gethostname(),
            "io.xferbench.cell": cell.name,
            "io.xferbench.run": run_label,
        }
        argv, env, published = self._inside(cell)
        try:
            container = self._client.containers.create(
                self.image,
                argv,
                entrypoint=["/bin/sh", "-c", WRAPPER],
                name=f"xferbench-{cell.server}-{uuid.uuid4().hex[:10]}",
                environment=env,
                ports=published,
                labels=labels,
                detach=True,
                **limit_kwargs(cell.limits, cpus),
            )
        except docker.errors.APIError as e:
            self._close_log()
            raise ServerStartError(f"the engine refused the container: {_explain(e)}", []) from None
        with _live_lock:
            _live[str(container.id)] = container
        return container

    def _inside(self, cell: Cell) -> tuple[list[str], dict[str, str], dict[str, Any]]:
        """What the container runs under the wrapper, its environment, and its ports to publish on 127.0.0.1."""
        if self._launch:
            # A command's placeholder ports are free host ports: each is published on the same number, so its
            # ready, metrics and load addresses are the same as for a host process.
            same = {f"{p}/tcp": ("127.0.0.1", p) for p in self._launch.ports.values()}
            return self._launch.argv, self._launch.env, same
        entry = self._client.images.get(self.image).attrs["Config"].get("Entrypoint") or []
        if len(entry) != 1:
            self._close_log()
            raise ServerStartError(f"image {self.image}: its entrypoint must be the server binary alone, not {entry}", [])
        # (address, None): the engine picks a free host port on that address (read back from inspect).
        published: dict[str, Any] = {f"{p}/tcp": (self.publish_at, None) for p in ports(cell.server).values()}
        return [entry[0], *container_argv(cell)], container_env(cell), published

    def _start(self, timeout_s: float) -> None:
        try:
            self.container.start()
        except docker.errors.APIError as e:
            raise ServerStartError(f"the engine could not start {self.name}'s container: {_explain(e)}", []) from None
        self.container.reload()
        wrapper_pid = self._pid = int(self.container.attrs["State"]["Pid"])
        threading.Thread(target=self._drain, name=f"{self.name}-log", daemon=True).start()
        deadline = time.monotonic() + timeout_s
        while not self._is_ready():
            if self._exited.is_set():
                raise ServerStartError(f"{self.name} {self.exit_text()} before it was ready{self._what()}", list(self.tail))
            if time.monotonic() > deadline:
                what = (
                    f"was not ready within {timeout_s:g}s: no {self._check.condition()}"
                    if self._check
                    else f"printed no ready line within {timeout_s:.0f}s"
                )
                raise ServerStartError(f"{self.name} {what}", list(self.tail), timed_out=True)
        if self._launch and self._check:
            self.ready, self.ready_line = dict(self._launch.addrs), self._check.condition()
        else:
            self.ready = self._published(self.ready)
        self._measure(wrapper_pid)

    def _measure(self, wrapper_pid: int) -> None:
        """What the runner measures it by: the server's pid under the wrapper, and the container's cgroup."""
        self._pid = _child(wrapper_pid) or wrapper_pid  # the server itself, under the wrapper
        # The container's own cgroup counts the whole tree (the wrapper's shell is a sleeping few hundred KiB).
        group = cgroup.of_pid(wrapper_pid)
        self.tree: Tree = tree.of_server(self._pid, group)

    def _is_ready(self) -> bool:
        """Our servers: their ready line seen in the log; a command: its condition polled (as on the host)."""
        if self._check is None:
            return self._ready_seen.wait(0.05)
        if self._check.met():
            return True
        self._exited.wait(commandserver.CHECK_EVERY_S)
        return False

    def _what(self) -> str:
        return f" ({self._check.condition()})" if self._check else ""

    def _published(self, inside: dict[str, str]) -> dict[str, str]:
        """The ready line's addresses, each replaced by the port it is published on (at `publish_at`)."""
        self.container.reload()
        bound = self.container.attrs["NetworkSettings"]["Ports"] or {}
        out = dict(inside)
        for key, port in ports(self.name).items():
            if key in out:
                host = (bound.get(f"{port}/tcp") or [{}])[0]
                if not host.get("HostPort"):
                    raise ServerStartError(f"{self.name}'s {key} port {port} was not published: {bound}", list(self.tail))
                at = f"[{self.publish_at}]" if ":" in self.publish_at else self.publish_at
                out[key] = f"{at}:{host['HostPort']}"
        return out

    def _lines(self) -> Iterator[str]:
        buf = b""
        for chunk in self.container.logs(stream=True, follow=True, stdout=True, stderr=True):
            buf += chunk
            while b"\n" in buf:
                raw, buf = buf.split(b"\n", 1)
                yield raw.decode(errors="replace")
        if buf:
            yield buf.decode(errors="replace")

    def _drain(self) -> None:
        """Follows the log until the container exits; then notes how it exited."""
        with contextlib.suppress(docker.errors.DockerException, requests.exceptions.RequestException, OSError):
            for line in self._lines():
                if (count := _counter(line)) is not None:
                    key, n = count
                    self.at_exit[key] = n
                    if key == "oom_kill":
                        self.oom_kills = n
                        self.oom_killed = self.oom_killed or n > 0
                    continue
                self.tail.append(line)
                if self._check:
                    self._check.see(line)
                if self._log:
                    self._log.write(line + "\n")
                    self._log.flush()
                if (
                    self._ready_word is not None
                    and not self._ready_seen.is_set()
                    and (ready := parse_ready_line(line, self._ready_word)) is not None
                ):
                    self.ready, self.ready_line = ready, line
                    self._ready_seen.set()
        self._note_exit()

    def _note_exit(self) -> None:
        """Waits (bounded) for the container to be not running, then records its status and OOM kill."""
        with contextlib.suppress(docker.errors.DockerException, requests.exceptions.RequestException):
            result = self.container.wait(timeout=STOP_GRACE_S)
            self.returncode = int(result.get("StatusCode", -1))
            self.container.reload()
            state = self.container.attrs["State"]
            self.oom_killed = self.oom_killed or bool(state.get("OOMKilled"))
        if self.returncode is None:
            self.returncode = -1
        self._exited.set()

    def exit_text(self) -> str:
        if self.oom_killed:
            return f"was OOM-killed (memory limit {_mib(self.limits.memory)})"
        return f"exited with status {self.returncode}"

    @property
    def pid(self) -> int:
        return self._pid

    def wait(self, timeout_s: float) -> bool:
        """Waits up to timeout_s for the container to exit (its log stream to end); whether it has."""
        return self._exited.wait(timeout_s)

    def addr(self, key: str) -> str:
        if key not in self.ready:
            raise KeyError(f"{self.name}'s ready line has no {key}= address: {self.ready_line!r}")
        return self.ready[key]

    def alive(self) -> bool:
        return not self._exited.is_set()

    def sample(self) -> None:
        """The container's cgroup figures now (kept: the last reading before it exits is what a failed run
        reports)."""
        if self.alive():
            now = cgroup.figures(self._pid)
            if now:
                self.figures = now

    def row_figures(self) -> Figures:
        """The cgroup figures and whether the kernel OOM-killed it; the OOM-kill count as the container ended
        (the wrapper's), after any last reading."""
        out = self.figures.copy()
        out["ctr_oom_killed"] = self.oom_killed
        if self.oom_kills is not None:
            out["ctr_oom_kills"] = self.oom_kills
        return out

    def stop(self, sig: int = 15) -> int:
        """Reads the container's figures, stops it (SIGTERM, then SIGKILL after the grace period) and removes
        it. Returns the exit status; a second call only returns it."""
        if self._stopped:
            return self.returncode if self.returncode is not None else -1
        self._stopped = True
        self.sample()
        with contextlib.suppress(docker.errors.DockerException, requests.exceptions.RequestException):
            if self.alive():
                self.container.kill(signal=sig) if sig != 15 else self.container.stop(timeout=STOP_GRACE_S)
        self._exited.wait(STOP_GRACE_S + 5)
        self._remove()
        return self.returncode if self.returncode is not None else -1

    def _remove(self) -> None:
        _remove(self.container)
        self._close_log()

    def _close_log(self) -> None:
        if self._log:
            self._log.close()
            self._log = None

    def describe(self) -> dict[str, Any]:
        """What the row records about the container: image, id and limits."""
        return {"image": self.image, "id": str(self.container.id)[:12], "name": self.container.name, **self.limits.to_json()}


def _counter(line: str) -> tuple[str, int] | None:
    """A wrapper's "OOM_MARK KEY=N" line as (KEY, N); None for any other line."""
    if not line.startswith(OOM_MARK + " "):
        return None
    key, sep, value = line[len(OOM_MARK) + 1 :].partition("=")
    return (key, int(value)) if sep and value.isdigit() else None


def _child(pid: int) -> int | None:
    """The one child of the wrapper shell: the server."""
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    return int(kids[0]) if len(kids) == 1 else None


def _remove(container: Container) -> None:
    with contextlib.suppress(docker.errors.NotFound):
        try:
            container.remove(force=True)
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            pass
    with _live_lock:
        _live.pop(str(container.id), None)


def _explain(e: docker.errors.APIError) -> str:
    return " ".join(str(e.explanation or e).split())


def _mib(n: int | None) -> str:
    return f"{(n or 0) / (1 << 20):g} MiB"


def kill_all() -> None:
    """Removes every container this process started and has not removed yet (Ctrl-C, SIGTERM, exit), then closes
    the forwards to other hosts' engines it reached some of them through."""
    with _live_lock:
        containers = list(_live.values())
    for c in containers:
        _remove(c)
    if "xferbench.run.containers.forward" in sys.modules:
        from xferbench.run.containers import forward

        forward.close_all()


atexit.register(kill_all)


def remove_orphans(client: docker.DockerClient) -> list[str]:
    """Removes runner containers whose runner is gone (killed with SIGKILL, so no cleanup ran): labelled
    with a runner pid of this machine that no longer lives. Other projects', other machines' and live runners'
    containers stay."""
    gone = []
    here = socket.gethostname()
    for c in client.containers.list(all=True, filters={"label": f"{LABEL}=runner"}):
        pid = c.labels.get(RUNNER_PID_LABEL, "")
        if c.labels.get(RUNNER_HOST_LABEL, here) != here:
            continue
        if pid.isdigit() and int(pid) != os.getpid() and not procfs.pid_alive(int(pid)):
            _remove(c)
            gone.append(str(c.name))
    return gone
