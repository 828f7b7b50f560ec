"""Throwaway certificates for TLS tests, made with the `openssl` command line: a CA, a server certificate it
signed for the loopback names, an expired one, and a second CA that signed nothing a server presents.

    files = make_tls_files(tmp_path)
    start_server("xferd-go", [*files.server_args(), "--tls-frame-addr=127.0.0.1:0"])

Keys are EC P-256: quick to make, and taken by every TLS library the tests use (Go, OpenSSL, gRPC's).
"""

from __future__ import annotations

import socket
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

# The names the server certificates carry: a client connecting to 127.0.0.1 checks the IP, and one given
# --tls-server-name checks SERVER_NAME.
SERVER_NAME = "xferd.test"
SUBJECT_ALT_NAMES = f"subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:{SERVER_NAME}"
VALID_DAYS = 2
OPENSSL_TIMEOUT_S = 30.0
_EC_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]


@dataclass(frozen=True)
class TLSFiles:
    ca: Path  # the CA a client is given (--tls-ca)
    cert: Path  # a server certificate the CA signed, valid now
    key: Path
    expired_cert: Path  # the same key, signed by the CA, whose validity ended before it began: expired now
    other_ca: Path  # a CA that signed none of these: a client trusting only it refuses the server

    def server_args(self, *, expired: bool = False) -> list[str]:
        """xferd-go's (and xferd-c's) --tls-cert and --tls-key flags."""
        return [f"--tls-cert={self.expired_cert if expired else self.cert}", f"--tls-key={self.key}"]


def _openssl(*args: str, cwd: Path) -> None:
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=OPENSSL_TIMEOUT_S)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed ({r.returncode}):\n{r.stderr}")


def _make_ca(folder: Path, name: str) -> tuple[Path, Path]:
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    req = f"req -x509 -keyout {key.name} -out {cert.name} -subj /CN={name} -days {VALID_DAYS}"
    _openssl(*req.split(), *_EC_KEY, cwd=folder)
    return cert, key


def _sign(folder: Path, csr: Path, ca: tuple[Path, Path], out: str, days: int) -> Path:
    """Signs csr with ca; days -1 makes a certificate whose notAfter is a day before its notBefore (now)."""
    ext = folder / "san.ext"
    ext.write_text(SUBJECT_ALT_NAMES + "\n")
    sign = f"x509 -req -in {csr.name} -CA {ca[0].name} -CAkey {ca[1].name} -CAcreateserial -out {out} -days {days}"
    _openssl(*sign.split(), "-extfile", ext.name, cwd=folder)
    return folder / out


def make_tls_files(folder: Path) -> TLSFiles:
    """Makes every file in folder (created if missing)."""
    folder.mkdir(parents=True, exist_ok=True)
    ca = _make_ca(folder, "ca")
    other_ca, _ = _make_ca(folder, "other-ca")
    key, csr = folder / "server.key", folder / "server.csr"
    _openssl("req", *_EC_KEY, "-keyout", key.name, "-out", csr.name, "-subj", f"/CN={SERVER_NAME}", cwd=folder)
    cert = _sign(folder, csr, ca, "server.pem", VALID_DAYS)
    expired = _sign(folder, csr, ca, "expired.pem", -1)
    return TLSFiles(ca=ca[0], cert=cert, key=key, expired_cert=expired, other_ca=other_ca)


def trusting(ca: Path) -> ssl.SSLContext:
    """A client context that trusts the CA `ca` only."""
    return ssl.create_default_context(cafile=str(ca))


class RawTLS:
    """A TLS client whose every byte the test sends itself: OpenSSL over memory buffers on a plain socket, so that
    a test can send garbage before its ClientHello, stop halfway through a handshake or cut a record."""

    def __init__(self, address: str, ctx: ssl.SSLContext, timeout_s: float = 10.0) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.incoming, self.outgoing, server_hostname=host)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawTLS:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def client_hello(self) -> bytes:
        """The ClientHello, not sent."""
        try:
            self.tls.do_handshake()
        except ssl.SSLWantReadError:
            return self.outgoing.read()
        raise AssertionError("a handshake cannot end before the server answered")

    def handshake(self) -> RawTLS:
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.sock.sendall(self.outgoing.read())
                data = self.sock.recv(65536)
                if not data:
                    raise ConnectionError("the server closed the connection during the handshake") from None
                self.incoming.write(data)
        self.sock.sendall(self.outgoing.read())  # the client's Finished
        return self

    def record(self, plaintext: bytes) -> bytes:
        """plaintext encrypted into TLS records, not sent."""
        self.tls.write(plaintext)
        return self.outgoing.read()
