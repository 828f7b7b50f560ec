"""What the runner needs of a running server, whatever runs it.

A structural type: `xferbench.run.process.Server` (and its subclass `CommandServer`) and
`xferbench.run.containers.backend.ContainerServer` satisfy it without inheriting from it, so the lifecycle
reaches a host process and a container alike, with no unions and no probes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from xferbench.analysis.row import Figures
from xferbench.measure.tree import Tree


class ServerHandle(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def ready(self) -> dict[str, str]:
        """The ready line's fields (its addresses are the ones a client connects to)."""
        ...

    @property
    def pid(self) -> int:
        """The server's own process: for a container, the server under its wrapper shell."""
        ...

    @property
    def tree(self) -> Tree:
        """Every process of the server and the clock of their CPU (its own cgroup, a container's, or /proc)."""
        ...

    @property
    def tail(self) -> Sequence[str]:
        """Its last output lines."""
        ...

    def addr(self, key: str) -> str:
        """The ready line's `key=` address; KeyError when it has none."""
        ...

    def alive(self) -> bool: ...

    def wait(self, timeout_s: float) -> bool:
        """Waits up to timeout_s, returning early (True) when the server exits."""
        ...

    def sample(self) -> None:
        """Takes the server's own figures now, if it has any (a container's cgroup); the last reading before
        it exits is the one kept."""
        ...

    def row_figures(self) -> Figures:
        """The RunRow fields the server's own figures fill ({} for a host process)."""
        ...

    def stop(self) -> int | None:
        """Stops it; its exit status. A second call only returns the status."""
        ...

    def exit_text(self) -> str:
        """How it went once exited: "exited with status 2", "was OOM-killed (...)"."""
        ...
