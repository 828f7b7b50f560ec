"""--xfer-call's method, found by gRPC server reflection, in .proto files compiled at run time, or in a protoset.

Each source gives FileDescriptorProtos; a descriptor pool over them yields the method and its request message
class (google.protobuf's message_factory), so any service can be called without generated code. Every failure
is a ValueError of one line saying what was wrong (the start-up checks print it and exit 2).
"""

from __future__ import annotations

import asyncio
import functools
import subprocess
import sys
import tempfile
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
from google.protobuf import descriptor_database, descriptor_pool, message_factory
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.descriptor_pb2 import FileDescriptorProto, FileDescriptorSet
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from loadgen._call_options import split_call

REFLECTION_TIMEOUT = 10.0  # seconds for each reflection request (the server only reads descriptors)
PROTOC_TIMEOUT = 60.0


@dataclass(frozen=True)
class Method:
    """A method to call: its path (/pkg.Service/Method), bare name (the metrics' method label), its streaming
    sides and its request message class."""

    path: str
    name: str
    client_streaming: bool
    server_streaming: bool
    request: Any  # a generated message class (type[Message])

    @property
    def kind(self) -> str:
        return {
            (False, False): "unary",
            (True, False): "client-streaming",
            (False, True): "server-streaming",
            (True, True): "bidirectional",
        }[(self.client_streaming, self.server_streaming)]


# grpc.aio's status for a stream whose request write lost the race with the call's end (grpc/grpc#36066): a server
# without reflection answers UNIMPLEMENTED at once, and the write of the request may fail first, hiding it (seen
# on every try on a busy machine). Read as "not served", with the label shown.
_MISLABEL = (grpc.StatusCode.INTERNAL, "Internal error from Core")


async def _reflect(stub: Any, request: reflection_pb2.ServerReflectionRequest, address: str) -> Any:
    try:
        (resp,) = [r async for r in stub.ServerReflectionInfo(iter([request]), timeout=REFLECTION_TIMEOUT)]
    except grpc.RpcError as e:
        code, details = e.code(), e.details()
        if code is grpc.StatusCode.UNIMPLEMENTED or (code, details) == _MISLABEL:
            seen = "" if code is grpc.StatusCode.UNIMPLEMENTED else f" (the call ended at once: {details})"
            raise ValueError(
                f"{address} does not serve gRPC reflection (grpc.reflection.v1alpha){seen}: give the "
                "service's --xfer-proto or --xfer-protoset"
            ) from None
        raise ValueError(f"gRPC reflection at {address} failed: {code.name.lower()}: {details}") from None
    return resp


async def by_reflection(address: str, service: str, channel: Channel = grpc.aio.insecure_channel
                        ) -> list[FileDescriptorProto]:
    """The file defining `service` and every file it imports, from the server's reflection service. On grpc.aio:
    in a Locust process grpc.aio runs on loadgen._aioloop's thread, and grpcio's blocking calls would wait
    forever there once it has started."""
    async with channel(address) as chan:
        stub = reflection_pb2_grpc.ServerReflectionStub(chan)
        resp = await _reflect(stub, reflection_pb2.ServerReflectionRequest(file_containing_symbol=service), address)
        if resp.HasField("error_response"):
            listed = await _reflect(stub, reflection_pb2.ServerReflectionRequest(list_services=""), address)
            known = ", ".join(s.name for s in listed.list_services_response.service) or "none"
            raise ValueError(f"--xfer-call: {address} has no service {service!r}; it serves: {known}")
        files: dict[str, FileDescriptorProto] = {}
        todo = list(resp.file_descriptor_response.file_descriptor_proto)
        while todo:  # the server sends a file with the imports it has not sent yet; ask for any still missing
            for raw in todo:
                fdp = FileDescriptorProto.FromString(raw)
                files.setdefault(fdp.name, fdp)
            missing = sorted({dep for f in files.values() for dep in f.dependency} - files.keys())
            todo = []
            for dep in missing:
                more = await _reflect(stub, reflection_pb2.ServerReflectionRequest(file_by_filename=dep), address)
                todo += more.file_descriptor_response.file_descriptor_proto
    return list(files.values())


