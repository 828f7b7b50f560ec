// Package server wires the parts of xferd-go together: store, buffer pool,
// metrics, the connection limit, and the gRPC, frame and admin listeners.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/bufpool"
	"xferbench/servers/go/internal/config"
	"xferbench/servers/go/internal/errs"
	"xferbench/servers/go/internal/frame"
	"xferbench/servers/go/internal/gobrpc"
	"xferbench/servers/go/internal/grpcsvc"
	"xferbench/servers/go/internal/limits"
	"xferbench/servers/go/internal/metrics"
	"xferbench/servers/go/internal/netx"
	"xferbench/servers/go/internal/rpcsvc"
	"xferbench/servers/go/internal/store"
)

const (
	// connListeners is how many listeners --max-conns applies to, each on
	// its own (gRPC and frame), for --max-conns auto.
	connListeners = 2
	// refuseWriteTimeout bounds writing the seq-0 refusal to a connection
	// accepted only to be dropped.
	refuseWriteTimeout = 100 * time.Millisecond
	// poolSlack lets a Read response (data plus header and field tags) of
	// the largest chunk still come from the pool.
	poolSlack = 4096
	// metricsReadHeaderTimeout bounds a slow scrape request's headers.
	metricsReadHeaderTimeout = 5 * time.Second
)

// Server is a running xferd-go.
type Server struct {
	cfg      *config.Config
	store    *store.Store
	grpc     *grpc.Server
	health   *health.Server
	frame    *frame.Server
	frameLns []net.Listener // the plaintext frame listener, then the TLS one
	admin    *http.Server
	addrs    [3]string         // grpc, frame, metrics: the bound addresses
	tlsAddrs map[string]string // the ready line's key (tls_grpc, tls_frame) -> the bound address
	errc     chan error
	stopGC   context.CancelFunc // ends the --gogc adaptive controller; a no-op without it
}

// Start binds every listener and starts serving; on failure nothing stays
// open.
func Start(cfg *config.Config, info metrics.BuildInfo) (s *Server, err error) {
	if err := reserveDescriptors(cfg); err != nil {
		return nil, err
	}
	tlsCfgs, err := loadTLS(cfg.TLS)
	if err != nil {
		return nil, err
	}
	st, err := openStore(cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			st.Close()
		}
	}()
	tlsSpecs := tlsListenSpecs(cfg.TLS)
	lns, err := listenAll(append([]listenSpec{{"--grpc-addr", cfg.GRPCAddr, "grpc"}, {"--frame-addr", cfg.FrameAddr, "frame"},
		{"--metrics-addr", cfg.MetricsAddr, "metrics"}}, tlsSpecs...))
	if err != nil {
		return nil, err
	}
	s = &Server{cfg: cfg, store: st, errc: make(chan error, len(lns)), tlsAddrs: map[string]string{}}
	for i, ln := range lns[:len(s.addrs)] {
		s.addrs[i] = ln.Addr().String()
	}
	for i, ln := range lns[len(s.addrs):] {
		s.tlsAddrs[tlsSpecs[i].key] = ln.Addr().String()
	}
	pool := bufpool.New(cfg.Pool, int(max(cfg.Limits.MaxFrame, cfg.Limits.MaxChunk))+poolSlack)
	m := metrics.New(info, pool.Gets, pool.News)
	// One budget per listener, so a flood on one transport cannot starve the other.
	grpcLim := netx.NewLimiter(cfg.Limits.MaxConns, m.ConnOpened, m.ConnClosed)
	frameLim := netx.NewLimiter(cfg.Limits.MaxConns, m.ConnOpened, m.ConnClosed)
	grpcLn := netx.Wrap(lns[0], grpcLim, rejectGRPC)
	frameLn := netx.Wrap(lns[1], frameLim, rejectFrame(cfg.FrameCodec, frameTooMany(frameLim.Max())))
	frameLn.NoFDs = refuseFrame(cfg.FrameCodec, errs.New(errs.ResourceExhausted, "out of file descriptors").Error())
	s.startGRPC(grpcLn, pool, m)
	if err := s.startFrame(frameLn, pool, m); err != nil {
		s.grpc.Stop()
		for _, ln := range lns[1:] {
			_ = ln.Close() // start failed; the error below says why
		}
		return nil, err
	}
	s.startTLS(lns[len(s.addrs):], tlsSpecs, tlsCfgs, m)
	s.startAdmin(lns[2], m)
	s.stopGC = startGCTune(cfg, m)
	return s, nil
}

