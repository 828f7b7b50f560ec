"""--xfer-data: the JSON request templates of CallUser, and their placeholders.

A template is JSON (inline, or `@FILE`) in proto3's JSON mapping; inside any JSON string, placeholders are
replaced on every call:

    {{seq}}         this user's call number: 0, 1, 2, ...
    {{user}}        this user's number in its Locust process (1, 2, ...)
    {{process}}     this Locust process's name, lg-<host>-<pid> (with {{user}}: a name no other user has)
    {{key:N}}       a random whole number 0 .. N-1 (a key of a keyspace of N), from the user's seeded stream
    {{bytes:SIZE}}  SIZE random bytes (256, 4KiB: the size grammar), base64 as proto3 JSON wants for bytes

A placeholder always yields text: proto3 JSON takes integers in quotes too, so `{"id": "{{seq}}"}` fills an
integer field. A stream method's request is a JSON list of messages (ghz's convention).
"""

from __future__ import annotations

import base64
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from py_client.sizes import MIB, parse_size

PLACEHOLDER = re.compile(r"\{\{\s*([a-z]+)\s*(?::\s*([^}\s]*)\s*)?\}\}")
KINDS = ("seq", "user", "process", "key", "bytes")
MAX_KEYSPACE = 1 << 62
MAX_BYTES = 4 * MIB  # PROTOCOL.md's largest message part; a template is a request, not a file
TEMPLATE_HELP = (
    "JSON (inline, or @FILE), a list of messages for a stream; placeholders in strings: {{seq}}, "
    "{{user}}, {{process}}, {{key:N}}, {{bytes:SIZE}}; with a mix of methods in --xfer-call, a JSON object of "
    "such requests keyed by each SERVICE/METHOD"
)


@dataclass(frozen=True)
class Context:
    """What one call's placeholders are made of."""

    seq: int
    user: int
    process: str
    rng: random.Random


@dataclass(frozen=True)
class Template:
    """A parsed --xfer-data. `value` is the JSON; `dynamic` says whether it has any placeholder."""

    source: str
    value: Any
    dynamic: bool

    def render(self, ctx: Context) -> Any:
        """The JSON of one call (the template itself when it has no placeholder)."""
        return _render(self.value, ctx) if self.dynamic else self.value


def _check_placeholder(kind: str, arg: str | None, where: str) -> None:
    if kind not in KINDS:
        raise ValueError(
            f"--xfer-data: unknown placeholder {where!r}; known: {{{{seq}}}}, {{{{user}}}}, "
            "{{process}}, {{key:N}}, {{bytes:SIZE}}"
        )
    if kind in ("key", "bytes") and not arg:
        raise ValueError(f"--xfer-data: placeholder {where!r} needs its argument, e.g. {{{{{kind}:256}}}}")
    if kind not in ("key", "bytes") and arg is not None:
        raise ValueError(f"--xfer-data: placeholder {where!r} takes no argument")
    if kind == "key" and not (arg and arg.isdigit() and 0 < int(arg) <= MAX_KEYSPACE):
        raise ValueError(f"--xfer-data: placeholder {where!r}: N must be a whole number 1..{MAX_KEYSPACE}")
    if kind == "bytes":
        try:
            parse_size(arg or "", what="SIZE", lo=0, hi=MAX_BYTES)
        except ValueError as e:
            raise ValueError(f"--xfer-data: placeholder {where!r}: {e}") from None


def _scan(value: Any) -> bool:
    """Checks every placeholder of a JSON value; True when it has one."""
    if isinstance(value, str):
        found = False
        for m in PLACEHOLDER.finditer(value):
            _check_placeholder(m.group(1), m.group(2), m.group(0))
            found = True
        if not found and "{{" in value:
            raise ValueError(f"--xfer-data: cannot read the placeholder in {value[:80]!r}; want e.g. {{{{seq}}}}")
        return found
    if isinstance(value, list):
        return any([_scan(v) for v in value])  # a list, not a generator: every item is checked
    if isinstance(value, dict):
        return any([_scan(k) or _scan(v) for k, v in value.items()])
    return False


def _fill(m: re.Match[str], ctx: Context) -> str:
    kind, arg = m.group(1), m.group(2)
    if kind == "seq":
        return str(ctx.seq)
    if kind == "user":
        return str(ctx.user)
    if kind == "process":
        return ctx.process
    if kind == "key":
        return str(ctx.rng.randrange(int(arg)))
    return base64.b64encode(ctx.rng.randbytes(parse_size(arg))).decode()


def _render(value: Any, ctx: Context) -> Any:
    if isinstance(value, str):
        return PLACEHOLDER.sub(lambda m: _fill(m, ctx), value) if "{{" in value else value
    if isinstance(value, list):
        return [_render(v, ctx) for v in value]
    if isinstance(value, dict):
        return {_render(k, ctx): _render(v, ctx) for k, v in value.items()}
    return value


def parse_data(text: str) -> Template | None:
    """'' -> None; JSON or @FILE -> a Template. ValueError says what is wrong, in one line."""
    if not text.strip():
        return None
    source = text
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text()
        except OSError as e:
            raise ValueError(f"--xfer-data {source!r}: cannot read {text[1:]!r}: {e.strerror}") from None
        except UnicodeDecodeError:
            raise ValueError(f"--xfer-data {source!r}: {text[1:]!r} is not UTF-8 text") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"--xfer-data {source[:80]!r}: not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    return template_of(value, source)


def template_of(value: Any, source: str) -> Template:
    """The Template of a decoded JSON request (or, for a mix, of one method's part of --xfer-data)."""
    if not isinstance(value, dict | list) or (isinstance(value, list) and not all(isinstance(v, dict) for v in value)):
        raise ValueError(f"--xfer-data {source[:80]!r}: want a JSON object (a message) or a list of objects (a stream)")
    return Template(source, value, _scan(value))


def messages(template: Template) -> list[Template]:
    """The template of each message: one for an object, one per item for a list."""
    items = template.value if isinstance(template.value, list) else [template.value]
    return [Template(template.source, item, template.dynamic and _scan(item)) for item in items]
