package config

import (
	"flag"
	"fmt"
	"strings"
	"time"
)

// DefaultTLSHandshakeTimeout bounds a TLS handshake as --read-timeout bounds a begun frame.
const DefaultTLSHandshakeTimeout = 10 * time.Second

// TLS is the TLS listeners' configuration: none unless GRPCAddr or FrameAddr is set. Each serves the same
// service as its plaintext listener, which keeps serving beside it.
type TLS struct {
	GRPCAddr, FrameAddr string // "": no TLS listener for that transport
	CertFile, KeyFile   string
	Tickets             bool // issue session tickets (resumption); off changes what a reconnect allocates
	HandshakeTimeout    time.Duration
}

// Enabled says whether any TLS listener is configured.
func (t TLS) Enabled() bool { return t.GRPCAddr != "" || t.FrameAddr != "" }

// Listeners counts the TLS listeners, each with its own --max-conns budget.
func (t TLS) Listeners() int {
	n := 0
	for _, a := range []string{t.GRPCAddr, t.FrameAddr} {
		if a != "" {
			n++
		}
	}
	return n
}

// tlsOnlyFlags mean nothing without a TLS listener.
var tlsOnlyFlags = []string{"tls-cert", "tls-key", "tls-tickets", "tls-handshake-timeout"}

func (c *Config) registerTLS(fs *flag.FlagSet) {
	t := &c.TLS
	fs.StringVar(&t.GRPCAddr, "tls-grpc-addr", "", "gRPC over TLS listen address, `HOST:PORT`, beside --grpc-addr (default: none)")
	fs.StringVar(&t.FrameAddr, "tls-frame-addr", "", "frame protocol over TLS listen address, `HOST:PORT`, beside --frame-addr (default: none)")
	fs.StringVar(&t.CertFile, "tls-cert", "", "the TLS listeners' certificate chain, PEM `FILE` (default: none; required with a TLS listener)")
	fs.StringVar(&t.KeyFile, "tls-key", "", "the private key of --tls-cert, PEM `FILE` (default: none; required with a TLS listener)")
	fs.Var(onOffValue{&t.Tickets}, "tls-tickets", "TLS session tickets (resumption), `on|off`")
	fs.Var(DurationValue{&t.HandshakeTimeout}, "tls-handshake-timeout", "a TLS handshake not finished within this closes its connection, `DURATION`")
}

// checkTLS refuses TLS settings without a TLS listener (they would be silently ignored) and a TLS
// listener without its certificate and key.
func (c *Config) checkTLS(fs *flag.FlagSet) []string {
	t := c.TLS
	if !t.Enabled() {
		var given []string
		fs.Visit(func(f *flag.Flag) {
			for _, name := range tlsOnlyFlags {
				if f.Name == name {
					given = append(given, "--"+name)
				}
			}
		})
		if len(given) > 0 {
			return []string{fmt.Sprintf("%s: only with --tls-grpc-addr or --tls-frame-addr", strings.Join(given, ", "))}
		}
		return nil
	}
	var problems []string
	if t.CertFile == "" || t.KeyFile == "" {
		problems = append(problems, "a TLS listener (--tls-grpc-addr, --tls-frame-addr) needs --tls-cert and --tls-key")
	}
	if t.HandshakeTimeout <= 0 {
		problems = append(problems, fmt.Sprintf("--tls-handshake-timeout %v: must be positive", t.HandshakeTimeout))
	}
	for _, a := range []struct{ name, v string }{{"tls-grpc-addr", t.GRPCAddr}, {"tls-frame-addr", t.FrameAddr}} {
		if a.v != "" && !strings.Contains(a.v, ":") {
			problems = append(problems, fmt.Sprintf("--%s %q: want HOST:PORT", a.name, a.v))
		}
	}
	return problems
}
