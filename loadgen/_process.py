"""The state of one Locust process running loadgen: its role, options, measurements, runs and payload.

Locust calls event hooks and builds users with no place to hang state of our own, so there is exactly one
XferProcess per Locust process, made by the init hook (`begin`) and reached through `current()`.
"""

from __future__ import annotations

import os
import random
import socket
import zlib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from loadgen._cluster import RunClock, Workers
from loadgen._options import Config, defaults
from loadgen._recorder import Recorder
from py_client.content import gen_bytes


@dataclass(eq=False)  # identity: one per process, and prefix_crc's cache keys on it
class XferProcess:
    role: str  # local | master | worker
    environment: Any
    config: Config = field(default_factory=defaults)
    recorder: Recorder = field(default_factory=Recorder)
    clock: RunClock = field(default_factory=RunClock)
    workers: Workers = field(default_factory=Workers)  # master only
    worker_count: int = 1  # worker: how many workers share --xfer-rate (sent by the master)
    transport: str = ""
    metrics_url: str = ""
    registry: Any = None  # prometheus_client registry of this process's /metrics
    pool: Any = None  # --xfer-connections pool:N: the process's pool (loadgen._conns), made by its first user
    seed: int = field(default_factory=lambda: random.SystemRandom().getrandbits(32))
    upload_prefix: str = field(
        default_factory=lambda: f"lg-{socket.gethostname()[:40].replace('/', '_')}-{os.getpid()}")
    user_classes: list[Any] = field(default_factory=list)  # every user class, before --xfer-mix dropped any
    idle_classes: tuple[str, ...] = ()  # classes of the mix that got no user in the current run
    summarised: int = 0  # the last run number whose summary was printed
    _users_made: int = 0
    _payload: bytes = b""

    def next_user_number(self) -> int:
        self._users_made += 1
        return self._users_made

    def users_here(self) -> int:
        runner = getattr(self.environment, "runner", None)
        return 0 if runner is None or self.role == "master" else int(runner.user_count)

    def payload(self) -> bytes:
        """One buffer per process: the content of gen:<N>:<seed>; its first n bytes are gen:<n>:<seed>."""
        need = max(self.config.sizes.max_size, self.config.echo_size.max_size, 1)
        if len(self._payload) < need:
            self._payload = gen_bytes(need, self.seed)
            self.prefix_crc.cache_clear()
        return self._payload

    @lru_cache(maxsize=4096)  # noqa: B019  (one XferProcess per process: the cache lives as long anyway)
    def prefix_crc(self, size: int) -> int:
        return zlib.crc32(memoryview(self.payload())[:size]) & 0xFFFFFFFF


_current: XferProcess | None = None


def begin(role: str, environment: Any) -> XferProcess:
    global _current
    _current = XferProcess(role, environment)
    return _current


def current() -> XferProcess:
    if _current is None:
        raise RuntimeError("loadgen: no Locust process yet (the init event has not fired)")
    return _current