def _run(make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    return asyncio.run(make())


def _from_protoset(path: str) -> list[FileDescriptorProto]:
    try:
        return list(FileDescriptorSet.FromString(Path(path).read_bytes()).file)
    except OSError as e:
        raise ValueError(f"--xfer-protoset {path!r}: cannot read it: {e.strerror}") from None
    except Exception as e:  # the protobuf runtime's DecodeError differs between implementations
        raise ValueError(f"--xfer-protoset {path!r}: not a FileDescriptorSet ({type(e).__name__})") from None


def _from_proto(path: str, import_path: Sequence[str]) -> list[FileDescriptorProto]:
    """Compiles the .proto file with grpcio-tools' protoc (in a process of its own: its errors go to our
    message, not to this process's stderr) into a descriptor set."""
    import grpc_tools  # type: ignore[import-untyped]  # no stubs; imported only when a .proto file is given

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    dirs = [*import_path] or [str(Path(path).parent)]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.protoset"
        cmd = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            *(f"-I{d}" for d in [*dirs, str(well_known)]),
            f"--descriptor_set_out={out}",
            "--include_imports",
            path,
        ]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=PROTOC_TIMEOUT, check=False)
        if r.returncode != 0:
            why = " ".join(r.stderr.split()) or f"protoc exit status {r.returncode}"
            raise ValueError(f"--xfer-proto {path!r} (import path {', '.join(dirs)}): {why}")
        return _from_protoset(str(out))


def _find(files: Iterable[FileDescriptorProto], service: str, method: str, where: str) -> MethodDescriptor:
    db = descriptor_database.DescriptorDatabase()
    for fdp in files:
        db.Add(fdp)
    pool = descriptor_pool.DescriptorPool(db)
    try:
        svc = pool.FindServiceByName(service)
    except KeyError:
        raise ValueError(f"--xfer-call: no service {service!r} in {where}") from None
    found: MethodDescriptor | None = svc.methods_by_name.get(method)
    if found is None:
        raise ValueError(
            f"--xfer-call: service {service} has no method {method!r}; it has: {', '.join(sorted(svc.methods_by_name))}"
        )
    return found


# Runs a coroutine (made by the callable) to its end and returns its value: how resolve reaches grpc.aio.
Await = Callable[[Callable[[], Coroutine[Any, Any, Any]]], Any]
# Makes the reflection's channel to an address: plaintext, or TLS with --xfer-tls-ca (loadgen._tls).
Channel = Callable[[str], grpc.aio.Channel]


def resolve(
    call: str, address: str, proto: str = "", import_path: Sequence[str] = (), protoset: str = "", wait: Await = _run
) -> Method:
    """The method `call` names, from --xfer-proto, else --xfer-protoset, else the server's reflection (its
    coroutine run by `wait`)."""
    (method,) = resolve_all([call], address, proto, import_path, protoset, wait)
    return method


def resolve_all(
    calls: Sequence[str],
    address: str,
    proto: str = "",
    import_path: Sequence[str] = (),
    protoset: str = "",
    wait: Await = _run,
    channel: Channel = grpc.aio.insecure_channel,
) -> list[Method]:
    """The methods of a --xfer-call mix, in order: the .proto file or protoset read once, the reflection
    asked once per service."""
    sources: dict[str, tuple[list[FileDescriptorProto], str]] = {}
    found = []
    for call in calls:
        service, name = split_call(call)
        source = service if not (proto or protoset) else ""  # a file defines every service of the mix
        if source not in sources:
            if proto:
                sources[source] = _from_proto(proto, import_path), proto
            elif protoset:
                sources[source] = _from_protoset(protoset), protoset
            else:
                reflected = wait(functools.partial(by_reflection, address, service, channel))
                sources[source] = reflected, f"{address}'s reflection"
        files, where = sources[source]
        md = _find(files, service, name, where)
        request = message_factory.GetMessageClass(md.input_type)
        found.append(Method(f"/{service}/{name}", name, md.client_streaming, md.server_streaming, request))
    return found
