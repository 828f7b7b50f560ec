"""CallUser: calls any gRPC method (--xfer-call), unary or streaming, with requests from --xfer-data's templates;
or a weighted mix of methods (--xfer-call A:3,B:1), each call picking its method by weight.

ghz's --call/-d/--proto model inside Locust. The methods are found by the server's reflection, a .proto file or
a protoset (loadgen._methods); requests are encoded from templates (loadgen._call_requests) and sent as bytes,
answers read as bytes (their size is the Locust response length, nothing is decoded). Everything else is the
gRPC users' own machinery (loadgen._users.XferUser on the grpc.aio loop): --xfer-grpc-inflight,
--xfer-connections, --xfer-rate, the client metrics under each method's bare name, the summary, --xfer-check.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import random
from dataclasses import dataclass

import gevent.lock
import grpc.aio
from gevent import monkey

from loadgen._aioloop import loop_thread
from loadgen._call_options import parse_calls, templates
from loadgen._call_requests import Requests
from loadgen._grpc_aio import AioClient
from loadgen._methods import Await, Method, resolve_all
from loadgen._options import Config
from loadgen._template import Context, parse_data
from loadgen._tls import process_tls
from loadgen._users import Begun, XferUser
from py_client import XferError, parse_target

CALL_OPTIONS = ("data", "proto", "import_path", "protoset")
SAMPLE = Context(0, 1, "lg-sample", random.Random(0))  # a call to check the templates with


@dataclass(frozen=True)
class Prepared:
    """The methods of --xfer-call, in its order, each with its requests, and their cumulative weights."""

    methods: tuple[Method, ...]
    requests: tuple[Requests, ...]
    cum_weights: tuple[float, ...]


_prepared: dict[tuple[object, ...], Prepared] = {}
_preparing = gevent.lock.Semaphore()  # users starting together resolve the methods once


def _waiter(timeout: float) -> Await:
    """How resolve runs its grpc.aio coroutine. In a Locust process (gevent-patched) grpc.aio lives on the
    process's loop thread (loadgen._aioloop), and a loop of another thread would never be woken; a process
    without gevent's patches (the start-up checks run in-process, as the tests do) runs it on a loop of its own."""
    if monkey.is_module_patched("socket"):
        return lambda make: loop_thread().call(make, timeout)
    return lambda make: asyncio.run(make())


def prepare(cfg: Config, host: str) -> Prepared:
    """The methods and their requests (made once per process and options); ValueError in one line."""
    key = (cfg.call, host, cfg.proto, cfg.import_path, cfg.protoset, cfg.data.source if cfg.data else "", cfg.tls_ca)
    with _preparing:
        if key not in _prepared:
            specs = parse_calls(cfg.call)
            data = templates(specs, cfg.data)  # the mix's keys checked before any lookup
            address = parse_target(host).address
            names = [s.name for s in specs]
            tls = process_tls(cfg)
            methods = resolve_all(names, address, cfg.proto, cfg.import_path, cfg.protoset, _waiter(cfg.timeout),
                                  grpc.aio.insecure_channel if tls is None else tls.aio_channel)
            requests = []
            for method, name in zip(methods, names, strict=True):
                empty = "[]" if method.client_streaming else "{}"  # no --xfer-data: an empty message (stream)
                template = data[name] or parse_data(empty)
                assert template is not None
                requests.append(Requests(method, template, SAMPLE))
            cum = tuple(itertools.accumulate(s.weight for s in specs))
            _prepared[key] = Prepared(tuple(methods), tuple(requests), cum)
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
    templates(parse_calls(cfg.call), cfg.data)  # a mix's --xfer-data keys: checked without the server too
    if transport is None or host is None:
        return
    if transport != "grpc":
        raise ValueError("--xfer-call calls gRPC methods on grpc.aio: it needs a grpc:// host")
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


async def _labelled(aio: AioClient, method: Method, requests: list[bytes]) -> tuple[str, int | XferError]:
    """One call of a mix: its method's bare name with the bytes of its answer(s), or with its error. Failures
    are returned, not raised, so that every call of a mix, failed or not, reaches CallUser's finish, which labels
    it: XferUser reports a landed call under self.method, and calls of several methods land in any order."""
    outcome = await aio.timed(None, invoke(aio, method, requests))  # the same error mapping as every call
    return method.name, outcome.error if outcome.error is not None else outcome.value


class CallUser(XferUser):
    """One --xfer-call call per operation, named after its method (Echo, SayHello, ...).

    In a mix each call picks its method by weight from a seeded stream of the user's own, not by Locust's task
    weights: a user keeps several calls in flight (--xfer-grpc-inflight) from its one task, and the methods'
    shares then hold per user, at any user count. Each method counts its own {{seq}}."""

    def on_start(self) -> None:
        super().on_start()
        cfg = self.xfer.config
        start_check(cfg, self.environment.host, self.transport)  # the web UI's host is known only here
        self.prepared = prepare(cfg, self.environment.host)
        self.method = self.prepared.methods[0].name
        self.seqs = [0] * len(self.prepared.methods)
        self.picker = random.Random(self.rng.getrandbits(64))  # apart from the templates' stream

    def _pick(self) -> int:
        cum = self.prepared.cum_weights
        if len(cum) == 1:
            return 0
        return bisect.bisect_right(cum, self.picker.random() * cum[-1])

    def begin(self) -> Begun:
        i = self._pick()
        ctx = Context(self.seqs[i], self.number, self.xfer.upload_prefix, self.rng)
        self.seqs[i] += 1
        method, requests = self.prepared.methods[i], self.prepared.requests[i].for_call(ctx)
        if len(self.prepared.methods) == 1:
            return (lambda aio: invoke(aio, method, requests)), (lambda length: int(length))

        def finish(value: tuple[str, int | XferError]) -> int:
            self.method, got = value  # reported right after this returns or raises, under this method
            if isinstance(got, XferError):
                raise got
            return got

        return (lambda aio: _labelled(aio, method, requests)), finish

    def run_once(self) -> int:
        raise XferError("internal", "--xfer-call runs on the grpc.aio loop only")  # start_check refuses frame://
