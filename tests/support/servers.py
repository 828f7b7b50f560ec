"""Real server processes for tests: start on free ports, wait for the ready line, stop cleanly.

Every server speaks the process interface of proto/PROTOCOL.md: one `<name> ready key=value ...` line on
stderr once its listeners are bound. A new server joins every parametrised suite with one SERVERS entry.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "build" / "bin"
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ServerKind:
    name: str
    binary_env: str  # env var that overrides the binary (e.g. an ASan build)
    transports: tuple[str, ...]
    port0_flags: tuple[str, ...]

    @property
    def binary(self) -> Path:
        return Path(os.environ.get(self.binary_env) or BIN / self.name)


SERVERS: dict[str, ServerKind] = {
    "xferd-go": ServerKind(
        "xferd-go", "XFERD_GO_BIN", ("grpc", "frame"),
        ("--grpc-addr=127.0.0.1:0", "--frame-addr=127.0.0.1:0", "--metrics-addr=127.0.0.1:0"),
    ),
    "xferd-c": ServerKind(
        "xferd-c", "XFERD_C_BIN", ("frame",),
        ("--frame-addr=127.0.0.1:0", "--metrics-addr=127.0.0.1:0"),
    ),
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
    proc: subprocess.Popen[bytes]
    ready: dict[str, str]
    stderr_lines: list[str] = field(default_factory=list)

    def addr(self, key: str) -> str:
        """The bound host:port for 'grpc', 'frame' or 'metrics'."""
        return self.ready[key]

    def target(self, transport: str) -> str:
        return f"{transport}://{self.addr(transport)}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.addr('metrics')}/metrics"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Stops the server and returns its exit status; collects the rest of stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            _, err = self.proc.communicate(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        self.stderr_lines += err.decode(errors="replace").splitlines()
        return self.proc.returncode


def parse_ready_line(line: str, name: str) -> dict[str, str] | None:
    words = line.split()
    if len(words) < 2 or words[0] != name or words[1] != "ready":
        return None
    return dict(w.split("=", 1) for w in words[2:] if "=" in w)


def start_server(name: str, args: Sequence[str] = (), env: dict[str, str] | None = None) -> RunningServer:
    """Starts a server on free loopback ports and returns once its ready line is read."""
    kind = SERVERS[name]
    if not kind.binary.exists():
        raise FileNotFoundError(f"{kind.binary} is not built; run `make build`")
    proc = subprocess.Popen(
        [str(kind.binary), *kind.port0_flags, *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    assert proc.stderr is not None
    lines: list[str] = []
    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    deadline = time.monotonic() + READY_TIMEOUT_S
    buf = b""
    try:
        while time.monotonic() < deadline:
            if not sel.select(timeout=deadline - time.monotonic()):
                continue
            chunk = os.read(proc.stderr.fileno(), 65536)
            if not chunk:  # stderr closed: the process exited before it was ready
                proc.wait(timeout=STOP_TIMEOUT_S)
                raise RuntimeError(f"{name} exited with {proc.returncode} before ready:\n" + "\n".join(lines))
            buf += chunk
            while b"\n" in buf:
                raw, buf = buf.split(b"\n", 1)
                line = raw.decode(errors="replace")
                lines.append(line)
                ready = parse_ready_line(line, name)
                if ready is not None:
                    return RunningServer(kind, proc, ready, lines)
        proc.kill()
        proc.wait()
        raise TimeoutError(f"{name} printed no ready line in {READY_TIMEOUT_S}s:\n" + "\n".join(lines))
    finally:
        sel.close()


@contextmanager
def running_server(name: str, args: Sequence[str] = (), env: dict[str, str] | None = None
                   ) -> Iterator[RunningServer]:
    server = start_server(name, args, env)
    try:
        yield server
    finally:
        server.stop()
