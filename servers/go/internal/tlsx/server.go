package tlsx

import (
	"crypto/tls"
	"fmt"
)

// ServerOptions are the TLS settings of xferd-go's TLS listeners.
type ServerOptions struct {
	CertFile, KeyFile string
	// Tickets issues session tickets, so a returning client resumes without a full handshake.
	Tickets bool
}

// ServerConfig loads the certificate and key and returns the listener's configuration: TLS 1.2 or later
// (1.3 whenever the client has it), nextProtos offered by ALPN (gRPC's clients require "h2").
func ServerConfig(o ServerOptions, nextProtos ...string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %w", o.CertFile, o.KeyFile, err)
	}
	return &tls.Config{
		Certificates:           []tls.Certificate{cert},
		MinVersion:             tls.VersionTLS12,
		NextProtos:             nextProtos,
		SessionTicketsDisabled: !o.Tickets,
	}, nil
}
