"""The `tls` axis of a cell's load: `[load] tls` (a matrix axis in [servers.load]) = "off" | "on" | "on-resume".

"on": the server's TLS listener for the cell's transport with session tickets off, and clients that do not resume,
so that every connection makes a full handshake; "on-resume": tickets on and clients that resume. The runner makes
one throwaway CA and server certificate per run (xferbench/run/tlsfiles.py); a registry server is started with its
TLS listener and them, a command server gets them through its `{cert}` and `{key}` placeholders, and the load is
given the CA. What can be refused is refused while the experiment is read (`refusal`): a kind or transport without
a TLS listener, a load whose driver has no TLS client. This module imports nothing of the schema's, so that the
registry, the schema and the run all read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import loadgen

TLS_MODES = ("off", "on", "on-resume")
# A command server's placeholders naming the run's certificate and its key (xferbench/config/placeholders.py).
PLACEHOLDERS = ("cert", "key")
# loadgen's options of a TLS client (--xfer-tls-ca, --xfer-tls-resume); the Locust driver speaks TLS once it has them.
LOADGEN_OPTIONS = ("tls_ca", "tls_resume")


@dataclass(frozen=True)
class TLSFiles:
    """A run's CA and the server certificate it signed (PEM), under RUN/tls/."""

    ca: Path
    cert: Path
    key: Path

    def placeholders(self) -> dict[str, str]:
        """A command server's {cert} and {key}."""
        return {"cert": str(self.cert), "key": str(self.key)}


@dataclass(frozen=True)
class ClientTLS:
    """What a cell's load is given to speak TLS: the CA the server's certificate must end in, and whether its later
    connections resume the session of an earlier one."""

    ca: Path
    resume: str  # on | off
    # The name the clients check the certificate against and send (SNI), which the run's certificate carries
    # (xferbench/run/tlsfiles.py): grpcio keys its session cache by it and sends none for an address, so without a
    # name gRPC would never resume.
    server_name: str = "localhost"


def tickets(mode: str) -> str:
    """The server's --tls-tickets in a mode: on only where clients resume."""
    return "on" if mode == "on-resume" else "off"


def client(mode: str, files: TLSFiles) -> ClientTLS | None:
    """The load's TLS settings in a mode; None: plaintext."""
    return None if mode == "off" else ClientTLS(files.ca, tickets(mode))


def loadgen_speaks_tls() -> bool:
    return all(k in loadgen.OPTIONS_BY_KEY for k in LOADGEN_OPTIONS)


def refusal(
    mode: str, kind: str, command: bool, tls_transports: tuple[str, ...], transport: str, driver: str, locustfile: str | None
) -> str | None:
    """Why a cell cannot run its load's tls mode, or None: `kind` its server's name, `command` whether it is a user's
    command, `tls_transports` those its server serves over TLS."""
    if mode == "off":
        return None
    if command and not tls_transports:
        return (
            "a command server speaks TLS with the run's certificate only: put {cert} and {key} in its command, "
            "[servers.env] or a [servers.files] template"
        )
    if not tls_transports:
        return f"{kind} has no TLS listener"
    if transport not in tls_transports:
        return f"{kind} has no TLS listener for {transport} (it serves TLS on {' | '.join(tls_transports)})"
    if locustfile:
        return "your own Locust users (load.locustfile) are given no CA; drop tls or locustfile"
    if driver == "locust" and not loadgen_speaks_tls():
        alt = '; use driver = "xferload"' if transport == "frame" else ""
        return f"loadgen's users have no TLS options here (--xfer-tls-ca, --xfer-tls-resume){alt}"
    return None
