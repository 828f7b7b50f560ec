"""The users: Upload, Download and Echo over gRPC or frame (the host's scheme picks the transport).

A whole operation (one Upload, Download or Echo) is reported to Locust's statistics and to the client
histograms; the chunk calls inside a transfer (UploadChunk, DownloadChunk) go to the client histograms
only, so Locust's table and its Aggregated row count whole operations, each once.
"""

from __future__ import annotations

import random
import time
from typing import Any

import gevent
import grpc.experimental.gevent as grpc_gevent
from locust import User, constant, task

from loadgen._process import XferProcess, current
from py_client import XferError, connect, parse_target
from py_client.results import TransferResult

grpc_gevent.init_gevent()  # before any channel exists: grpcio's completion queue polled by gevent

BACKOFF_CODES = ("unavailable", "deadline_exceeded")


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

    def on_start(self) -> None:
        self.transport = check_host(self.environment.host)
        cfg = self.xfer.config
        self.client = connect(self.environment.host, inflight=cfg.inflight, timeout=cfg.timeout)

    def on_stop(self) -> None:
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

    def _operation(self, start: float, length: int, error: XferError | None = None) -> None:
        """One whole operation: to Locust's statistics and to the client histograms."""
        seconds = time.perf_counter() - start
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
        start = self._start_time()
        try:
            length = self.run_once()
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


class DownloadUser(XferUser):
    """Downloads gen:<size>:<seed> (no upload needed) and checks it against the known content's CRC-32."""

    method = "Download"

    def run_once(self) -> int:
        cfg, xfer = self.xfer.config, self.xfer
        size = cfg.sizes.pick(self.rng)
        xfer.payload()
        try:
            res = self.client.download(f"gen:{size}:{xfer.seed}", chunk_size=cfg.chunk, out=_Sink(),
                                       verify=cfg.verify)
        except XferError as e:
            # py_client's own check of the assembled file (CRC-32, byte count) failed: a mismatch too.
            if cfg.verify and e.code == "data_loss":
                xfer.recorder.verify("Download", False)
            raise
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


class EchoUser(XferUser):
    """Unary Echo of --xfer-echo-size payloads (the small-message, allocation-heavy case)."""

    method = "Echo"

    def run_once(self) -> int:
        cfg, xfer = self.xfer.config, self.xfer
        payload = xfer.payload()[:cfg.echo_size.pick(self.rng)]
        got = self.client.echo(payload)
        if cfg.verify:
            same = got == payload
            xfer.recorder.verify("Echo", same)
            if not same:
                raise XferError("data_loss", f"echo returned {len(got)} bytes that differ from the "
                                             f"{len(payload)} sent")
        return len(payload)
