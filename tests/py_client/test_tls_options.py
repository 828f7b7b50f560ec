"""py_client's TLS options without a server: a CA file that cannot be read is refused naming it, and each kind of
handshake failure is explained in words that point at the fix (the servers' side is tests/servers/tls/)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from py_client import FrameClient, GrpcClient, TLSOptions, connect


def verification_error(code: int, message: str) -> ssl.SSLCertVerificationError:
    err = ssl.SSLCertVerificationError(1, f"[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: {message}")
    err.verify_code, err.verify_message = code, message
    return err


def test_an_unreadable_ca_file_is_named(tmp_path: Path) -> None:
    missing, garbage = tmp_path / "missing.pem", tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    for ca in (missing, garbage):
        with pytest.raises(ValueError, match=f"TLS CA file '{ca}'"):
            FrameClient("127.0.0.1:1", tls=TLSOptions(ca))
    with pytest.raises(ValueError, match=f"TLS CA file '{missing}'"):
        GrpcClient("127.0.0.1:1", tls=TLSOptions(missing))
    with pytest.raises(ValueError, match="TLS CA file"):
        connect("frame://127.0.0.1:1", tls=TLSOptions(missing))


@pytest.mark.parametrize(
    ("err", "want"),
    [
        (
            verification_error(20, "unable to get local issuer certificate"),
            "the server's certificate is not trusted: it is not signed by a CA in 'ca.pem' (unable to get local issuer",
        ),
        (verification_error(19, "self-signed certificate in certificate chain"), "is not trusted"),
        (
            verification_error(10, "certificate has expired"),
            "the server's certificate has expired or is not yet valid (certificate has expired)",
        ),
        (verification_error(9, "certificate is not yet valid"), "has expired or is not yet valid"),
        (
            verification_error(64, "IP address mismatch, certificate is not valid for '127.0.0.1'."),
            "is not valid for the name checked (IP address mismatch",
        ),
        (verification_error(23, "certificate revoked"), "failed verification (certificate revoked)"),
    ],
)
def test_verification_failures_are_explained(err: ssl.SSLError, want: str) -> None:
    assert want in TLSOptions("ca.pem").explain(err)


def test_a_plaintext_answer_is_explained() -> None:
    err = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    err.reason = "WRONG_VERSION_NUMBER"
    assert "did not answer in TLS; is this a plaintext listener?" in TLSOptions("ca.pem").explain(err)


def test_the_server_name_defaults_to_the_host() -> None:
    assert TLSOptions("ca.pem").name_for("127.0.0.1") == "127.0.0.1"
    assert TLSOptions("ca.pem", server_name="xferd.test").name_for("127.0.0.1") == "xferd.test"
