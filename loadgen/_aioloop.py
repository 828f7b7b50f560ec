"""One asyncio event loop per Locust process, on its own OS thread, where the gRPC users' calls run (grpc.aio).

Why: under gevent, grpcio's blocking calls run on gevent's thread pool, one hand-off to a thread and back per
call; that former path (removed) fell to about 1% of ghz's Echo rate (BENCHMARKS.md "Locust users vs ghz").
Here the users (greenlets) hand coroutines to one loop, which keeps many calls in flight on grpc.aio; results
come back in batches through one gevent async watcher (the hub's thread-safe way in), and only the user
greenlets touch Locust's events and statistics.

Locust monkey-patches `threading`, so a `threading.Thread` is a greenlet of the thread that starts it; grpc.aio
starts its completion-queue poller with `threading.Thread`, which would then block the loop's own thread. The
loop's thread and grpc's poller are therefore made from a private copy of the threading module bound to the
original `_thread` functions. Two more rules keep that thread clear of gevent: its log records are handed to
the hub before any handler takes its (gevent) lock, and one idle grpc.aio channel stays open for the process's
life, so grpc.aio never shuts down and restarts its poller under a loop still running.
"""

from __future__ import annotations

import _thread
import asyncio
import collections
import importlib.util
import logging
import sys
import threading
import types
from collections.abc import Callable, Coroutine
from typing import Any

import gevent
import gevent.event
from gevent import monkey

START_TIMEOUT = 10.0  # seconds for the loop thread to come up

Done = Callable[[Any, BaseException | None], None]


def os_threading() -> types.ModuleType:
    """A copy of the threading module whose threads are OS threads whatever gevent patched."""
    fake = types.ModuleType("_thread")
    fake.__dict__.update(_thread.__dict__)
    fake.__dict__.update(getattr(monkey, "saved", {}).get("_thread", {}))  # the originals gevent replaced, if it did
    spec = importlib.util.spec_from_file_location("_xfer_os_threading", threading.__file__)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load a copy of {threading.__file__}")
    module = importlib.util.module_from_spec(spec)
    saved = sys.modules["_thread"]
    sys.modules["_thread"] = fake
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules["_thread"] = saved
    return module


class LoopThread:
    """The loop's thread. submit() runs a coroutine there; its outcome comes back to `done` in gevent's hub."""

    def __init__(self) -> None:
        self.threading = os_threading()
        self._landed: collections.deque[tuple[Done, Any, BaseException | None]] = collections.deque()
        self._outbox: collections.deque[tuple[Callable[[], Coroutine[Any, Any, Any]], Done]] = collections.deque()
        self._kicked = False  # a wake-up of the loop for the outbox is on its way
        self._records: collections.deque[tuple[logging.Handler, logging.LogRecord]] = collections.deque()
        self._ident = -1
        self._watcher = gevent.get_hub().loop.async_()
        self._watcher.start(self._deliver)
        self._loop: asyncio.AbstractEventLoop | None = None
        ready = self.threading.Event()
        self.threading.Thread(target=self._run, args=(ready,), name="xfer-grpc-aio", daemon=True).start()
        if not ready.wait(START_TIMEOUT):  # an OS-thread event: blocks the hub, once, for at most this long
            raise RuntimeError(f"the gRPC event-loop thread did not start within {START_TIMEOUT:g} s")
        self._guard_handlers()
        # Not waited for: nothing here may yield to other greenlets, or a second user could start a second loop.
        self.submit(self._keep_grpc_aio, lambda _value, _err: None)

    @staticmethod
    async def _keep_grpc_aio() -> None:
        import grpc.aio

        # Never used, never connected (channels connect on their first call); it only keeps grpc.aio up.
        _keep.append(grpc.aio.insecure_channel("127.0.0.1:9"))

    def _guard_handlers(self) -> None:
        """Every handler (Locust sets them up before any user starts) hands this thread's records to the hub."""
        loggers = [logging.getLogger(), *(lg for lg in logging.Logger.manager.loggerDict.values()
                                          if isinstance(lg, logging.Logger))]
        for handler in {h for lg in loggers for h in lg.handlers}:
            handler.addFilter(self._hand_over(handler))

    def _hand_over(self, handler: logging.Handler) -> Callable[[logging.LogRecord], bool]:
        def keep_here(record: logging.LogRecord) -> bool:
            if self.threading.get_ident() != self._ident:
                return True
            self._records.append((handler, record))
            self._watcher.send()
            return False

        return keep_here

    def _run(self, ready: Any) -> None:
        # gevent's selector would need a gevent hub on this thread: use the original one.
        selector = monkey.get_original("selectors", "DefaultSelector")()
        loop = asyncio.SelectorEventLoop(selector)
        asyncio.set_event_loop(loop)
        self._loop = loop
        self._ident = self.threading.get_ident()
        # grpc.aio starts its poller thread (once per process, with its first channel) with this module's threading
        setattr(importlib.import_module("grpc._cython.cygrpc"), "threading", self.threading)  # noqa: B010
        ready.set()
        loop.run_forever()

    def submit(self, make: Callable[[], Coroutine[Any, Any, Any]], done: Done) -> None:
        """Runs make() on the loop; done(result, None) or done(None, error) follows in the hub."""
        assert self._loop is not None
        self._outbox.append((make, done))
        if not self._kicked:  # one wake-up (a write to the loop's self-pipe) per batch, not per call
            self._kicked = True
            self._loop.call_soon_threadsafe(self._start_all)

    def _start_all(self) -> None:
        assert self._loop is not None
        self._kicked = False  # first: a call submitted from now on kicks again, or is started below
        while self._outbox:
            make, done = self._outbox.popleft()
            task = self._loop.create_task(make())
            task.add_done_callback(lambda t, done=done: self._land(t, done))  # type: ignore[misc]

    def _land(self, task: asyncio.Task[Any], done: Done) -> None:
        if task.cancelled():
            self._landed.append((done, None, asyncio.CancelledError()))
        else:
            err = task.exception()
            self._landed.append((done, None if err else task.result(), err))
        self._watcher.send()  # many landings between two hub turns are delivered in one

    def _deliver(self) -> None:
        while self._records:
            handler, record = self._records.popleft()
            handler.handle(record)
        while self._landed:
            done, value, err = self._landed.popleft()
            done(value, err)

    def call(self, make: Callable[[], Coroutine[Any, Any, Any]], timeout: float) -> Any:
        """Runs make() on the loop and waits (this greenlet only) for its result; raises its error."""
        result: gevent.event.AsyncResult[Any] = gevent.event.AsyncResult()

        def done(value: Any, err: BaseException | None) -> None:
            if err is None:
                result.set(value)
            else:
                result.set_exception(err)

        self.submit(make, done)
        return result.get(timeout=timeout)


_loop_thread: LoopThread | None = None
_keep: list[Any] = []


def loop_thread() -> LoopThread:
    """This process's loop thread, started on first use (from a greenlet of the main thread; LoopThread() does
    not yield to other greenlets, so there is only ever one)."""
    global _loop_thread
    if _loop_thread is None:
        _loop_thread = LoopThread()
    return _loop_thread
