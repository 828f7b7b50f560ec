package server

import (
	"crypto/tls"
	"net"

	"xferbench/servers/go/internal/config"
	"xferbench/servers/go/internal/errs"
	"xferbench/servers/go/internal/metrics"
	"xferbench/servers/go/internal/netx"
	"xferbench/servers/go/internal/tlsx"
)

// tlsConfigs are the TLS listeners' configurations, loaded before anything is bound so that a bad
// certificate or key fails the start with nothing open.
type tlsConfigs struct{ grpc, frame *tls.Config }

func loadTLS(c config.TLS) (tlsConfigs, error) {
	if !c.Enabled() {
		return tlsConfigs{}, nil
	}
	opts := tlsx.ServerOptions{CertFile: c.CertFile, KeyFile: c.KeyFile, Tickets: c.Tickets}
	grpcCfg, err := tlsx.ServerConfig(opts, "h2") // gRPC clients refuse a server that does not negotiate h2
	if err != nil {
		return tlsConfigs{}, err
	}
	frameCfg, err := tlsx.ServerConfig(opts)
	return tlsConfigs{grpc: grpcCfg, frame: frameCfg}, err
}

// tlsListenSpecs are the TLS addresses to bind, after listenAll's first three.
func tlsListenSpecs(c config.TLS) []listenSpec {
	var out []listenSpec
	if c.GRPCAddr != "" {
		out = append(out, listenSpec{"--tls-grpc-addr", c.GRPCAddr, "tls_grpc"})
	}
	if c.FrameAddr != "" {
		out = append(out, listenSpec{"--tls-frame-addr", c.FrameAddr, "tls_frame"})
	}
	return out
}

// startTLS serves each TLS listener with the transport's own server. Every listener has its own
// --max-conns budget, which a connection takes from accept on, through its handshake: a flood of
// half-open handshakes fills the TLS listener's budget, not the plaintext one's.
func (s *Server) startTLS(lns []net.Listener, specs []listenSpec, cfgs tlsConfigs, m *metrics.Metrics) {
	timeout := s.cfg.TLS.HandshakeTimeout
	for i, ln := range lns {
		lim := netx.NewLimiter(s.cfg.Limits.MaxConns, m.ConnOpened, m.ConnClosed)
		// Over the budget or out of descriptors, a connection is closed before its handshake: no answer
		// can reach a TLS client without one, and one would cost what the bound is there to refuse.
		raw := netx.Wrap(ln, lim, closeConn)
		switch specs[i].key {
		case "tls_grpc":
			tl := tlsx.NewListener(raw, cfgs.grpc, timeout, m.TLS("grpc", tlsx.Reasons), nil)
			go func() { s.report("TLS grpc", s.grpc.Serve(tl)) }()
		case "tls_frame":
			tl := tlsx.NewListener(raw, cfgs.frame, timeout, m.TLS("frame", tlsx.Reasons), rejectFrame(s.cfg.FrameCodec, notTLSMessage))
			s.frameLns = append(s.frameLns, tl)
			go func() { s.report("TLS frame", s.frame.Serve(tl)) }()
		}
	}
}

// notTLSMessage answers, in plaintext, a frame client that spoke no TLS to a TLS listener.
var notTLSMessage = errs.New(errs.InvalidArgument, "not a TLS handshake: this listener serves the frame protocol over TLS").Error()

func closeConn(c net.Conn) { _ = c.Close() }
