package frame

import (
	"context"
	"errors"
	"net"
	"net/rpc"
	"sync"
	"sync/atomic"
	"time"
)

// acceptBackoff bounds the pause after a failed Accept (e.g. out of fds).
const (
	minAcceptBackoff = 5 * time.Millisecond
	maxAcceptBackoff = time.Second
)

// ConnCodec is what a Server serves one connection with: a net/rpc
// ServerCodec that Shutdown can stop between requests.
type ConnCodec interface {
	rpc.ServerCodec
	// Interrupt makes a codec blocked between requests return (shutdown).
	Interrupt()
}

// NewCodecFunc makes a connection's codec; closing, once set, asks it to
// stop at the next request boundary.
type NewCodecFunc func(conn net.Conn, cfg *CodecConfig, closing *atomic.Bool) ConnCodec

// Server serves the frame protocol: one net/rpc ServeCodec per connection.
type Server struct {
	perConn  func() (*rpc.Server, func(), error)
	cfg      *CodecConfig
	newCodec NewCodecFunc
	closing  atomic.Bool

	mu     sync.Mutex
	codecs map[ConnCodec]net.Conn
	wg     sync.WaitGroup
}

// NewServer serves rpcServer's services with cfg.
func NewServer(rpcServer *rpc.Server, cfg *CodecConfig) *Server {
	return NewConnServer(func() (*rpc.Server, func(), error) { return rpcServer, func() {}, nil }, cfg)
}

// NewConnServer serves each connection with the rpc.Server perConn makes
// for it, and calls the hook perConn returns once that connection's calls
// are all answered and it is closed.
func NewConnServer(perConn func() (*rpc.Server, func(), error), cfg *CodecConfig) *Server {
	return &Server{perConn: perConn, cfg: cfg, newCodec: newFrameCodec, codecs: make(map[ConnCodec]net.Conn)}
}

// WithCodec serves every connection with the codec newCodec makes (gob, for
// --frame-codec gob) instead of the frame protocol's; call before Serve.
func (s *Server) WithCodec(newCodec NewCodecFunc) *Server {
	s.newCodec = newCodec
	return s
}

func newFrameCodec(conn net.Conn, cfg *CodecConfig, closing *atomic.Bool) ConnCodec {
	return NewServerCodec(conn, cfg, closing)
}

// Serve accepts connections until ln closes; it returns nil when the close
// came from Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	backoff := minAcceptBackoff
	for {
		conn, err := ln.Accept()
		if err != nil {
			if s.closing.Load() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(backoff)
				backoff = min(2*backoff, maxAcceptBackoff)
				continue
			}
			return err
		}
		backoff = minAcceptBackoff
		s.serveConn(conn)
	}
}

func (s *Server) serveConn(conn net.Conn) {
	rs, done, err := s.perConn()
	if err != nil {
		_ = conn.Close() // cannot serve it; registration failing is a bug, not the client's doing
		return
	}
	c := s.newCodec(conn, s.cfg, &s.closing)
	s.mu.Lock()
	s.codecs[c] = conn
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		rs.ServeCodec(c) // returns after in-flight calls answered; closes c
		done()
		s.mu.Lock()
		delete(s.codecs, c)
		s.mu.Unlock()
	}()
}

// Shutdown stops reading new frames on every connection, lets calls in
// flight finish, and waits until ctx ends; then it closes what remains.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	s.mu.Lock()
	for c := range s.codecs {
		c.Interrupt()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for _, conn := range s.codecs {
			_ = conn.Close() // forced stop: the client loses this connection
		}
		s.mu.Unlock()
		return ctx.Err()
	}
}
