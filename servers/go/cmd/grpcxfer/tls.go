package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

const (
	// connectTimeout bounds a TLS connection's wait to become ready, handshake included.
	connectTimeout = 10 * time.Second
	// ticketWait bounds the wait for the first connection's TLS session ticket (tlsx.AwaitTicket).
	ticketWait = 500 * time.Millisecond
)

// transportCreds are the connections' credentials: TLS with --tls-ca, else plaintext.
func transportCreds(cfg *Config) grpc.DialOption {
	if cfg.tlsConfig == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(cfg.tlsConfig))
}

// awaitTLS connects cc at once and waits until it is ready, so a handshake that fails ends the run with
// why (grpc-go's own error keeps only the text): a TLS handshake of our own learns it.
func awaitTLS(cfg *Config, cc *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	cc.Connect()
	for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		if s == connectivity.TransientFailure || !cc.WaitForStateChange(ctx, s) {
			if err := cfg.TLS.Probe(cfg.Addr, connectTimeout); err != nil {
				return fmt.Errorf("cannot connect to %s: %w", cfg.Addr, err)
			}
			return fmt.Errorf("cannot connect to %s: the connection is %s", cfg.Addr, s)
		}
	}
	return nil
}

// tlsConfig reads --tls-ca's file once: every connection shares the configuration and its session cache.
func tlsConfig(cfg *Config) (*tls.Config, error) {
	if cfg.TLS == nil {
		return nil, nil
	}
	return cfg.TLS.Config(cfg.Addr)
}
