"""TLS for both clients: the options (a CA file, a server name, session resumption), the frame client's
context, gRPC's channel credentials, and errors that say why a handshake failed (PROTOCOL.md "TLS").

    tls = TLSOptions(ca="ca.pem")
    with connect("frame://127.0.0.1:7443", tls=tls) as client:
        client.echo(b"hi")
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc.experimental import session_cache

# OpenSSL's verification results (X509_V_ERR_*) that mean "not signed by a CA we trust".
_UNTRUSTED = frozenset({2, 18, 19, 20, 21})
_EXPIRED = frozenset({9, 10})  # not yet valid, expired
_NAME_MISMATCH = frozenset({62, 64})  # hostname, IP address
# What OpenSSL says when the other end answered with something that is not TLS.
_NOT_TLS = ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST")


@dataclass(frozen=True)
class TLSOptions:
    """`ca`: PEM certificates the server's chain must end in. `server_name`: the name its certificate must
    carry (and SNI); None: the target's host. `resume`: keep each connection's session and resume it on the
    next connection (a session cache of one); off: every connection makes a full handshake."""

    ca: str | Path
    server_name: str | None = None
    resume: bool = True

    def context(self) -> ssl.SSLContext:
        """A context for the frame client: TLS 1.2 or later, trusting the CA file's certificates only."""
        try:
            ctx = ssl.create_default_context(cafile=str(self.ca))
        except (OSError, ssl.SSLError) as e:
            raise ValueError(f"TLS CA file {str(self.ca)!r}: {e}") from None
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        return ctx

    def name_for(self, host: str) -> str:
        return self.server_name or host

    def grpc_channel(self, address: str, options: list[tuple[str, object]]) -> grpc.Channel:
        """A secure channel to address: the CA file as its roots, server_name as the name checked, and an
        SSL session cache of one when resuming."""
        self.context()  # refuses a CA file that is not one, as the frame client does
        try:
            roots = Path(self.ca).read_bytes()
        except OSError as e:
            raise ValueError(f"TLS CA file {str(self.ca)!r}: {e}") from None
        opts = list(options)
        if self.server_name:
            opts.append(("grpc.ssl_target_name_override", self.server_name))
        if self.resume:
            cache = session_cache.ssl_session_cache_lru(1)  # type: ignore[no-untyped-call]  # grpcio has no hints here
            opts.append(("grpc.ssl_session_cache", cache))
        return grpc.secure_channel(address, grpc.ssl_channel_credentials(root_certificates=roots), options=opts)

    def explain(self, err: ssl.SSLError) -> str:
        """Why a handshake failed, in words that point at the fix."""
        if isinstance(err, ssl.SSLCertVerificationError):
            code, text = err.verify_code, err.verify_message
            if code in _UNTRUSTED:
                return f"the server's certificate is not trusted: it is not signed by a CA in {str(self.ca)!r} ({text})"
            if code in _EXPIRED:
                return f"the server's certificate has expired or is not yet valid ({text})"
            if code in _NAME_MISMATCH:
                return f"the server's certificate is not valid for the name checked ({text})"
            return f"the server's certificate failed verification ({text})"
        if any(r in str(err.reason or "") for r in _NOT_TLS):
            return f"the server did not answer in TLS; is this a plaintext listener? ({err})"
        return str(err)

    def probe(self, host: str, port: int, timeout: float) -> str | None:
        """One handshake with host:port, to learn why a connection another library made (grpcio) failed: the
        explanation, or None when the handshake succeeds (or the server cannot be reached at all)."""
        try:
            with (
                socket.create_connection((host, port), timeout=timeout) as sock,
                self.context().wrap_socket(sock, server_hostname=self.name_for(host)),
            ):
                return None
        except ssl.SSLError as e:
            return self.explain(e)
        except OSError:
            return None
