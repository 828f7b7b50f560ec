"""The one exception both clients raise: XferError, carrying PROTOCOL.md's `<code>: <message>`."""

from __future__ import annotations

import grpc

# Every code PROTOCOL.md names, plus the ones a client itself produces (unavailable, deadline_exceeded).
KNOWN_CODES: frozenset[str] = frozenset(c.name.lower() for c in grpc.StatusCode)


class XferError(Exception):
    """A failed call: `code` is a gRPC status code name in snake case, `message` the rest of the text.

    str(err) gives the full `<code>: <message>` string, exactly as the server wrote it.
    """

    code: str
    message: str

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        return f"XferError({self.code!r}, {self.message!r})"

    def __reduce__(self) -> tuple[type[XferError], tuple[str, str]]:
        return (XferError, (self.code, self.message))

    @classmethod
    def parse(cls, text: str) -> XferError:
        """Parses a frame ResponseHeader.error. Text without a known `<code>: ` prefix becomes `unknown`."""
        code, sep, message = text.partition(": ")
        if sep and code in KNOWN_CODES:
            return cls(code, message)
        return cls("unknown", text)

    @classmethod
    def from_grpc(cls, err: grpc.RpcError) -> XferError:
        """Maps a grpc error (a grpc.Call) to its snake-case code and the status message."""
        code_fn = getattr(err, "code", None)
        details_fn = getattr(err, "details", None)
        status = code_fn() if callable(code_fn) else None
        code = status.name.lower() if isinstance(status, grpc.StatusCode) else "unknown"
        details = details_fn() if callable(details_fn) else None
        return cls(code, details if details is not None else str(err))
