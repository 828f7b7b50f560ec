package tlsx

import (
	"crypto/tls"
	"sync"
	"time"
)

// closeNotifyBound bounds sending close_notify on Close and CloseWrite: crypto/tls waits up to 5 s for a
// peer that reads nothing, which would hold a server's shutdown past its --drain-timeout.
const closeNotifyBound = 250 * time.Millisecond

// Conn is a server-side TLS connection whose handshake has completed. Closing it is counted once.
type Conn struct {
	*tls.Conn
	obs  Observer
	once sync.Once
}

func newConn(tc *tls.Conn, obs Observer) *Conn { return &Conn{Conn: tc, obs: obs} }

// Close sends close_notify (within closeNotifyBound) and closes the connection.
func (c *Conn) Close() error {
	var err error
	c.once.Do(func() {
		t := time.AfterFunc(closeNotifyBound, func() { _ = c.NetConn().Close() })
		err = c.Conn.Close()
		t.Stop()
		c.obs.Closed()
	})
	return err
}

// CloseWrite sends close_notify (within closeNotifyBound) and leaves the connection readable, for a
// lingering close (frame.LingerClose).
func (c *Conn) CloseWrite() error {
	t := time.AfterFunc(closeNotifyBound, func() { _ = c.NetConn().SetWriteDeadline(time.Now()) })
	defer t.Stop()
	return c.Conn.CloseWrite()
}
