"""Servers started on first use and shared by every test of a module (one process per server kind)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
