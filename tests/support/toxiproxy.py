"""Toxiproxy for tests: toxiproxy-server on a free port, proxies in front of started servers, toxics.

A thin layer over the runner's own implementation, `xferbench.run.toxiproxy` (the same spawn in its own
process group, the same readiness poll of GET /version with a deadline, the same stop), as
tests/support/servers.py is over `xferbench.run.process.Server`.

    with running_toxiproxy() as tp:
        proxy = ProxiedServer.create(tp, server, "frame")
        with proxy.toxic(Toxic("latency", {"latency": 100})):
            ...  # calls to proxy.target cross the toxic
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from tests.support.servers import RunningServer
from xferbench.run.process import ServerStartError
from xferbench.run.toxiproxy import Toxic, Toxiproxy, ToxiproxyError, binary

__all__ = ["ProxiedServer", "Toxic", "Toxiproxy", "ToxiproxyError", "binary", "running_toxiproxy"]


@contextmanager
def running_toxiproxy() -> Iterator[Toxiproxy]:
    """A toxiproxy-server for the block; stopped (process group, SIGKILL after a grace) whatever happens."""
    try:
        tp = Toxiproxy()
    except ServerStartError as e:
        raise RuntimeError(f"{e}:\n" + "\n".join(e.tail)) from None
    try:
        yield tp
    finally:
        tp.stop()


@dataclass
class ProxiedServer:
    """One proxy in front of one listener (`transport`) of a running server."""

    toxiproxy: Toxiproxy
    server: RunningServer
    transport: str
    name: str
    listen: str

    @classmethod
    def create(cls, tp: Toxiproxy, server: RunningServer, transport: str) -> ProxiedServer:
        name = f"{server.kind.name}-{transport}-{server.proc.pid}"
        listen = tp.create_proxy(name, server.addr(transport))
        return cls(tp, server, transport, name, listen)

    @property
    def target(self) -> str:
        """The URL clients use to cross the proxy."""
        return f"{self.transport}://{self.listen}"

    @property
    def direct(self) -> str:
        """The server's own URL, past the proxy: what the test checks the server's state through."""
        return self.server.target(self.transport)

    def add(self, toxic: Toxic) -> str:
        return self.toxiproxy.add_toxic(self.name, toxic)

    def remove(self, name: str) -> None:
        self.toxiproxy.remove_toxic(self.name, name)

    def clear(self) -> None:
        """Removes every toxic of this proxy (the test's own cleanup; other proxies keep theirs)."""
        for t in self.toxiproxy.toxics(self.name):
            self.toxiproxy.remove_toxic(self.name, t["name"])

    @contextmanager
    def toxic(self, *toxics: Toxic) -> Iterator[Sequence[str]]:
        """The toxics for the block, in order (Toxiproxy chains them in the order they were added)."""
        names: list[str] = []
        try:
            for t in toxics:
                names.append(self.add(t))
            yield names
        finally:
            for n in reversed(names):
                self.remove(n)
