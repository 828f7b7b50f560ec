"""CallUser's requests: --xfer-data's templates turned into serialized request messages of the called method.

Unary and server-streaming calls send one message: an object, or, for a list, its messages in turn (call n
takes item n mod len, ghz's convention). Client-streaming and bidirectional calls send every message of the
list (an object is a stream of one). A template without placeholders is encoded once, at start.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format

from loadgen._methods import Method
from loadgen._template import Context, Template, messages


class Requests:
    """The serialized request messages of each call of `method`; checked against its message type at start."""

    def __init__(self, method: Method, template: Template, sample: Context) -> None:
        self._method = method
        self._items = messages(template)
        if not self._items and not method.client_streaming:
            raise ValueError(f"--xfer-data: {method.path} is {method.kind}: it takes one message, not an empty list")
        # Encoded once: a static template's messages are the same bytes every call (and are checked here).
        self._encoded = [self._encode(t.render(sample)) for t in self._items]

    def _encode(self, value: Any) -> bytes:
        try:
            message = json_format.ParseDict(value, self._method.request())
        except json_format.ParseError as e:
            why = " ".join(str(e).split())
            raise ValueError(
                f"--xfer-data does not fit {self._method.request.DESCRIPTOR.full_name} ({self._method.path}): {why}"
            ) from None
        encoded: bytes = message.SerializeToString()
        return encoded

    def _one(self, i: int, ctx: Context) -> bytes:
        item = self._items[i]
        return self._encode(item.render(ctx)) if item.dynamic else self._encoded[i]

    def for_call(self, ctx: Context) -> list[bytes]:
        """The messages one call sends (ctx.seq is the call's number)."""
        if not self._method.client_streaming:
            return [self._one(ctx.seq % len(self._items), ctx)]
        return [self._one(i, ctx) for i in range(len(self._items))]
