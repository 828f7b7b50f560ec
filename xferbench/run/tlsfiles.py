"""The run's throwaway CA and server certificate, made once, before the first cell that needs one, under RUN/tls/:
`ca.pem` (what the load is given), `server.pem` and `server.key` (what the servers are given), with the `openssl`
command line. Keys are EC P-256, quick to make and taken by every TLS library of the servers and clients (Go,
OpenSSL, gRPC's). The certificate names the addresses the servers listen on: loopback, and this machine's address as
other hosts reach it when the run has a placement. Valid two days: a run that outlasts that would fail its handshakes,
which say so. The CA's key is removed once it has signed: nothing else is ever to be signed by it."""

from __future__ import annotations

import ipaddress
import subprocess
import threading
from pathlib import Path

from xferbench.config import Cell
from xferbench.config.tls import TLSFiles

VALID_DAYS = 2
OPENSSL_TIMEOUT_S = 30.0
SUBJECT = "/CN=xferbench-run"
_EC_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
_lock = threading.Lock()  # a duet's two cells may both need them first


class TLSFilesError(RuntimeError):
    """openssl could not make a file; the message has its own words."""


def needed(cell: Cell) -> bool:
    """Whether a cell's server is given the run's certificate: a load over TLS, or a command naming {cert} or {key}
    (whatever its load speaks)."""
    return cell.load.tls != "off" or (cell.kind.launcher == "command" and bool(cell.kind.tls_transports))


def at(run_dir: Path) -> TLSFiles:
    """Where a run's files are (made or not)."""
    folder = run_dir / "tls"
    return TLSFiles(ca=folder / "ca.pem", cert=folder / "server.pem", key=folder / "server.key")


def ensure(run_dir: Path, address: str | None = None) -> TLSFiles:
    """The run's files, made now unless they are there; `address` a name the certificate carries besides loopback.
    Raises TLSFilesError."""
    files = at(run_dir)
    with _lock:
        if not all(p.exists() for p in (files.ca, files.cert, files.key)):
            _make(files, address)
    return files


def subject_alt_names(address: str | None) -> str:
    names = ["IP:127.0.0.1", "IP:::1", "DNS:localhost"]
    if address and address not in ("127.0.0.1", "::1", "localhost"):
        names.append(f"IP:{address}" if _is_ip(address) else f"DNS:{address}")
    return "subjectAltName=" + ",".join(names)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _make(files: TLSFiles, address: str | None) -> None:
    folder = files.ca.parent
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, csr, ext = folder / "ca.key", folder / "server.csr", folder / "san.ext"
    days = ["-days", str(VALID_DAYS)]
    ca = ["-keyout", ca_key.name, "-out", files.ca.name, "-subj", "/CN=xferbench-run-ca"]
    _openssl("req", "-x509", *ca, *days, *_EC_KEY, cwd=folder)
    _openssl("req", *_EC_KEY, "-keyout", files.key.name, "-out", csr.name, "-subj", SUBJECT, cwd=folder)
    ext.write_text(subject_alt_names(address) + "\n")
    signed = ["-CA", files.ca.name, "-CAkey", ca_key.name, "-CAcreateserial", "-extfile", ext.name]
    _openssl("x509", "-req", "-in", csr.name, "-out", files.cert.name, *signed, *days, cwd=folder)
    for spent in (ca_key, csr, ext, folder / "ca.srl"):
        spent.unlink(missing_ok=True)


def _openssl(*args: str, cwd: Path) -> None:
    try:
        r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=OPENSSL_TIMEOUT_S)
    except FileNotFoundError:
        raise TLSFilesError("openssl is not installed: a run with tls needs it to make its certificate") from None
    except subprocess.TimeoutExpired:
        raise TLSFilesError(f"openssl {args[0]} took over {OPENSSL_TIMEOUT_S:g}s") from None
    if r.returncode != 0:
        said = r.stderr.strip().splitlines()[-1:] or ["no output"]
        raise TLSFilesError(f"openssl {args[0]} failed with status {r.returncode}: {said[0]}")
