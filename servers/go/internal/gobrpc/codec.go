// Package gobrpc serves the frame listener's net/rpc service with Go's own
// gob codec (--frame-codec gob): the wire is net/rpc's gob stream, as
// rpc.NewClient speaks it (proto/GOB.md), with the limits, deadlines,
// backpressure and metrics of the frame protocol's codec.
package gobrpc

import (
	"bufio"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"net"
	"net/rpc"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/errs"
	"xferbench/servers/go/internal/frame"
)

// writeBufSize batches a response's header and body messages into one write.
const writeBufSize = 64 << 10

// call is what the codec remembers between reading a request and writing
// its response; net/rpc sees the codec's own sequence number, so a client
// reusing seq values cannot confuse the bookkeeping.
type call struct {
	clientSeq uint64
	method    string
	start     time.Time
}

// ServerCodec is a net/rpc ServerCodec speaking gob on one connection.
type ServerCodec struct {
	cfg     *frame.CodecConfig
	conn    net.Conn
	in      *msgReader
	dec     *gob.Decoder
	enc     *gob.Encoder
	encBuf  *bufio.Writer
	closing *atomic.Bool

	nextID uint64 // read side only

	mu          sync.Mutex
	pending     map[uint64]call
	outstanding int
	stopped     bool
	resume      *sync.Cond

	// net/rpc serialises WriteResponse calls; wmu also covers the
	// connection error written from the reading side.
	wmu     sync.Mutex
	dead    bool
	linger  bool
	closeMu sync.Once
}

// NewServerCodec wraps conn; it has frame.NewCodecFunc's signature.
func NewServerCodec(conn net.Conn, cfg *frame.CodecConfig, closing *atomic.Bool) frame.ConnCodec {
	in := &msgReader{br: bufio.NewReaderSize(conn, 4096), max: uint64(cfg.MaxFrame)}
	w := bufio.NewWriterSize(conn, writeBufSize)
	c := &ServerCodec{
		cfg: cfg, conn: conn, in: in, dec: gob.NewDecoder(in), enc: gob.NewEncoder(w), encBuf: w,
		closing: closing, pending: make(map[uint64]call),
	}
	c.resume = sync.NewCond(&c.mu)
	return c
}

// ReadRequestHeader decodes the next rpc.Request (with any type
// definitions before it). A request that fails here ends the connection:
// the stream can no longer be trusted.
func (c *ServerCodec) ReadRequestHeader(r *rpc.Request) error {
	if err := c.awaitRoom(); err != nil {
		return err
	}
	if err := c.awaitRequest(); err != nil {
		return err
	}
	if err := c.dec.Decode(r); err != nil {
		if errors.Is(err, io.EOF) && c.in.left == 0 {
			return io.EOF // the client closed between requests
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return c.connError(errs.New(errs.InvalidArgument, "request not received whole within %v (--read-timeout)", c.cfg.ReadTimeout))
		}
		return c.connError(errs.New(errs.InvalidArgument, "bad gob request header: %v", err))
	}
	c.nextID++
	c.mu.Lock()
	c.pending[c.nextID] = call{clientSeq: r.Seq, method: r.ServiceMethod, start: time.Now()}
	c.outstanding++
	c.mu.Unlock()
	r.Seq = c.nextID
	if c.cfg.Observer != nil {
		c.cfg.Observer.Started()
	}
	return nil
}

// awaitRequest waits with no deadline for the first byte of a request,
// then gives the whole request (header and body) ReadTimeout.
func (c *ServerCodec) awaitRequest() error {
	if c.in.left == 0 && c.in.br.Buffered() == 0 {
		if err := c.conn.SetReadDeadline(time.Time{}); err != nil {
			return err
		}
		// Checked after clearing the deadline: Shutdown sets the flag, then
		// a past deadline, so one of the two always stops this wait.
		if c.closing.Load() {
			return io.EOF
		}
		if _, err := c.in.br.Peek(1); err != nil {
			if c.closing.Load() || errors.Is(err, io.EOF) {
				return io.EOF
			}
			return err
		}
	}
	if c.closing.Load() {
		return io.EOF
	}
	return c.conn.SetReadDeadline(time.Now().Add(c.cfg.ReadTimeout))
}

// ReadRequestBody decodes the body into x, or discards it when x is nil.
// A body of the wrong type is a call error (the stream stays in step, gob
// messages being counted); a broken stream fails the next header read.
func (c *ServerCodec) ReadRequestBody(x any) error {
	if err := c.dec.Decode(x); err != nil {
		if c.in.err != nil {
			return c.in.err
		}
		return errs.New(errs.InvalidArgument, "malformed %T body: %v", x, err)
	}
	return nil
}

