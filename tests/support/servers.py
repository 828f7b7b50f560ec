"""Real server processes for tests: start on free ports, wait for the ready line, stop cleanly.

Every server speaks the process interface of proto/PROTOCOL.md: one `<name> ready key=value ...` line on
stderr once its listeners are bound. A new server joins every parametrised suite with one entry in the
registry, xferbench/config/servers.py (SERVERS below is derived from it).

This module is a thin layer over the runner's own implementation, `xferbench.run.process.Server`: the same
spawn (own process group, PR_SET_PDEATHSIG, in the registry `kill_all()` empties at exit), the same
ready-line reading with a deadline, the same stop (SIGTERM to the group, SIGKILL after the grace period).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from xferbench.config import servers as registry
from xferbench.run.process import READY_TIMEOUT_S, STOP_GRACE_S, Server, ServerStartError, parse_ready_line

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "build" / "bin"
STOP_TIMEOUT_S = STOP_GRACE_S

__all__ = [
    "BIN",
    "READY_TIMEOUT_S",
    "ROOT",
    "SERVERS",
    "STOP_TIMEOUT_S",
    "RunningServer",
    "ServerKind",
    "parse_ready_line",
    "running_server",
    "selected_servers",
    "server_transports",
    "start_server",
]


@dataclass(frozen=True)
class ServerKind:
    name: str
    binary_env: str  # env var that overrides the binary (e.g. an ASan build)
    transports: tuple[str, ...]
    port0_flags: tuple[str, ...]

    @property
    def binary(self) -> Path:
        return Path(os.environ.get(self.binary_env) or BIN / self.name)


# The kinds the protocol suites run against: a registry entry that implements a part of the protocol only (its
# `conformance` false, e.g. bare-echo's Echo) is measured by the runner but not held to every suite.
SERVERS: dict[str, ServerKind] = {
    name: ServerKind(spec.name, spec.binary_env, spec.transports, spec.port0_flags)
    for name, spec in registry.SERVERS.items()
    if spec.conformance
}


def selected_servers() -> list[str]:
    """XFERD_SERVERS=xferd-c (comma-separated) narrows the suites to some servers; default all."""
    wanted = os.environ.get("XFERD_SERVERS")
    names = [n.strip() for n in wanted.split(",")] if wanted else list(SERVERS)
    unknown = [n for n in names if n not in SERVERS]
    if unknown:
        raise ValueError(f"XFERD_SERVERS names unknown servers {unknown}; known: {sorted(SERVERS)}")
    return names


def server_transports() -> list[tuple[str, str]]:
    """Every (server, transport) pair the suites run over."""
    return [(s, t) for s in selected_servers() for t in SERVERS[s].transports]


@dataclass
class RunningServer:
    kind: ServerKind
    server: Server

    @property
    def proc(self) -> subprocess.Popen[bytes]:
        return self.server.proc

    @property
    def ready(self) -> dict[str, str]:
        """The ready line's key=value fields."""
        return self.server.ready

    @property
    def stderr_lines(self) -> list[str]:
        """Everything the server wrote to stderr so far (the ready line included)."""
        return list(self.server.tail)

    def addr(self, key: str) -> str:
        """The bound host:port for 'grpc', 'frame' or 'metrics'."""
        return self.ready[key]

    def target(self, transport: str) -> str:
        return f"{transport}://{self.addr(transport)}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.addr('metrics')}/metrics"

    def alive(self) -> bool:
        return self.server.alive()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Stops the server and returns its exit status; collects the rest of stderr."""
        return self.server.stop(sig)

    def stop_cleanly(self) -> None:
        """Stops the server at the end of a test and requires a graceful exit: status 0 after SIGTERM.
        A crash during the test, a hang at shutdown or (under ASan) a LeakSanitizer report all fail
        here. The one other accepted end is a SIGKILL the test sent on purpose."""
        killed_by_test = self.proc.poll() == -signal.SIGKILL
        status = self.stop()
        if not killed_by_test:
            assert status == 0, (f"{self.kind.name} exited with status {status} at the end of the test:\n"
                                 + "\n".join(self.stderr_lines[-40:]))


def start_server(name: str, args: Sequence[str] = (), env: dict[str, str] | None = None) -> RunningServer:
    """Starts a server on free loopback ports and returns once its ready line is read."""
    kind = SERVERS[name]
    if not kind.binary.exists():
        raise FileNotFoundError(f"{kind.binary} is not built; run `make build`")
    try:
        server = Server(
            name,
            [str(kind.binary), *kind.port0_flags, *args],
            {**os.environ, **(env or {})},
            tail_lines=None,
        )
    except ServerStartError as e:
        text = f"{e}:\n" + "\n".join(e.tail)
        raise (TimeoutError(text) if e.timed_out else RuntimeError(text)) from None
    return RunningServer(kind, server)


@contextmanager
def running_server(name: str, args: Sequence[str] = (), env: dict[str, str] | None = None) -> Iterator[RunningServer]:
    server = start_server(name, args, env)
    try:
        yield server
    except BaseException:
        server.stop()  # the test's own failure is the one to report
        raise
    server.stop_cleanly()
