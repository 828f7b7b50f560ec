package tlsx

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

const ioTimeout = 5 * time.Second

// counts is an Observer that remembers what it saw.
type counts struct {
	mu                         sync.Mutex
	handshook, resumed, closed int
	failed                     map[string]int
}

func (c *counts) Handshook(_ time.Duration, resumed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handshook++
	if resumed {
		c.resumed++
	}
}

func (c *counts) Failed(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failed[reason]++
}

func (c *counts) Closed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed++
}

func (c *counts) get(f func(*counts) int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return f(c)
}

// waitFor polls cond until it holds or ioTimeout passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, ioTimeout)
		}
		time.Sleep(5 * time.Millisecond) // poll interval
	}
}

type server struct {
	l    *Listener
	obs  *counts
	addr string
}

// serve runs an echo server over a TLS listener; notTLS may be nil.
func serve(t *testing.T, p *testPKI, certFile string, tickets bool, timeout time.Duration, notTLS func(net.Conn)) *server {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ServerConfig(ServerOptions{CertFile: certFile, KeyFile: p.keyFile, Tickets: tickets})
	if err != nil {
		t.Fatal(err)
	}
	obs := &counts{failed: map[string]int{}}
	l := NewListener(raw, cfg, timeout, obs, notTLS)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				_, _ = io.Copy(c, c)
				_ = c.Close()
			}()
		}
	}()
	return &server{l: l, obs: obs, addr: raw.Addr().String()}
}

// dialTLS handshakes with s as a client trusting caFile.
func dialTLS(t *testing.T, s *server, o ClientOptions, cfg *tls.Config) (*tls.Conn, error) {
	t.Helper()
	if cfg == nil {
		var err error
		if cfg, err = o.Config(s.addr); err != nil {
			t.Fatal(err)
		}
	}
	nc, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := o.Handshake(nc, cfg, ioTimeout)
	if err != nil {
		_ = nc.Close()
	}
	return tc, err
}

// roundTrip sends msg and expects it back.
func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
		t.Fatalf("echo: %q, %v", got, err)
	}
}

// expectClosed reads from c until the server closes it, within ioTimeout; it returns what was read.
func expectClosed(t *testing.T, c net.Conn) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(ioTimeout))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server did not close the connection within %v", ioTimeout)
	}
	return string(b)
}

