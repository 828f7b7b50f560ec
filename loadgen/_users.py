"""The users: Upload, Download and Echo over gRPC or frame (the host's scheme picks the transport).

A whole operation (one Upload, Download or Echo) is reported to Locust's statistics and to the client
histograms; the chunk calls inside a transfer (UploadChunk, DownloadChunk) go to the client histograms
only, so Locust's table and its Aggregated row count whole operations, each once.

gRPC users run their calls on the process's grpc.aio event-loop thread (loadgen._aioloop), up to
--xfer-grpc-inflight operations in flight per user; each operation is timed on the loop from its own start to
its own end and reported here, by the user's greenlet, as one Locust request. Frame users call in their own
greenlet.
"""

from __future__ import annotations

import collections
import random
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

import gevent
import gevent.event
from locust import User, constant, task

from loadgen import _conns
from loadgen._aioloop import LoopThread, loop_thread
from loadgen._grpc_aio import AioClient, Outcome
from loadgen._process import XferProcess, current
from loadgen._tls import ProcessTLS, process_tls
from py_client import XferError, parse_target
from py_client.results import TransferResult

BACKOFF_CODES = ("unavailable", "deadline_exceeded")
DRAIN_GRACE = 5.0  # seconds past --xfer-timeout that a stopping user waits for its calls in flight

# An operation on the loop: the coroutine that makes it, and what turns its value into bytes moved (the checks,
# run back in the user's greenlet; raises XferError).
Begun = tuple[Callable[[AioClient], Coroutine[Any, Any, Any]], Callable[[Any], int]]


class _Sink:
    """Downloads are verified chunk by chunk by py_client; the bytes themselves are not kept."""

    def write(self, data: bytes) -> int:
        return len(data)


class XferFailure(Exception):
    """A failed call as Locust shows it: the error text exactly as the server (or client) gave it."""

    def __init__(self, text: str, code: str) -> None:
        super().__init__(text)
        self.code = code

    def __repr__(self) -> str:
        return str(self)


def check_host(host: str | None) -> str:
    """The transport of a host; ValueError saying what a host must look like."""
    if not host:
        raise ValueError("--host is required: grpc://HOST:PORT or frame://HOST:PORT (the scheme picks the transport)")
    try:
        return parse_target(host).scheme
    except ValueError as e:
        raise ValueError(f"--host: {e}") from None


