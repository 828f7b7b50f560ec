package tlsx

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// sessionCacheSize is how many sessions a client keeps: one per server it talks to is all it needs.
const sessionCacheSize = 64

// ClientOptions are a client's TLS flags: --tls-ca, --tls-server-name and --tls-resume.
type ClientOptions struct {
	CAFile     string // PEM certificates the server's chain must end in
	ServerName string // the name the server's certificate must carry; "": the address's host
	Resume     bool   // keep sessions and resume them on later connections
}

// Config is the client's TLS configuration for a server at addr.
func (o ClientOptions) Config(addr string) (*tls.Config, error) {
	pem, err := os.ReadFile(o.CAFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", o.CAFile)
	}
	name := o.ServerName
	if name == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("address %q: %w", addr, err)
		}
		name = host
	}
	cfg := &tls.Config{RootCAs: roots, ServerName: name, MinVersion: tls.VersionTLS12}
	if o.Resume {
		cfg.ClientSessionCache = newTicketCache()
	}
	return cfg, nil
}

// ticketCache is a client session cache that tells when the first session arrived. TLS 1.3 sends the
// ticket after the handshake, and the client takes it only when it next reads: a driver that opens all
// its connections at once would resume none of them. Waiting for the first connection's ticket
// (AwaitTicket) makes the others resume.
type ticketCache struct {
	tls.ClientSessionCache
	once sync.Once
	got  chan struct{}
}

func newTicketCache() *ticketCache {
	return &ticketCache{ClientSessionCache: tls.NewLRUClientSessionCache(sessionCacheSize), got: make(chan struct{})}
}

func (c *ticketCache) Put(key string, cs *tls.ClientSessionState) {
	c.ClientSessionCache.Put(key, cs)
	if cs != nil {
		c.once.Do(func() { close(c.got) })
	}
}

// AwaitTicket waits up to d for cfg's session cache to receive its first session (a server with tickets
// off sends none); false without one, or without resumption.
func AwaitTicket(cfg *tls.Config, d time.Duration) bool {
	c, ok := cfg.ClientSessionCache.(*ticketCache)
	if !ok {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.got:
		return true
	case <-t.C:
		return false
	}
}

// Explain turns a client handshake error into one that says what was wrong in the words of the flags.
func (o ClientOptions) Explain(err error) error {
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var host x509.HostnameError
	var rh tls.RecordHeaderError
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("TLS handshake failed: the server's certificate is not trusted: it is not signed by a CA of --tls-ca %s (%v)", o.CAFile, err)
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return fmt.Errorf("TLS handshake failed: the server's certificate has expired or is not yet valid (%s)", invalid.Detail)
	case errors.As(err, &host):
		return fmt.Errorf("TLS handshake failed: the server's certificate is not valid for %q (--tls-server-name) (%v)", host.Host, err)
	case errors.As(err, &rh):
		return fmt.Errorf("TLS handshake failed: the server did not answer in TLS; is this a plaintext listener? (%v)", err)
	}
	return fmt.Errorf("TLS handshake failed: %w", err)
}

// Handshake runs the client handshake on nc within timeout; its error is Explain's.
func (o ClientOptions) Handshake(nc net.Conn, cfg *tls.Config, timeout time.Duration) (*tls.Conn, error) {
	tc := tls.Client(nc, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, o.Explain(err)
	}
	return tc, nil
}

// Probe dials addr and handshakes once, to learn why a connection made by another library (grpc-go) failed;
// nil when the handshake succeeds.
func (o ClientOptions) Probe(addr string, timeout time.Duration) error {
	cfg, err := o.Config(addr)
	if err != nil {
		return err
	}
	cfg.ClientSessionCache = nil
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer nc.Close()
	_, err = o.Handshake(nc, cfg, timeout)
	return err
}