// WriteResponse encodes rpc.Response and the reply, then releases the
// reply's pooled buffers and records the call.
func (c *ServerCodec) WriteResponse(r *rpc.Response, reply any) error {
	c.mu.Lock()
	cl, ok := c.pending[r.Seq]
	delete(c.pending, r.Seq)
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("response for unknown call %d", r.Seq)
	}
	defer c.release()
	errStr := r.Error
	if strings.HasPrefix(errStr, "rpc: ") {
		errStr = errs.New(errs.Unimplemented, "unknown method %q", cl.method).Error()
	}
	err := c.write(&rpc.Response{ServiceMethod: r.ServiceMethod, Seq: cl.clientSeq, Error: errStr}, wireReply(reply, errStr))
	if errStr == "" && c.cfg.OnWritten != nil {
		c.cfg.OnWritten(reply)
	}
	if c.cfg.Observer != nil {
		c.cfg.Observer.Done(frame.MethodLabel(cl.method), errs.CodeOfString(errStr), time.Since(cl.start))
	}
	return err
}

// wireReply is what goes on the wire after the response header: an empty
// struct for an error (as net/rpc does) and for a reply with no exported
// fields, which gob refuses to encode (UploadAbortResponse).
func wireReply(reply any, errStr string) any {
	if _, empty := reply.(*xferv1.UploadAbortResponse); empty || errStr != "" {
		return struct{}{}
	}
	return reply
}

func (c *ServerCodec) write(resp *rpc.Response, body any) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.dead {
		return errors.New("connection already failed: response dropped")
	}
	if err := c.conn.SetWriteDeadline(time.Now().Add(c.cfg.WriteTimeout)); err != nil {
		return err
	}
	err := c.enc.Encode(resp)
	if err == nil {
		err = c.enc.Encode(body)
	}
	if err == nil {
		err = c.encBuf.Flush()
	}
	if err != nil {
		// A half-written response leaves the stream unusable.
		c.dead = true
		_ = c.conn.Close()
		c.stop()
		return fmt.Errorf("writing a response: %w", err)
	}
	return nil
}

// connError sends a response with seq 0 carrying err (net/rpc clients
// skip it; a person reading the stream sees why) and returns err, which
// ends net/rpc's read loop.
func (c *ServerCodec) connError(err error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.dead {
		return err
	}
	c.dead = true
	if werr := writeConnError(c.conn, c.enc, c.encBuf, c.cfg.WriteTimeout, err.Error()); werr == nil {
		c.linger = true
	}
	return err
}

// WriteConnError writes a seq-0 response carrying msg on a fresh gob
// stream: what a connection over --max-conns gets before it is closed.
func WriteConnError(conn net.Conn, timeout time.Duration, msg string) error {
	w := bufio.NewWriter(conn)
	return writeConnError(conn, gob.NewEncoder(w), w, timeout, msg)
}

func writeConnError(conn net.Conn, enc *gob.Encoder, w *bufio.Writer, timeout time.Duration, msg string) error {
	if err := conn.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if err := enc.Encode(&rpc.Response{Error: msg}); err != nil {
		return err
	}
	if err := enc.Encode(struct{}{}); err != nil {
		return err
	}
	return w.Flush()
}

// awaitRoom blocks reading while MaxConnCalls calls are outstanding:
// net/rpc starts a goroutine per request, so this bounds them too.
func (c *ServerCodec) awaitRoom() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for !c.stopped && !c.closing.Load() && c.cfg.MaxConnCalls > 0 && c.outstanding >= c.cfg.MaxConnCalls {
		c.resume.Wait()
	}
	if c.stopped || c.closing.Load() {
		return io.EOF
	}
	return nil
}

func (c *ServerCodec) release() {
	c.mu.Lock()
	c.outstanding--
	c.mu.Unlock()
	c.resume.Signal()
}

func (c *ServerCodec) stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.resume.Broadcast()
}

// Close closes the connection once; after a connection error it first
// drains what the client still sends, within bounds, so the client is not
// reset before reading the error.
func (c *ServerCodec) Close() error {
	var err error
	c.stop()
	c.closeMu.Do(func() {
		if c.linger {
			frame.LingerClose(c.conn)
			return
		}
		err = c.conn.Close()
	})
	return err
}

// Interrupt makes a codec blocked between requests return (shutdown).
func (c *ServerCodec) Interrupt() {
	_ = c.conn.SetReadDeadline(time.Now()) // a closed conn is already interrupted
	c.stop()
}
