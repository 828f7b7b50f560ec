"""Servers started on first use and shared by every test of a module (one process per server kind)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests.support.servers import RunningServer, start_server


class ServerPool:
    """Starts each server kind once, with a disk store in a fresh folder (or `store="mem"`)."""

    def __init__(self, tmp: pytest.TempPathFactory, *, args: Sequence[str] = (), store: str = "disk",
                 on_start: Callable[[RunningServer], None] | None = None) -> None:
        self._tmp = tmp
        self._args = list(args)
        self._store = store
        self._on_start = on_start
        self._servers: dict[str, RunningServer] = {}
        self.stores: dict[str, Path] = {}

    def get(self, name: str) -> RunningServer:
        s = self._servers.get(name)
        if s is not None:
            assert s.alive(), f"{name} died: " + "\n".join(s.stderr_lines)
            return s
        args = list(self._args)
        if self._store == "disk":
            folder = self._tmp.mktemp(f"store-{name}")
            self.stores[name] = folder
            args.append(f"--store=disk:{folder}")
        else:
            args.append(f"--store={self._store}")
        s = start_server(name, args)
        self._servers[name] = s
        if self._on_start is not None:
            self._on_start(s)
        return s

    def running(self) -> list[RunningServer]:
        return list(self._servers.values())

    def close(self) -> None:
        servers, self._servers = list(self._servers.values()), {}
        for s in servers:
            s.stop_cleanly()


def module_pool(*, args: Sequence[str] = (), store: str = "disk",
                on_start: Callable[[RunningServer], None] | None = None) -> Callable[..., Iterator[ServerPool]]:
    """A module-scoped fixture giving one ServerPool with these options to every test of the module, closed
    after its last test. Bind it to the fixture's name: `pool = module_pool(...)` in a conftest or test module
    (pytest names a fixture after the attribute that holds it)."""

    @pytest.fixture(scope="module")
    def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
        p = ServerPool(tmp_path_factory, args=args, store=store, on_start=on_start)
        yield p
        p.close()

    return pool
