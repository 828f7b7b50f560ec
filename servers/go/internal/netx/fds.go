package netx

import (
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

const (
	// fdHeadroom is kept out of --max-conns auto for the store, the
	// listeners and the metrics endpoint (PROTOCOL.md "Descriptors").
	fdHeadroom = 64
	// maxAutoConns caps --max-conns auto.
	maxAutoConns = 65536
	// noFDPause is how long accepting stops when even the spare descriptor
	// cannot make room: the listener stays readable, so retrying at once
	// would spin.
	noFDPause = 100 * time.Millisecond
	// shedLinger bounds how long a connection refused for lack of
	// descriptors is drained: it holds the spare meanwhile.
	shedLinger = 10 * time.Millisecond
)

// RaiseNoFile lifts the soft RLIMIT_NOFILE to the hard limit and returns the
// soft limit now in force.
func RaiseNoFile() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	if rl.Cur < rl.Max {
		raised := syscall.Rlimit{Cur: rl.Max, Max: rl.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err == nil {
			rl = raised
		}
	}
	return rl.Cur, nil
}

// AutoMaxConns is --max-conns auto: the soft descriptor limit, less the
// headroom, split evenly between the connection listeners.
func AutoMaxConns(soft uint64, listeners int) int {
	if soft <= fdHeadroom || listeners < 1 {
		return 1
	}
	return int(min((soft-fdHeadroom)/uint64(listeners), maxAutoConns))
}

func isNoFDs(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// spare is one descriptor held in reserve, shared by every listener of the
// process: released, it lets accept take a waiting connection so the client
// is told and closed instead of left hanging in the backlog (the technique
// of libev's and nginx's accept loops).
var spare struct {
	mu sync.Mutex
	f  *os.File
}

// ReserveSpare opens the spare descriptor; call once at start.
func ReserveSpare() error {
	spare.mu.Lock()
	defer spare.mu.Unlock()
	if spare.f != nil {
		return nil
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	spare.f = f
	return nil
}

// shed handles an accept that failed for lack of descriptors: with the
// spare released it accepts one waiting connection, hands it to refuse and
// closes it, then takes the spare again. Without a spare, or if accept still
// fails, it pauses instead, so the caller never spins.
func shed(ln net.Listener, refuse func(net.Conn)) {
	spare.mu.Lock()
	defer spare.mu.Unlock()
	if spare.f == nil {
		time.Sleep(noFDPause)
		return
	}
	_ = spare.f.Close() // the descriptor is what we want back; nothing was written
	spare.f = nil
	c, err := ln.Accept()
	if err == nil {
		refuse(c)
		lingerClose(c)
	}
	if f, ferr := os.Open(os.DevNull); ferr == nil {
		spare.f = f
	}
	if err != nil || spare.f == nil {
		time.Sleep(noFDPause)
	}
}

// lingerClose half-closes, drops what already arrived and closes, so the
// refusal is read rather than destroyed by a reset.
func lingerClose(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite() // best effort: the close below happens anyway
	}
	if err := c.SetReadDeadline(time.Now().Add(shedLinger)); err == nil {
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				break
			}
		}
	}
	_ = c.Close() // the client is being dropped; there is nobody to tell
}
