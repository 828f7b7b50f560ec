package tlsx

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"syscall"
)

// The reasons a handshake fails, the values of the label `reason` on
// xfer_tls_handshake_failures_total.
const (
	// ReasonTimeout: not finished within --tls-handshake-timeout (a stalled or trickling client).
	ReasonTimeout = "timeout"
	// ReasonNotTLS: the first bytes are no TLS record at all (plaintext frames, garbage).
	ReasonNotTLS = "not_tls"
	// ReasonEOF: the client closed or reset the connection before the handshake finished.
	ReasonEOF = "eof"
	// ReasonClientAlert: the client sent an alert, typically refusing our certificate.
	ReasonClientAlert = "client_alert"
	// ReasonProtocol: anything else, a malformed or unacceptable handshake (no common version or cipher,
	// a bad record after the first).
	ReasonProtocol = "protocol"
)

// Reasons are every reason, for figures that start at 0.
var Reasons = []string{ReasonTimeout, ReasonNotTLS, ReasonEOF, ReasonClientAlert, ReasonProtocol}

// Reason classifies a server-side handshake error.
func Reason(err error) string {
	var rh tls.RecordHeaderError
	var op *net.OpError
	var ne net.Error
	switch {
	// crypto/tls sets Conn only when the very first record did not look like TLS and nothing was sent back.
	case errors.As(err, &rh) && rh.Conn != nil:
		return ReasonNotTLS
	case errors.As(err, &op) && op.Op == "remote error":
		return ReasonClientAlert
	case errors.As(err, &ne) && ne.Timeout():
		return ReasonTimeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE):
		return ReasonEOF
	}
	return ReasonProtocol
}
