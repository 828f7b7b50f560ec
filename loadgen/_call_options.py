"""The syntax of CallUser's options: --xfer-call, --xfer-proto, --xfer-import-path, --xfer-protoset (no network,
no protobuf: the runner imports loadgen._options, which imports this). --xfer-data is loadgen._template's."""

from __future__ import annotations

from pathlib import Path

CALL_HELP = "SERVICE/METHOD, the service by its full name, e.g. xfer.v1.FileTransfer/Echo"


def split_call(call: str) -> tuple[str, str]:
    """'pkg.Service/Method' (or '/pkg.Service/Method', 'pkg.Service.Method') -> (service, method)."""
    text = call.strip().lstrip("/")
    service, sep, method = text.partition("/")
    if not sep:
        service, sep, method = text.rpartition(".")
    if not sep or not service or not method or "/" in method or " " in text:
        raise ValueError(f"--xfer-call {call!r}: want {CALL_HELP}")
    return service, method


def parse_call(text: str) -> str:
    """'' -> '' (no CallUser); else the call as given, once its syntax is right."""
    if text.strip():
        split_call(text)
    return text.strip()


def _file(text: str, flag: str, suffix: str) -> str:
    if text and not Path(text).is_file():
        raise ValueError(f"{flag} {text!r}: no such file{suffix}")
    return text


def parse_proto(text: str) -> str:
    return _file(text.strip(), "--xfer-proto", " (a .proto file defining the --xfer-call service)")


def parse_protoset(text: str) -> str:
    return _file(text.strip(), "--xfer-protoset", " (a FileDescriptorSet: protoc --descriptor_set_out --include_imports)")


def parse_import_path(text: str) -> tuple[str, ...]:
    """'DIR[,DIR...]' -> the folders --xfer-proto's imports are looked up in; '' -> the .proto file's folder."""
    dirs = tuple(d.strip() for d in text.split(",") if d.strip())
    for d in dirs:
        if not Path(d).is_dir():
            raise ValueError(f"--xfer-import-path {text!r}: {d!r} is not a folder")
    return dirs