class XferUser(User):
    abstract = True
    wait_time = constant(0)
    method = ""

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        self.xfer: XferProcess = current()
        self.number = self.xfer.next_user_number()
        self.rng = random.Random(self.xfer.seed ^ (self.number * 0x9E3779B9))
        self.client: Any = None
        self.transport = ""
        self.next_start: float | None = None
        self.loop: LoopThread | None = None  # set when this user's calls run on the aio loop
        self.aio: AioClient | None = None
        self.in_flight = 0
        self.landed: collections.deque[tuple[Outcome | None, BaseException | None, Callable[[Any], int]]] = (
            collections.deque())
        self.wake = gevent.event.Event()
        self.address = ""
        self.tls: ProcessTLS | None = None

    def _count(self, reconnect: bool, resumed: str) -> None:
        """One connection made, and its TLS handshake (called in this greenlet, or on the aio loop thread)."""
        self.xfer.recorder.connection(self.transport, reconnect, resumed)

    def on_start(self) -> None:
        self.transport = check_host(self.environment.host)
        cfg = self.xfer.config
        kind = cfg.connections.kind
        self.xfer.payload()  # the content buffer, made once before any call is timed
        self.address = parse_target(self.environment.host).address
        self.tls = process_tls(cfg)
        if self.transport == "grpc":
            self.loop = loop_thread()
            if kind == "user":
                address, count, tls = self.address, self.xfer.recorder.connection, self.tls
                self.aio = self.loop.call(lambda: self._make_client(address, cfg.timeout, count, tls), cfg.timeout)
            elif kind == "pool" and self.xfer.pool is None:  # one per process; its channels are made on the loop
                self.xfer.pool = _conns.AioPool(self.address, cfg.timeout, cfg.connections.size, self._count,
                                                self.tls)
            return
        if kind == "user":
            self.client = _conns.make_client(cfg, self.environment.host, self._count)
        elif kind == "pool" and self.xfer.pool is None:  # made without yielding: no other user can race it
            self.xfer.pool = _conns.FramePool(cfg, self.environment.host, self._count)

    @staticmethod
    async def _make_client(address: str, timeout: float, count: Callable[[str, bool, str], None],
                           tls: ProcessTLS | None) -> AioClient:
        # a grpc.aio channel is made on the loop that will use it
        return _conns.CountedAioClient(address, timeout, lambda again, resumed: count("grpc", again, resumed), tls)

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """The client one operation of a frame user runs on, by --xfer-connections."""
        kind = self.xfer.config.connections.kind
        if kind == "user":
            yield self.client
            return
        if kind == "pool":
            with self.xfer.pool.borrow() as client:
                yield client
            return
        client = _conns.make_client(self.xfer.config, self.environment.host, self._count)
        try:
            yield client
        finally:
            client.close()

    def _aio_run(self, start: float | None, make: Callable[[AioClient], Coroutine[Any, Any, Any]]
                 ) -> Coroutine[Any, Any, Outcome]:
        """The coroutine of one aio operation, by --xfer-connections (called on the loop)."""
        kind = self.xfer.config.connections.kind
        if kind == "call":
            return _conns.one_shot(self.address, self.xfer.config.timeout, self._count, start, make, self.tls)
        aio = self.xfer.pool.pick() if kind == "pool" else self.aio
        assert aio is not None
        return aio.timed(start, make(aio))

    def on_stop(self) -> None:
        if self.loop is not None:
            deadline = time.monotonic() + self.xfer.config.timeout + DRAIN_GRACE
            while self.in_flight and time.monotonic() < deadline:  # every call the server saw is reported
                self._report_landed(deadline - time.monotonic())
        if self.loop is not None and self.aio is not None:
            aio, self.aio = self.aio, None
            # Closed on the loop without waiting: a stopping worker sends its last report sooner.
            self.loop.submit(aio.close, lambda _value, _err: None)
        if self.client is not None:
            self.client.close()
            self.client = None

    def _start_time(self) -> float:
        """Closed loop: now. Open loop: the intended start on this user's schedule (sleeping till then)."""
        rate = self.xfer.config.rate
        now = time.perf_counter()
        if rate is None:
            return now
        share = rate.per_second / (self.xfer.worker_count if self.xfer.role == "worker" else 1)
        runner = self.environment.runner
        per_user = share / max(1, runner.user_count if runner else 1)
        gap = self.rng.expovariate(per_user) if rate.poisson else 1.0 / per_user
        if self.next_start is None:
            self.next_start = now + self.rng.random() * (1.0 / per_user)
        else:
            self.next_start += gap
        if self.next_start > now:
            gevent.sleep(self.next_start - now)
        return self.next_start

    def _operation(self, start: float, length: int, error: XferError | None = None,
                   end: float | None = None) -> None:
        """One whole operation (start..end, end default now): to Locust's statistics and the client histograms."""
        seconds = (time.perf_counter() if end is None else end) - start
        self.xfer.recorder.observe(self.transport, self.method, seconds, error.code if error else "ok")
        self.environment.events.request.fire(
            request_type=self.transport, name=self.method, response_time=seconds * 1000.0, response_length=length,
            response=None, context={"code": error.code} if error else {},
            exception=XferFailure(str(error), error.code) if error else None,
        )

    def _chunks(self, name: str, result: TransferResult) -> None:
        for seconds in result.chunk_seconds:
            self.xfer.recorder.observe(self.transport, name, seconds, "ok")

    @task
    def call(self) -> None:
        if self.loop is not None:
            self._call_aio()
            return
        start = self._start_time()
        try:
            with self._connection() as client:
                self.client = client
                try:
                    length = self.run_once()
                finally:
                    if self.xfer.config.connections.kind != "user":
                        self.client = None  # not this user's to close at its stop
        except XferError as e:
            self._operation(start, 0, e)
            if e.code in BACKOFF_CODES:
                gevent.sleep(0.05)  # a dead server must not turn this loop into a busy loop
            return
        except (ValueError, OSError) as e:  # a client-side failure, reported as such
            self._operation(start, 0, XferError("internal", f"client: {e!r}"))
            return
        self._operation(start, length)

    def run_once(self) -> int:
        """One operation; returns the bytes it moved, raises XferError when it failed."""
        raise NotImplementedError

    # ---- gRPC on the aio loop: up to --xfer-grpc-inflight operations of this user in flight ------------------

    def begin(self) -> Begun:
        """One operation for the loop: its coroutine and its checks (see Begun)."""
        raise NotImplementedError

    def failed(self, error: XferError) -> None:
        """A hook for an operation that ended in an error (before it is reported)."""

    def _call_aio(self) -> None:
        assert self.loop is not None
        while self.in_flight >= self.xfer.config.grpc_inflight:
            self._report_landed(self.xfer.config.timeout + DRAIN_GRACE)
        rate = self.xfer.config.rate
        start = None if rate is None else self._start_time()  # closed loop: timed from the call's own start
        make, finish = self.begin()

        def done(outcome: Outcome | None, err: BaseException | None) -> None:  # in the hub
            self.landed.append((outcome, err, finish))
            self.wake.set()

        self.in_flight += 1
        self.loop.submit(lambda: self._aio_run(start, make), done)
        self._report_landed(0)

    def _report_landed(self, wait: float) -> None:
        """Reports the operations that ended, waiting up to `wait` seconds for one when none has."""
        if not self.landed and wait > 0:
            self.wake.wait(wait)
        self.wake.clear()
        backoff = False
        while self.landed:
            outcome, err, finish = self.landed.popleft()
            self.in_flight -= 1
            if outcome is None:  # the coroutine itself failed: a bug of ours, shown as a client failure
                now = time.perf_counter()
                self._operation(now, 0, XferError("internal", f"client: {err!r}"), now)
                continue
            error = outcome.error
            if error is not None and self.tls is not None:  # why a handshake failed, which grpcio does not say
                error = self.tls.explain(self.address, error)
            length = 0
            if error is None:
                try:
                    length = finish(outcome.value)
                except XferError as e:
                    error = e
            else:
                self.failed(error)
            self._operation(outcome.start, length, error, outcome.end)
            backoff = backoff or (error is not None and error.code in BACKOFF_CODES)
        if backoff:
            gevent.sleep(0.05)  # a dead server must not turn this loop into a busy loop


