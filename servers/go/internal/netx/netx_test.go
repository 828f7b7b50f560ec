package netx

import (
	"net"
	"testing"
	"time"
)

func TestLimit(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rejected := make(chan struct{}, 4)
	lim := NewLimiter(1, nil, nil)
	l := Wrap(ln, lim, func(c net.Conn) {
		c.Close()
		rejected <- struct{}{}
	})
	defer l.Close()
	c1, _ := net.Dial("tcp", ln.Addr().String())
	defer c1.Close()
	s1, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := net.Dial("tcp", ln.Addr().String())
	defer c2.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			accepted <- c
		}
	}()
	select {
	case <-rejected:
	case <-time.After(5 * time.Second):
		t.Fatal("second connection not rejected")
	}
	s1.Close()
	s1.Close() // double close gives the budget back once
	c3, _ := net.Dial("tcp", ln.Addr().String())
	defer c3.Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("budget not returned")
	}
	if lim.open.Load() != 0 {
		t.Fatalf("open = %d", lim.open.Load())
	}
}

func TestAutoMaxConns(t *testing.T) {
	for _, c := range []struct {
		soft      uint64
		listeners int
		want      int
	}{{1024, 2, 480}, {1024, 1, 960}, {10, 2, 1}, {1 << 30, 1, 65536}} {
		if got := AutoMaxConns(c.soft, c.listeners); got != c.want {
			t.Errorf("AutoMaxConns(%d, %d) = %d, want %d", c.soft, c.listeners, got, c.want)
		}
	}
}
