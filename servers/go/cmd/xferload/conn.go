package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/rpc"
	"strings"
	"sync"
	"time"

	"xferbench/servers/go/internal/frame"
	"xferbench/servers/go/internal/limits"
)

// conn is one pipelined frame connection: any number of goroutines call
// concurrently; requests are written whole under a lock and one reader
// goroutine hands each answer to its caller by sequence number.
type conn struct {
	nc       net.Conn
	maxFrame uint32
	// gob, when set, is the connection's net/rpc client (--codec gob): calls
	// go through gobCall and the frame fields below are unused.
	gob *rpc.Client

	wmu sync.Mutex // one request at a time on the wire
	mu  sync.Mutex
	seq uint64
	// pending are the calls sent and not answered; failed is set once the
	// connection is lost, and every later call fails at once with it.
	pending map[uint64]*slot
	failed  error
	reader  chan struct{} // closed when the reader goroutine has returned
}

// slot is one caller's call: the reader fills buf with the answer's body.
type slot struct {
	buf    []byte
	errStr string
	err    error
	done   chan struct{}
}

// errConn is the prefix of every connection failure; the run counts them
// under the code "connection".
var errConn = errors.New("connection failed")

// handshakeTimeout bounds a TLS handshake, as the servers bound theirs.
const handshakeTimeout = 10 * time.Second

func dial(cfg *Config) (*conn, error) {
	addr, maxBody, codec := cfg.Addr, max(cfg.Chunk, cfg.Size), cfg.Codec
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if cfg.TLS != nil {
		tc, err := cfg.TLS.Handshake(nc, cfg.tlsConfig, handshakeTimeout)
		if err != nil {
			_ = nc.Close() // the handshake failed; its error says why
			return nil, err
		}
		nc = tc
	}
	if codec == codecGob {
		return dialGob(nc), nil
	}
	// Responses carry up to one chunk plus a small header; the servers' own
	// frame limit is the floor.
	maxFrame := uint32(max(uint64(limits.DefaultMaxFrame), maxBody+64<<10))
	c := &conn{nc: nc, maxFrame: maxFrame, pending: make(map[uint64]*slot), reader: make(chan struct{})}
	go c.readLoop()
	return c, nil
}

// close ends the connection and waits for the reader to fail what is left.
func (c *conn) close() {
	_ = c.nc.Close()
	<-c.reader
}

// call sends method with its body (in pieces, written with one writev and
// never copied) and waits for the answer, whose body is read into *buf
// (grown as needed). errStr is the server's call error, err a lost
// connection.
func (c *conn) call(method string, body net.Buffers, buf *[]byte) (resp []byte, errStr string, err error) {
	s := &slot{buf: *buf, done: make(chan struct{})}
	c.mu.Lock()
	if c.failed != nil {
		c.mu.Unlock()
		return nil, "", c.failed
	}
	c.seq++
	seq := c.seq
	c.pending[seq] = s
	c.mu.Unlock()

	if err := c.send(seq, method, body); err != nil {
		c.fail(fmt.Errorf("%w: writing a request: %v", errConn, err))
	}
	<-s.done
	*buf = s.buf
	return s.buf, s.errStr, s.err
}

// send writes one request frame: the encoded header from internal/frame,
// with frame_len covering the body that follows it as separate buffers.
func (c *conn) send(seq uint64, method string, body net.Buffers) error {
	n := 0
	for _, b := range body {
		n += len(b)
	}
	var hdr [64]byte
	h := frame.AppendRequest(hdr[:0], seq, method, nil)
	// frame_len (the first 4 bytes, PROTOCOL.md "Frames") counts the body too.
	binary.BigEndian.PutUint32(h, binary.BigEndian.Uint32(h)+uint32(n))
	bufs := append(net.Buffers{h}, body...)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := bufs.WriteTo(c.nc)
	return err
}

// fail ends the connection with err: every pending call and every later
// one gets it.
func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.failed == nil {
		c.failed = err
	}
	for seq, s := range c.pending {
		s.err = c.failed
		close(s.done)
		delete(c.pending, seq)
	}
	c.mu.Unlock()
	_ = c.nc.Close()
}

func (c *conn) readLoop() {
	defer close(c.reader)
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var prefix [8]byte
	hdr := make([]byte, limits.MaxHeader)
	for {
		if err := c.readOne(br, prefix[:], hdr); err != nil {
			if errors.Is(err, net.ErrClosed) {
				err = errors.New("closed by the driver")
			}
			c.fail(fmt.Errorf("%w: %v", errConn, err))
			return
		}
	}
}

// readOne reads one response frame and completes its call.
func (c *conn) readOne(br *bufio.Reader, prefix, hdr []byte) error {
	if _, err := io.ReadFull(br, prefix); err != nil {
		return err
	}
	frameLen := binary.BigEndian.Uint32(prefix)
	if err := frame.CheckFrameLen(frameLen, c.maxFrame); err != nil {
		return fmt.Errorf("bad response frame: %v", err)
	}
	headerLen := binary.BigEndian.Uint32(prefix[4:])
	if err := frame.CheckHeaderLen(frameLen, headerLen); err != nil {
		return fmt.Errorf("bad response frame: %v", err)
	}
	if _, err := io.ReadFull(br, hdr[:headerLen]); err != nil {
		return err
	}
	_, seq, errStr, err := frame.DecodeResponseHeader(hdr[:headerLen])
	if err != nil {
		return fmt.Errorf("bad response header: %v", err)
	}
	if seq == 0 {
		return fmt.Errorf("server connection error: %s", errStr)
	}
	c.mu.Lock()
	s := c.pending[seq]
	delete(c.pending, seq)
	c.mu.Unlock()
	if s == nil {
		return fmt.Errorf("answer to seq %d, which no call is waiting for", seq)
	}
	bodyLen := int(frameLen - 4 - headerLen)
	if cap(s.buf) < bodyLen {
		s.buf = make([]byte, bodyLen)
	}
	s.buf = s.buf[:bodyLen]
	_, err = io.ReadFull(br, s.buf)
	s.errStr, s.err = errStr, err
	close(s.done)
	return err
}

// errCode is the code of a server error string "<code>: <message>".
func errCode(errStr string) string {
	code, _, _ := strings.Cut(errStr, ":")
	return code
}
