// Package tlsx is TLS for xferd-go and its clients: a listener whose handshakes run beside its accept loop,
// each bounded in time and counted by outcome; the reasons a handshake fails; and the client side's
// configuration and errors (internal/tlsx/client.go).
package tlsx

import (
	"crypto/tls"
	"net"
	"sync"
	"time"
)

// Observer sees every handshake's outcome and every TLS connection's end.
type Observer interface {
	// Handshook counts a completed handshake (resumed: from a session ticket) that opened a connection.
	Handshook(d time.Duration, resumed bool)
	// Failed counts a handshake that failed for one of Reasons.
	Failed(reason string)
	// Closed counts the end of a connection Handshook opened.
	Closed()
}

// Listener hands out connections whose TLS handshake has completed. Each accepted connection is
// handshaken in its own goroutine with a deadline of Timeout, so a client that stalls mid-handshake holds
// its connection (counted by the inner listener's --max-conns budget) for Timeout at most and never
// delays anyone else's handshake.
type Listener struct {
	inner   net.Listener
	cfg     *tls.Config
	timeout time.Duration
	obs     Observer
	notTLS  func(net.Conn)

	ready   chan net.Conn
	failed  chan struct{} // closed once inner's Accept failed; err says why
	err     error
	closing chan struct{}
	once    sync.Once

	mu      sync.Mutex
	pending map[net.Conn]struct{} // connections still handshaking
	wg      sync.WaitGroup
}

// NewListener serves TLS with cfg on inner's connections, each handshake within timeout. notTLS, when not
// nil, gets a connection whose first bytes were no TLS at all, to answer it in plaintext; it must close it.
func NewListener(inner net.Listener, cfg *tls.Config, timeout time.Duration, obs Observer, notTLS func(net.Conn)) *Listener {
	l := &Listener{inner: inner, cfg: cfg, timeout: timeout, obs: obs, notTLS: notTLS,
		ready: make(chan net.Conn), failed: make(chan struct{}), closing: make(chan struct{}),
		pending: make(map[net.Conn]struct{})}
	go l.acceptLoop()
	return l
}

// Accept returns the next connection whose handshake completed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.failed:
		return nil, l.err
	}
}

// Addr is the inner listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

// Close stops accepting and ends every handshake in progress; connections already handed out are the
// server's to close.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		l.mu.Lock()
		close(l.closing)
		for c := range l.pending {
			_ = c.Close() // its handshake fails at once; shutdown, not counted
		}
		l.mu.Unlock()
		err = l.inner.Close()
		l.wg.Wait()
	})
	return err
}

func (l *Listener) acceptLoop() {
	for {
		c, err := l.inner.Accept()
		if err != nil {
			l.err = err
			close(l.failed)
			return
		}
		if l.track(c) {
			go l.handshake(c)
		}
	}
}

// track records a connection as handshaking, or closes it when the listener is closing.
func (l *Listener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.closing:
		_ = c.Close() // accepted as the listener closed
		return false
	default:
	}
	l.pending[c] = struct{}{}
	l.wg.Add(1)
	return true
}

// untrack ends the listener's hold on c; false when the listener is closing (and has closed c).
func (l *Listener) untrack(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pending, c)
	select {
	case <-l.closing:
		return false
	default:
		return true
	}
}

func (l *Listener) isClosing() bool {
	select {
	case <-l.closing:
		return true
	default:
		return false
	}
}

func (l *Listener) handshake(c net.Conn) {
	defer l.wg.Done()
	start := time.Now()
	watch := &alertWatch{Conn: c}
	tc := tls.Server(watch, l.cfg)
	err := c.SetDeadline(start.Add(l.timeout))
	if err == nil {
		err = tc.Handshake()
	}
	if err == nil {
		err = c.SetDeadline(time.Time{})
	}
	if err != nil {
		l.fail(c, watch.reason(err))
		return
	}
	watch.off = true
	if !l.untrack(c) {
		_ = c.Close() // closed during the handshake's last step
		return
	}
	l.obs.Handshook(time.Since(start), tc.ConnectionState().DidResume)
	conn := newConn(tc, l.obs)
	select {
	case l.ready <- conn:
	case <-l.closing:
		_ = conn.Close() // the server stopped accepting before taking it
	}
}

// fail counts a failed handshake (unless the listener closing caused it) and closes its connection,
// after a plaintext answer for a client that spoke no TLS.
func (l *Listener) fail(c net.Conn, reason string) {
	if l.isClosing() {
		_ = c.Close()
		l.untrack(c)
		return
	}
	l.obs.Failed(reason)
	if reason == ReasonNotTLS && l.notTLS != nil {
		l.notTLS(c) // stays tracked while it lingers, so Close can cut it short
	} else {
		_ = c.Close() // the handshake failed; crypto/tls already sent whatever alert it could
	}
	l.untrack(c)
}