// reserveDescriptors raises RLIMIT_NOFILE, resolves --max-conns auto from
// it and takes the spare descriptor that accept falls back on.
func reserveDescriptors(cfg *config.Config) error {
	soft, err := netx.RaiseNoFile()
	if err != nil {
		return fmt.Errorf("RLIMIT_NOFILE: %w", err)
	}
	if cfg.Limits.MaxConns == limits.AutoConns {
		cfg.Limits.MaxConns = netx.AutoMaxConns(soft, connListeners+cfg.TLS.Listeners())
	}
	if err := netx.ReserveSpare(); err != nil {
		return fmt.Errorf("reserving a spare descriptor: %w", err)
	}
	return nil
}

func openStore(cfg *config.Config) (*store.Store, error) {
	if dir := cfg.DiskDir(); dir != "" {
		return store.NewDisk(cfg.Limits, dir)
	}
	return store.NewMem(cfg.Limits), nil
}

// listenSpec is one address to bind: its flag, the address, and its key on the ready line.
type listenSpec struct{ flag, addr, key string }

// listenAll binds every address or none.
func listenAll(specs []listenSpec) ([]net.Listener, error) {
	var lns []net.Listener
	for _, sp := range specs {
		ln, err := net.Listen("tcp", sp.addr)
		if err != nil {
			for _, l := range lns {
				_ = l.Close() // already failing; report the bind error
			}
			return nil, fmt.Errorf("listening on %s %s: %w", sp.flag, sp.addr, err)
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

func (s *Server) startGRPC(ln net.Listener, pool *bufpool.Pool, m *metrics.Metrics) {
	c := s.cfg
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(int(c.Limits.MaxFrame)),
		grpc.MaxSendMsgSize(int(c.Limits.MaxFrame)),
		grpc.MaxConcurrentStreams(c.GRPCMaxConcurrentStreams),
		// Each connection's write buffer goes back to a pool once flushed, so the larger default write
		// buffer costs memory per busy connection, not per open one.
		grpc.SharedWriteBuffer(true),
		grpc.UnaryInterceptor(grpcsvc.UnaryInterceptor(m.For("grpc"))),
		grpc.StreamInterceptor(grpcsvc.StreamInterceptor(m.For("grpc"))),
	}
	if c.GRPCInitialWindowSize > 0 {
		opts = append(opts, grpc.InitialWindowSize(c.GRPCInitialWindowSize))
	}
	if c.GRPCInitialConnWindowSize > 0 {
		opts = append(opts, grpc.InitialConnWindowSize(c.GRPCInitialConnWindowSize))
	}
	if c.GRPCReadBufferSize > 0 {
		opts = append(opts, grpc.ReadBufferSize(c.GRPCReadBufferSize))
	}
	if c.Pool {
		// grpc-go's receive buffers (each DATA frame's bytes) from our pool too: its own pools zero every
		// buffer they hand out again, a memclr per 16 KiB read that ours skips (every byte is overwritten
		// before it is read). With --pool off grpc-go keeps its own, as the pool experiment expects.
		opts = append(opts, experimental.BufferPool(pool))
	}
	if c.GRPCStreamWorkers > 0 {
		opts = append(opts, grpc.NumStreamWorkers(c.GRPCStreamWorkers))
	}
	if c.GRPCWriteBufferSize > 0 {
		opts = append(opts, grpc.WriteBufferSize(c.GRPCWriteBufferSize))
	}
	s.grpc = grpc.NewServer(opts...)
	xferv1.RegisterFileTransferServer(s.grpc, grpcsvc.New(s.store, c.Limits, pool, m))
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpc, s.health)
	s.health.SetServingStatus(xferv1.FileTransfer_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	reflection.Register(s.grpc)
	go func() { s.report("grpc", s.grpc.Serve(ln)) }()
}

func (s *Server) startFrame(ln net.Listener, pool *bufpool.Pool, m *metrics.Metrics) error {
	svc, release := rpcsvc.New(s.store, s.cfg.Limits, pool, m)
	perConn := rpcsvc.PerConn(svc, frame.Service)
	if _, _, err := perConn(); err != nil { // fail at start, not per connection
		return err
	}
	s.frame = frame.NewConnServer(perConn, &frame.CodecConfig{
		MaxFrame:      s.cfg.Limits.MaxFrame,
		ReadTimeout:   s.cfg.Limits.ReadTimeout,
		WriteTimeout:  s.cfg.Limits.WriteTimeout,
		MaxConnCalls:  s.cfg.Limits.MaxConnCalls,
		MaxConnUnsent: s.cfg.Limits.MaxConnUnsent,
		Pool:          pool,
		Observer:      m.For("frame"),
		OnWritten:     release,
	})
	if s.cfg.FrameCodec == config.CodecGob {
		s.frame.WithCodec(gobrpc.NewServerCodec)
	}
	s.frameLns = append(s.frameLns, ln)
	go func() { s.report("frame", s.frame.Serve(ln)) }()
	return nil
}

func (s *Server) startAdmin(ln net.Listener, m *metrics.Metrics) {
	s.admin = &http.Server{Handler: m.Handler(), ReadHeaderTimeout: metricsReadHeaderTimeout}
	go func() {
		err := s.admin.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.report("metrics", err)
	}()
}

func (s *Server) report(what string, err error) {
	if err != nil {
		s.errc <- fmt.Errorf("%s listener: %w", what, err)
	}
}

// Err delivers a listener's failure while running.
func (s *Server) Err() <-chan error { return s.errc }

// rejectGRPC drops a connection over the limit: gRPC has no frame to
// carry the reason, so the client sees the connection close.
func rejectGRPC(c net.Conn) { _ = c.Close() }

func frameTooMany(limit int) string {
	return errs.New(errs.ResourceExhausted, "too many connections (limit %d)", limit).Error()
}

// rejectFrame answers a connection over the limit with the seq=0 error.
func rejectFrame(codec, msg string) func(net.Conn) {
	return func(c net.Conn) {
		if err := writeConnError(codec, c, msg); err != nil {
			_ = c.Close() // the client went away first
			return
		}
		frame.LingerClose(c)
	}
}

// refuseFrame writes the seq=0 error only; the caller closes the connection
// at once, since it holds the last spare descriptor meanwhile.
func refuseFrame(codec, msg string) func(net.Conn) {
	return func(c net.Conn) {
		_ = writeConnError(codec, c, msg) // best effort: it is being dropped
	}
}

// writeConnError writes the seq=0 error in the listener's codec.
func writeConnError(codec string, c net.Conn, msg string) error {
	if codec == config.CodecGob {
		return gobrpc.WriteConnError(c, refuseWriteTimeout, msg)
	}
	return frame.WriteConnError(c, nil, refuseWriteTimeout, msg)
}

// Addrs are the bound gRPC, frame and metrics addresses.
func (s *Server) Addrs() (grpcAddr, frameAddr, metricsAddr string) {
	return s.addrs[0], s.addrs[1], s.addrs[2]
}

// Shutdown stops accepting, lets calls in flight finish until ctx ends,
// then stops whatever is left.
func (s *Server) Shutdown(ctx context.Context) {
	s.health.Shutdown()
	grpcDone := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(grpcDone)
	}()
	for _, ln := range s.frameLns {
		_ = ln.Close() // ends Serve; Shutdown below drains connections
	}
	_ = s.frame.Shutdown(ctx) // on timeout it has closed the stragglers
	_ = s.admin.Close()       // the metrics endpoint never delays shutdown, even for a stalled scrape
	select {
	case <-grpcDone:
	case <-ctx.Done():
		s.grpc.Stop()
	}
	s.stopGC()
	s.store.Close()
}