func TestHandshakeServesAndCounts(t *testing.T) {
	p := newTestPKI(t)
	s := serve(t, p, p.certFile, true, ioTimeout, nil)
	c, err := dialTLS(t, s, ClientOptions{CAFile: p.caFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := c.ConnectionState().Version; v != tls.VersionTLS13 {
		t.Errorf("version %x, want TLS 1.3", v)
	}
	roundTrip(t, c, "ping") // answered: the server's handshake has ended and been counted
	if n := s.obs.get(func(c *counts) int { return c.handshook }); n != 1 {
		t.Fatalf("handshakes %d, want 1", n)
	}
	_ = c.Close()
	waitFor(t, "the connection's close counted", func() bool { return s.obs.get(func(c *counts) int { return c.closed }) == 1 })
}

// partialHello is a handshake record header announcing 64 bytes, and 8 of them.
var partialHello = []byte{0x16, 0x03, 0x01, 0x00, 0x40, 0x01, 0x00, 0x00, 0x3c, 0x03, 0x03, 0xaa, 0xbb}

func TestStalledHandshakeIsClosedAtItsDeadline(t *testing.T) {
	p := newTestPKI(t)
	const timeout = 300 * time.Millisecond
	s := serve(t, p, p.certFile, true, timeout, nil)
	stall, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stall.Close()
	if _, err := stall.Write(partialHello); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// Another client's handshake is not held up by the stalled one.
	c, err := dialTLS(t, s, ClientOptions{CAFile: p.caFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, "meanwhile")
	_ = c.Close()
	expectClosed(t, stall)
	if d := time.Since(start); d < timeout/2 {
		t.Fatalf("closed after %v, before the %v handshake timeout", d, timeout)
	}
	waitFor(t, "a timeout counted", func() bool { return s.obs.get(func(c *counts) int { return c.failed[ReasonTimeout] }) == 1 })
}

func TestNotTLSIsAnsweredInPlaintext(t *testing.T) {
	p := newTestPKI(t)
	notTLS := func(c net.Conn) {
		_, _ = io.WriteString(c, "speak TLS")
		_ = c.Close()
	}
	s := serve(t, p, p.certFile, true, ioTimeout, notTLS)
	for i, first := range []string{"\x00\x00\x00\x1c\x00\x00\x00\x0a", "GET / HTTP/1.1\r\n\r\n"} {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, first); err != nil {
			t.Fatal(err)
		}
		if got := expectClosed(t, c); got != "speak TLS" {
			t.Fatalf("%q: answer %q", first, got)
		}
		_ = c.Close()
		waitFor(t, "not_tls counted", func() bool { return s.obs.get(func(c *counts) int { return c.failed[ReasonNotTLS] }) == i+1 })
	}
}

func TestClientThatClosesMidHandshake(t *testing.T) {
	p := newTestPKI(t)
	s := serve(t, p, p.certFile, true, ioTimeout, nil)
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(partialHello); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	waitFor(t, "eof counted", func() bool { return s.obs.get(func(c *counts) int { return c.failed[ReasonEOF] }) == 1 })
}

func TestClientErrorsSayWhy(t *testing.T) {
	p := newTestPKI(t)
	good := serve(t, p, p.certFile, true, ioTimeout, nil)
	expired := serve(t, p, p.expiredFile, true, ioTimeout, nil)
	cases := []struct {
		name string
		s    *server
		o    ClientOptions
		want string
	}{
		{"untrusted", good, ClientOptions{CAFile: p.otherCAFile}, "not trusted: it is not signed by a CA of --tls-ca " + p.otherCAFile},
		{"expired", expired, ClientOptions{CAFile: p.caFile}, "certificate has expired or is not yet valid"},
		{"another name", good, ClientOptions{CAFile: p.caFile, ServerName: "other.test"}, `not valid for "other.test" (--tls-server-name)`},
	}
	for _, tc := range cases {
		_, err := dialTLS(t, tc.s, tc.o, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		}
		if perr := tc.o.Probe(tc.s.addr, ioTimeout); perr == nil || perr.Error() != err.Error() {
			t.Errorf("%s: Probe says %v, the handshake %v", tc.name, perr, err)
		}
	}
	// Go's client refuses the certificate with an alert the server can read.
	waitFor(t, "client alerts counted", func() bool { return good.obs.get(func(c *counts) int { return c.failed[ReasonClientAlert] }) == 4 })
	if err := (ClientOptions{CAFile: p.caFile}).Probe(good.addr, ioTimeout); err != nil {
		t.Fatalf("a good server probed: %v", err)
	}
}

func TestResumptionFollowsTickets(t *testing.T) {
	p := newTestPKI(t)
	for _, tickets := range []bool{true, false} {
		s := serve(t, p, p.certFile, tickets, ioTimeout, nil)
		o := ClientOptions{CAFile: p.caFile, Resume: true}
		cfg, err := o.Config(s.addr)
		if err != nil {
			t.Fatal(err)
		}
		first, err := dialTLS(t, s, o, cfg)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, first, "takes the ticket") // TLS 1.3 delivers it after the handshake
		if got := AwaitTicket(cfg, 100*time.Millisecond); got != tickets {
			t.Fatalf("tickets %v: AwaitTicket %v", tickets, got)
		}
		second, err := dialTLS(t, s, o, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if second.ConnectionState().DidResume != tickets {
			t.Fatalf("tickets %v: the second connection resumed: %v", tickets, second.ConnectionState().DidResume)
		}
		// The client's handshake can end before the server's has counted it.
		waitFor(t, "both handshakes counted", func() bool { return s.obs.get(func(c *counts) int { return c.handshook }) == 2 })
		want := map[bool]int{true: 1, false: 0}[tickets]
		if n := s.obs.get(func(c *counts) int { return c.resumed }); n != want {
			t.Fatalf("tickets %v: %d resumed, want %d", tickets, n, want)
		}
		_, _ = first.Close(), second.Close()
	}
}

func TestCloseEndsHandshakesInProgress(t *testing.T) {
	p := newTestPKI(t)
	s := serve(t, p, p.certFile, true, time.Minute, nil)
	var stalled []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(partialHello); err != nil {
			t.Fatal(err)
		}
		stalled = append(stalled, c)
	}
	waitFor(t, "3 handshakes in progress", func() bool {
		s.l.mu.Lock()
		defer s.l.mu.Unlock()
		return len(s.l.pending) == 3
	})
	start := time.Now()
	_ = s.l.Close()
	if d := time.Since(start); d > ioTimeout/2 {
		t.Fatalf("Close took %v", d)
	}
	for _, c := range stalled {
		expectClosed(t, c)
	}
	if n := s.obs.get(func(c *counts) int { return len(c.failed) }); n != 0 {
		t.Fatalf("handshakes ended by Close were counted as failures: %v", s.obs.failed)
	}
	if _, err := s.l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
	}
}
