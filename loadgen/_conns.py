"""--xfer-connections: how the users of one Locust process hold connections, and the count of those made.

- user: each user makes its connection at its start and keeps it (a frame client reconnects by itself after
  a lost connection; a gRPC channel does too): today's behaviour.
- call: a new connection for each operation, closed after it (the connect is inside the operation's time).
- pool:N: N connections per process. A frame connection carries one operation at a time (FrameClient is not
  shared by greenlets), so a user borrows one and waits when all N are lent; a gRPC channel multiplexes, so
  operations are spread over the N channels in turn (on the grpc.aio loop, loadgen._aioloop).

Every gRPC channel here gets a subchannel pool of its own: with grpcio's default (global) pool, all channels
of a process to the same address share one TCP connection, and every strategy would be "one per process".

Counted per process (loadgen._recorder.Snapshot.conns): a frame TCP connect, a gRPC channel becoming READY;
a reconnect is a connection made again by the same client (user, pool) after its previous one was lost. Over
TLS (--xfer-tls-ca, loadgen._tls) each of those connections made one handshake, counted with it; so with `call`
every operation pays a handshake.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

import gevent.queue
import grpc
import grpc.aio

from loadgen._grpc_aio import AioClient, Outcome
from loadgen._options import Config
from loadgen._tls import ProcessTLS, process_tls
from py_client import FrameClient, XferError, parse_target

# (reconnect?, resumed) -> None: one connection made; resumed is its TLS handshake's label, "" for plaintext.
Count = Callable[[bool, str], None]
CHANNEL_OPTIONS: list[tuple[str, int | str]] = [("grpc.use_local_subchannel_pool", 1)]


class CountedFrameClient(FrameClient):
    """A FrameClient that reports each TCP connect it makes (its first, then every reconnect). Over TLS each
    connection resumes the process's latest session, and offers its own when it closes."""

    def __init__(self, address: str, count: Count, *, inflight: int, timeout: float,
                 tls: ProcessTLS | None = None) -> None:
        super().__init__(address, inflight=inflight, timeout=timeout, tls=tls.options if tls else None)
        self._count = count
        self._made = False
        self._process_tls = tls

    def _connect(self) -> socket.socket:
        if self.connected:
            return super()._connect()
        shared = self._process_tls
        if shared is not None and shared.resume:
            self._tls_session = shared.session  # FrameClient resumes the session it holds here
        sock = super()._connect()  # a failed connect raises XferError("unavailable", reason): a Locust failure
        self._count(self._made, "" if shared is None else shared.resumed_label(bool(self.tls_resumed)))
        self._made = True
        return sock

    def close(self) -> None:
        super().close()  # keeps the closed connection's session in _tls_session, when it had a ticket
        if self._process_tls is not None:
            self._process_tls.keep(self._tls_session)


class CountedAioClient(AioClient):
    """An AioClient on its own connection that reports each READY of its channel (over TLS, each READY is one
    handshake made). Make it on the loop."""

    def __init__(self, address: str, timeout: float, count: Count, tls: ProcessTLS | None = None) -> None:
        super().__init__(address, timeout, options=CHANNEL_OPTIONS, tls=tls)
        self._count = count
        self._resumed = "" if tls is None else tls.resumed_label(None)
        self._made = False
        self._counted_ready = False  # the channel's current READY has been counted
        self._watcher = asyncio.get_running_loop().create_task(self._watch())

    def _ready(self) -> None:
        if not self._counted_ready:
            self._counted_ready = True
            self._count(self._made, self._resumed)
            self._made = True

    async def _watch(self) -> None:
        state = self._channel.get_state(try_to_connect=False)
        while state is not grpc.ChannelConnectivity.SHUTDOWN:
            if state is grpc.ChannelConnectivity.READY:
                self._ready()
            else:
                self._counted_ready = False
            await self._channel.wait_for_state_change(state)
            state = self._channel.get_state(try_to_connect=False)

    async def close(self) -> None:
        # A channel that went READY and finished its call before the watcher ran is still READY here.
        self._watcher.cancel()
        if self._channel.get_state(try_to_connect=False) is grpc.ChannelConnectivity.READY:
            self._ready()
        await super().close()


async def one_shot(address: str, timeout: float, count: Count, start: float | None,
                   make: Callable[[AioClient], Coroutine[Any, Any, Any]], tls: ProcessTLS | None = None) -> Outcome:
    """--xfer-connections call on the loop: a channel for one operation, closed after it; timed from before
    the channel is made (the connect, and over TLS the handshake, are part of the operation)."""
    t0 = time.perf_counter() if start is None else start
    client = CountedAioClient(address, timeout, count, tls)
    try:
        return await client.timed(t0, make(client))
    finally:
        await client.close()


class AioPool:
    """--xfer-connections pool:N over gRPC aio: N channels made on first use, operations spread over them in
    turn. Used on the loop thread only."""

    def __init__(self, address: str, timeout: float, size: int, count: Count, tls: ProcessTLS | None = None) -> None:
        self._address, self._timeout, self._count, self._tls = address, timeout, count, tls
        self._clients: list[CountedAioClient | None] = [None] * size
        self._turn = itertools.cycle(range(size))

    def pick(self) -> AioClient:
        i = next(self._turn)
        client = self._clients[i]
        if client is None:
            client = self._clients[i] = CountedAioClient(self._address, self._timeout, self._count, self._tls)
        return client


class FramePool:
    """--xfer-connections pool:N for the frame users (greenlets): each connection is lent to one operation at a
    time. Clients are made on first use; making one does not connect, so it never yields to another greenlet."""

    def __init__(self, cfg: Config, host: str, count: Count) -> None:
        self._cfg, self._host, self._count = cfg, host, count
        self._timeout = cfg.timeout
        self._clients: list[CountedFrameClient | None] = [None] * cfg.connections.size
        self._free: gevent.queue.Queue[int] = gevent.queue.Queue()
        for i in range(cfg.connections.size):
            self._free.put(i)

    def _client(self, i: int) -> CountedFrameClient:
        client = self._clients[i]
        if client is None:
            client = self._clients[i] = make_client(self._cfg, self._host, self._count)
        return client

    @contextmanager
    def borrow(self) -> Iterator[CountedFrameClient]:
        try:
            i = self._free.get(timeout=self._timeout)
        except gevent.queue.Empty:
            raise XferError("deadline_exceeded", f"client: no pooled connection free within {self._timeout:g} s "
                                                 "(--xfer-timeout)") from None
        try:
            yield self._client(i)
        finally:
            self._free.put(i)


def make_client(cfg: Config, host: str, count: Count) -> CountedFrameClient:
    """A frame user's client that counts its connections (gRPC users run on the aio loop instead)."""
    return CountedFrameClient(parse_target(host).address, count, inflight=cfg.inflight, timeout=cfg.timeout,
                              tls=process_tls(cfg))
