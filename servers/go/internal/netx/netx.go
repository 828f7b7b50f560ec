// Package netx holds the listener that enforces --max-conns on each
// transport, counts open connections and survives running out of
// descriptors.
package netx

import (
	"net"
	"sync"
	"sync/atomic"
)

// Limiter is the server-wide connection budget.
type Limiter struct {
	max      int64
	open     atomic.Int64
	onOpen   func()
	onClosed func()
}

// NewLimiter allows at most max open connections; onOpen and onClosed
// (may be nil) see every admitted connection come and go.
func NewLimiter(max int, onOpen, onClosed func()) *Limiter {
	nop := func() {}
	if onOpen == nil {
		onOpen = nop
	}
	if onClosed == nil {
		onClosed = nop
	}
	return &Limiter{max: int64(max), onOpen: onOpen, onClosed: onClosed}
}

// Max is the limit.
func (l *Limiter) Max() int { return int(l.max) }

func (l *Limiter) admit() bool {
	if l.open.Add(1) > l.max {
		l.open.Add(-1)
		return false
	}
	l.onOpen()
	return true
}

// Listener admits connections within the limiter's budget and hands the
// others to reject, which runs in its own goroutine and must close them.
// When accept runs out of descriptors, one waiting connection at a time is
// given to NoFDs (nil: just closed) and dropped; Accept never fails for it.
type Listener struct {
	net.Listener
	lim    *Limiter
	reject func(net.Conn)
	NoFDs  func(net.Conn)
}

// Wrap applies lim to ln.
func Wrap(ln net.Listener, lim *Limiter, reject func(net.Conn)) *Listener {
	return &Listener{Listener: ln, lim: lim, reject: reject}
}

// Accept returns the next admitted connection.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil && isNoFDs(err) {
			shed(l.Listener, l.refuseNoFDs)
			continue
		}
		if err != nil {
			return nil, err
		}
		if l.lim.admit() {
			return &conn{Conn: c, lim: l.lim}, nil
		}
		go l.reject(c)
	}
}

func (l *Listener) refuseNoFDs(c net.Conn) {
	if l.NoFDs != nil {
		l.NoFDs(c)
	}
}

// conn gives its budget back exactly once, on Close.
type conn struct {
	net.Conn
	lim  *Limiter
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.lim.open.Add(-1)
		c.lim.onClosed()
	})
	return err
}

// CloseWrite half-closes when the underlying connection can (TCP), so a
// lingering close still works through the wrapper.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
