"""CallUser: calls any gRPC method (--xfer-call), unary or streaming, with requests from --xfer-data's templates.

ghz's --call/-d/--proto model inside Locust. The method is found by the server's reflection, a .proto file or
a protoset (loadgen._methods); requests are encoded from templates (loadgen._call_requests) and sent as bytes,
answers read as bytes (their size is the Locust response length, nothing is decoded). Everything else is the
gRPC users' own machinery (loadgen._users.XferUser on the grpc.aio loop): --xfer-grpc-inflight,
--xfer-connections, --xfer-rate, the client metrics under the method's bare name, the summary, --xfer-check.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

import gevent.lock
import grpc.aio
from gevent import monkey

from loadgen._aioloop import loop_thread
from loadgen._call_requests import Requests
from loadgen._grpc_aio import AioClient
from loadgen._methods import Await, Method, resolve
from loadgen._options import Config
from loadgen._template import Context, parse_data
from loadgen._users import Begun, XferUser
from py_client import XferError, parse_target

CALL_OPTIONS = ("data", "proto", "import_path", "protoset")
SAMPLE = Context(0, 1, "lg-sample", random.Random(0))  # a call to check the templates with


@dataclass(frozen=True)
class Prepared:
    method: Method
    requests: Requests


_prepared: dict[tuple[object, ...], Prepared] = {}
_preparing = gevent.lock.Semaphore()  # users starting together resolve the method once


def _waiter(timeout: float) -> Await:
    """How resolve runs its grpc.aio coroutine. In a Locust process (gevent-patched) grpc.aio lives on the
    process's loop thread (loadgen._aioloop), and a loop of another thread would never be woken; a process
    without gevent's patches (the start-up checks run in-process, as the tests do) runs it on a loop of its own."""
    if monkey.is_module_patched("socket"):
        return lambda make: loop_thread().call(make, timeout)
    return lambda make: asyncio.run(make())


def prepare(cfg: Config, host: str) -> Prepared:
    """The method and its requests (made once per process and options); ValueError in one line."""
    key = (cfg.call, host, cfg.proto, cfg.import_path, cfg.protoset, cfg.data.source if cfg.data else "")
    with _preparing:
        if key not in _prepared:
            address = parse_target(host).address
            method = resolve(cfg.call, address, cfg.proto, cfg.import_path, cfg.protoset, _waiter(cfg.timeout))
            empty = "[]" if method.client_streaming else "{}"  # no --xfer-data: an empty message (stream)
            data = cfg.data or parse_data(empty)
            assert data is not None
            _prepared[key] = Prepared(method, Requests(method, data, SAMPLE))
        return _prepared[key]


def start_check(cfg: Config, host: str | None, transport: str | None) -> None:
    """Start-up checks of the CallUser options (transport None: the host is not known yet, as on a worker)."""
    if not cfg.call:
        given = [f"--xfer-{k.replace('_', '-')}" for k in CALL_OPTIONS if getattr(cfg, k)]
        if given:
            raise ValueError(f"{', '.join(given)} without --xfer-call: say which method to call")
        return
    if cfg.proto and cfg.protoset:
        raise ValueError("--xfer-proto and --xfer-protoset both given: the method comes from one of them")
    if transport is None or host is None:
        return
    if transport != "grpc" or cfg.grpc_engine != "aio":
        raise ValueError("--xfer-call calls gRPC methods on grpc.aio: it needs a grpc:// host and --xfer-grpc-engine aio")
    prepare(cfg, host)


async def invoke(aio: AioClient, method: Method, requests: list[bytes]) -> int:
    """One call of `method` (on the loop); the bytes of its answer(s)."""
    # No serializers: the requests are encoded already, and the answers are only measured, never decoded.
    channel, path, timeout = aio.channel, method.path, aio.timeout
    if not method.server_streaming:
        if method.client_streaming:
            many_one: grpc.aio.StreamUnaryMultiCallable[bytes, bytes] = channel.stream_unary(path)
            answer = await many_one(iter(requests), timeout=timeout)
        else:
            one_one: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(path)
            answer = await one_one(requests[0], timeout=timeout)
        return len(answer)
    answers: grpc.aio.StreamStreamCall[bytes, bytes] | grpc.aio.UnaryStreamCall[bytes, bytes]
    if method.client_streaming:
        many_many: grpc.aio.StreamStreamMultiCallable[bytes, bytes] = channel.stream_stream(path)
        answers = many_many(iter(requests), timeout=timeout)
    else:
        one_many: grpc.aio.UnaryStreamMultiCallable[bytes, bytes] = channel.unary_stream(path)
        answers = one_many(requests[0], timeout=timeout)
    got = 0
    async for message in answers:
        got += len(message)
    return got


class CallUser(XferUser):
    """One --xfer-call call per operation, named after the method (Echo, SayHello, ...)."""

    def on_start(self) -> None:
        super().on_start()
        cfg = self.xfer.config
        start_check(cfg, self.environment.host, self.transport)  # the web UI's host is known only here
        self.prepared = prepare(cfg, self.environment.host)
        self.method = self.prepared.method.name
        self.seq = 0

    def begin(self) -> Begun:
        ctx = Context(self.seq, self.number, self.xfer.upload_prefix, self.rng)
        self.seq += 1
        method, requests = self.prepared.method, self.prepared.requests.for_call(ctx)
        return (lambda aio: invoke(aio, method, requests)), (lambda length: int(length))

    def run_once(self) -> int:
        raise XferError("internal", "--xfer-call runs on --xfer-grpc-engine aio only")  # start_check refuses it
