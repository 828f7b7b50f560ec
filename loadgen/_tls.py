"""--xfer-tls-*: the users' TLS, one per Locust process (PROTOCOL.md "TLS"; py_client/tls.py underneath).

Frame: every connection of the process is wrapped by one SSLContext, so a session one connection got can be
resumed by any other (Python refuses a session of another context); the latest session with a ticket is kept
here for the next connection, whichever user or pool makes it. gRPC: one set of channel credentials (the CA
file read once) and, with resumption, one grpcio session cache shared by every channel of the process, so a
channel made per call resumes too. grpcio cannot tell its client whether a handshake resumed: gRPC handshakes
are counted with resumed "unknown" when resumption is on, "false" when it is off (no cache: none can resume).
"""

from __future__ import annotations

import functools
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
from grpc.experimental import session_cache

from loadgen._options import Config
from py_client import TLSOptions, XferError, parse_target
from py_client.target import split_host_port

PROBE_TIMEOUT = 10.0  # seconds, at most, for the handshake that learns why a gRPC connection failed
SESSION_CACHE_SIZE = 8  # grpcio keys its cache by server name: one target needs one entry


class SharedContextTLS(TLSOptions):
    """TLSOptions whose context is made once (the CA file read once) and shared by every client given it."""

    @functools.cached_property
    def _context(self) -> ssl.SSLContext:
        return super().context()

    def context(self) -> ssl.SSLContext:
        return self._context


@dataclass(eq=False)
class ProcessTLS:
    """The process's TLS for the users: options, the frame session to resume, gRPC's credentials."""

    options: SharedContextTLS
    session: ssl.SSLSession | None = None  # frame: the latest session with a ticket
    _grpc_options: list[tuple[str, object]] = field(default_factory=list)
    _credentials: grpc.ChannelCredentials | None = None

    @property
    def resume(self) -> bool:
        return self.options.resume

    def keep(self, session: ssl.SSLSession | None) -> None:
        """A frame connection's session, offered when it closes: the next connection resumes it."""
        if self.resume and session is not None and session.has_ticket:
            self.session = session

    def resumed_label(self, resumed: bool | None) -> str:
        """The `resumed` label of one handshake: frame knows (True/False), gRPC does not (None)."""
        if resumed is None:
            return "unknown" if self.resume else "false"
        return "true" if resumed else "false"

    def grpc_credentials(self) -> grpc.ChannelCredentials:
        if self._credentials is None:
            roots = Path(self.options.ca).read_bytes()  # readable: start_check read it
            self._credentials = grpc.ssl_channel_credentials(root_certificates=roots)
        return self._credentials

    def grpc_options(self) -> list[tuple[str, object]]:
        """Channel options: the name checked (when given) and the process's session cache (when resuming)."""
        if not self._grpc_options:
            opts: list[tuple[str, object]] = []
            if self.options.server_name:
                opts.append(("grpc.ssl_target_name_override", self.options.server_name))
            if self.resume:
                cache = session_cache.ssl_session_cache_lru(SESSION_CACHE_SIZE)  # type: ignore[no-untyped-call]
                opts.append(("grpc.ssl_session_cache", cache))
            self._grpc_options = opts
        return self._grpc_options

    def aio_channel(self, address: str, options: list[tuple[str, Any]] | None = None) -> grpc.aio.Channel:
        """A grpc.aio channel to address over TLS (make it on the loop that will use it)."""
        return grpc.aio.secure_channel(address, self.grpc_credentials(), options=[*(options or []), *self.grpc_options()])

    def explain(self, address: str, error: XferError) -> XferError:
        """A gRPC call's `unavailable` error, with why the handshake failed when it did: grpcio's own message
        does not say, so one handshake of Python's own asks (in the user's greenlet: gevent's socket)."""
        if error.code != "unavailable":
            return error
        host, port = split_host_port(address)
        why = self.options.probe(host, port, PROBE_TIMEOUT)
        return error if why is None else XferError("unavailable", f"TLS handshake with {address} failed: {why}")


_made: dict[tuple[str, str, bool], ProcessTLS] = {}


def process_tls(cfg: Config) -> ProcessTLS | None:
    """The process's TLS for these options (None: plaintext); one per set of options, so a session or cache
    outlives the users and runs that share it."""
    if not cfg.tls_ca:
        return None
    resume = cfg.tls_resume is not False
    key = (cfg.tls_ca, cfg.tls_server_name, resume)
    if key not in _made:
        _made[key] = ProcessTLS(SharedContextTLS(cfg.tls_ca, cfg.tls_server_name or None, resume))
    return _made[key]


def caveat(cfg: Config, host: str, transport: str) -> str | None:
    """What the user should know before a run that cannot do what its options ask, or None."""
    if transport != "grpc" or not cfg.tls_ca or cfg.tls_resume is False or cfg.tls_server_name:
        return None
    name = split_host_port(parse_target(host).address)[0]
    if name.replace(".", "").isdigit() or ":" in name:
        return (
            f"--xfer-tls-resume: gRPC sessions will not resume with {name}: grpcio keys its session cache by "
            "the server name it sends (SNI), and sends none for an IP address; give --xfer-tls-server-name "
            "with a name the server's certificate carries"
        )
    return None


def start_check(cfg: Config) -> None:
    """A TLS option without --xfer-tls-ca, or a CA file that cannot be read or holds no certificate: ValueError."""
    if not cfg.tls_ca:
        given = [
            flag
            for flag, v in (
                ("--xfer-tls-server-name", cfg.tls_server_name),
                ("--xfer-tls-resume", cfg.tls_resume is not None),
            )
            if v
        ]
        if given:
            raise ValueError(f"{', '.join(given)} only with --xfer-tls-ca (the CA file that turns TLS on)")
        return
    try:
        TLSOptions(cfg.tls_ca).context()
        Path(cfg.tls_ca).read_bytes()
    except (ValueError, OSError) as e:
        raise ValueError(f"--xfer-tls-ca: {e}; want a readable PEM file of the CA certificates to trust") from None
