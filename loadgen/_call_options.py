"""The syntax of CallUser's options: --xfer-call (one method, or a weighted mix of them), --xfer-proto,
--xfer-import-path, --xfer-protoset, and how a mix's --xfer-data is split among its methods (no network, no
protobuf: the runner imports loadgen._options, which imports this). --xfer-data itself is loadgen._template's."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from loadgen._template import Template, template_of

CALL_SYNTAX = (
    "SERVICE/METHOD (the service by its full name, e.g. xfer.v1.FileTransfer/Echo), or a weighted mix "
    "SERVICE/METHOD:WEIGHT,SERVICE/METHOD:WEIGHT,... (each WEIGHT a number > 0)"
)
CALL_HELP = (
    CALL_SYNTAX + ", e.g. etcdserverpb.KV/Range:3,etcdserverpb.KV/Put:1: each call picks its method by weight, "
    "and --xfer-data is a JSON object keyed by each SERVICE/METHOD"
)


@dataclass(frozen=True)
class CallSpec:
    """One method of --xfer-call: its full name (SERVICE/METHOD, however it was spelt) and its weight."""

    name: str
    weight: float

    @property
    def bare(self) -> str:
        """The method's own name: the client metrics' method label."""
        return self.name.rpartition("/")[2]


def split_call(call: str) -> tuple[str, str]:
    """'pkg.Service/Method' (or '/pkg.Service/Method', 'pkg.Service.Method') -> (service, method)."""
    text = call.strip().lstrip("/")
    service, sep, method = text.partition("/")
    if not sep:
        service, sep, method = text.rpartition(".")
    if not sep or not service or not method or "/" in method or " " in text:
        raise ValueError(f"--xfer-call {call!r}: want {CALL_SYNTAX}")
    return service, method


def full_name(call: str) -> str:
    """The one spelling of a method's full name, SERVICE/METHOD (the keys of a mix's --xfer-data)."""
    service, method = split_call(call)
    return f"{service}/{method}"


def _weight(text: str, entry: str, call: str) -> float:
    try:
        w = float(text)
    except ValueError:
        w = -1.0
    if not 0 < w < math.inf:  # also refuses NaN
        raise ValueError(f"--xfer-call {call!r}: weight {text!r} of {entry!r}; want a number > 0")
    return w


def parse_calls(text: str) -> tuple[CallSpec, ...]:
    """'A' or 'A:3,B:1' -> the methods and their weights; '' -> none. A single method may leave its weight
    out; in a mix each one says it, as --xfer-mix's entries do."""
    entries = [e.strip() for e in text.split(",")] if text.strip() else []
    specs: list[CallSpec] = []
    for entry in entries:
        name, sep, w_text = entry.rpartition(":")
        if not sep:
            if len(entries) > 1:
                raise ValueError(f"--xfer-call {text!r}: {entry!r} has no weight; in a mix each is SERVICE/METHOD:WEIGHT")
            name, w_text = entry, "1"
        spec = CallSpec(full_name(name), _weight(w_text, entry, text))
        if any(s.name == spec.name for s in specs):
            raise ValueError(f"--xfer-call {text!r}: {spec.name} given twice")
        twin = next((s.name for s in specs if s.bare == spec.bare), None)
        if twin:
            raise ValueError(
                f"--xfer-call {text!r}: {twin} and {spec.name} would share the client metrics' "
                f"method label {spec.bare!r}; mix methods of different names"
            )
        specs.append(spec)
    return tuple(specs)


def parse_call(text: str) -> str:
    """'' -> '' (no CallUser); else the call as given, once its syntax is right."""
    parse_calls(text)
    return text.strip()


def templates(specs: tuple[CallSpec, ...], data: Template | None) -> dict[str, Template | None]:
    """Each method's --xfer-data template (None: none given). One method takes --xfer-data as it is; a mix
    takes a JSON object keyed by each method's full name, every method's key there and no other."""
    if len(specs) == 1:
        return {specs[0].name: data}
    names = [s.name for s in specs]
    want = f"a mix of --xfer-call methods wants a JSON object keyed by each of {', '.join(names)}"
    if data is None or not isinstance(data.value, dict):
        shown = "none" if data is None else repr(data.source[:80])
        raise ValueError(f"--xfer-data ({shown}): {want}")
    given: dict[str, Template] = {}
    for key, value in data.value.items():
        try:
            name = full_name(key)
        except ValueError:
            name = key
        if name not in names:
            raise ValueError(f"--xfer-data: key {key!r} is not a method of the --xfer-call mix; {want}")
        if name in given:
            raise ValueError(f"--xfer-data: {name} given twice")
        given[name] = template_of(value, f"{data.source[:60]}[{key}]")
    missing = [n for n in names if n not in given]
    if missing:
        raise ValueError(f"--xfer-data: no request for {', '.join(missing)}; {want}")
    return {n: given[n] for n in names}


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