class UploadUser(XferUser):
    """Uploads gen content of --xfer-sizes in --xfer-chunk chunks, under a name of its own (overwritten)."""

    method = "Upload"

    def run_once(self) -> int:
        cfg, xfer = self.xfer.config, self.xfer
        size = cfg.sizes.pick(self.rng)
        data = memoryview(xfer.payload())[:size]
        res = self.client.upload(f"{xfer.upload_prefix}-{self.number}", data, chunk_size=cfg.chunk)
        xfer.recorder.add_bytes("upload", size)
        self._chunks("UploadChunk", res)
        if cfg.verify:  # py_client compared the server's commit CRC with its own; compare with the content's
            xfer.recorder.verify("Upload", res.crc32 == xfer.prefix_crc(size))
        return size

    def begin(self) -> Begun:
        cfg, xfer = self.xfer.config, self.xfer
        size = cfg.sizes.pick(self.rng)
        data = memoryview(xfer.payload())[:size]
        name = f"{xfer.upload_prefix}-{self.number}-{self.in_flight}"  # one name per call in flight

        def finish(res: TransferResult) -> int:
            xfer.recorder.add_bytes("upload", size)
            self._chunks("UploadChunk", res)
            if cfg.verify:  # the client compared the server's commit CRC with its own; compare with the content's
                xfer.recorder.verify("Upload", res.crc32 == xfer.prefix_crc(size))
            return size

        return (lambda aio: aio.upload(name, data, cfg.chunk)), finish


class DownloadUser(XferUser):
    """Downloads gen:<size>:<seed> (no upload needed) and checks it against the known content's CRC-32."""

    method = "Download"

    def run_once(self) -> int:
        cfg, xfer = self.xfer.config, self.xfer
        size = cfg.sizes.pick(self.rng)
        try:
            res = self.client.download(f"gen:{size}:{xfer.seed}", chunk_size=cfg.chunk, out=_Sink(),
                                       verify=cfg.verify)
        except XferError as e:
            self.failed(e)
            raise
        return self._downloaded(size, res)

    def failed(self, error: XferError) -> None:
        # py_client's own check of the assembled file (CRC-32, byte count) failed: a mismatch too.
        if self.xfer.config.verify and error.code == "data_loss":
            self.xfer.recorder.verify("Download", False)

    def _downloaded(self, size: int, res: TransferResult) -> int:
        cfg, xfer = self.xfer.config, self.xfer
        if cfg.verify:
            want = xfer.prefix_crc(size)
            ok = res.bytes == size and res.crc32 == want
            xfer.recorder.verify("Download", ok)
            if not ok:
                raise XferError("data_loss", f"gen:{size}:{xfer.seed}: got {res.bytes} bytes crc32 "
                                             f"0x{res.crc32:08x}, want {size} bytes 0x{want:08x}")
        xfer.recorder.add_bytes("download", size)
        self._chunks("DownloadChunk", res)
        return size

    def begin(self) -> Begun:
        cfg, xfer = self.xfer.config, self.xfer
        size = cfg.sizes.pick(self.rng)
        name = f"gen:{size}:{xfer.seed}"

        def finish(res: TransferResult) -> int:
            return self._downloaded(size, res)

        return (lambda aio: aio.download(name, cfg.chunk, cfg.verify)), finish


class EchoUser(XferUser):
    """Unary Echo of --xfer-echo-size payloads (the small-message, allocation-heavy case)."""

    method = "Echo"

    def _payload(self) -> bytes:
        return self.xfer.payload()[:self.xfer.config.echo_size.pick(self.rng)]

    def _echoed(self, payload: bytes, got: bytes) -> int:
        """The bytes an answered Echo moved; with --xfer-verify on, data_loss when it differs."""
        if self.xfer.config.verify:
            same = got == payload
            self.xfer.recorder.verify("Echo", same)
            if not same:
                raise XferError("data_loss", f"echo returned {len(got)} bytes that differ from the "
                                             f"{len(payload)} sent")
        return len(payload)

    def run_once(self) -> int:
        payload = self._payload()
        return self._echoed(payload, self.client.echo(payload))

    def begin(self) -> Begun:
        payload = self._payload()

        def finish(got: bytes) -> int:
            return self._echoed(payload, got)

        return (lambda aio: aio.echo(payload)), finish
