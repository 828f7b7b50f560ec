package frame

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
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/bufpool"
	"xferbench/servers/go/internal/errs"
	"xferbench/servers/go/internal/wirecheck"
)

const (
	// readBufSize is the per-connection bufio buffer: small frames that
	// arrive together are read with one syscall; large bodies bypass it.
	readBufSize = 4096
	// lingerTimeout and lingerMaxBytes bound how long and how much a
	// connection that got a connection error is drained before closing, so
	// the client reads the error instead of a reset.
	lingerTimeout  = time.Second
	lingerMaxBytes = 16 << 20
)

// Observer receives per-call figures; nil means none.
type Observer interface {
	Started()
	Done(method string, code errs.Code, d time.Duration)
}

// CodecConfig is shared by every connection of one server.
type CodecConfig struct {
	MaxFrame     uint32
	ReadTimeout  time.Duration // for the rest of a frame once its first byte came
	WriteTimeout time.Duration // for writing one response
	Pool         *bufpool.Pool
	Observer     Observer
	// OnWritten runs after a successful call's reply was encoded, so the
	// service can release buffers the reply referred to.
	OnWritten func(reply any)
}

// call is what the codec remembers between reading a request and writing
// its response. net/rpc sees the codec's own sequence number, so clients
// may reuse seq values without confusing the bookkeeping.
type call struct {
	clientSeq uint64
	method    string
	methodErr *errs.Error // the header's call error; net/rpc finds no such method and answers with it
	start     time.Time
	buf       *[]byte // the request frame; bodies may alias it
}

// ServerCodec is a net/rpc ServerCodec for one connection.
type ServerCodec struct {
	cfg     *CodecConfig
	conn    net.Conn
	br      *bufio.Reader
	closing *atomic.Bool
	lenBuf  [prefixLen]byte

	// Read side: used only by net/rpc's reading goroutine.
	nextID uint64
	body   []byte

	mu      sync.Mutex
	pending map[uint64]call

	wmu     sync.Mutex // one response at a time on the wire, seq=0 included
	linger  bool       // a connection error was sent: drain before closing
	closeMu sync.Once
}

// NewServerCodec wraps conn. closing, once set, makes the codec stop at the
// next frame boundary (graceful shutdown).
func NewServerCodec(conn net.Conn, cfg *CodecConfig, closing *atomic.Bool) *ServerCodec {
	return &ServerCodec{
		cfg:     cfg,
		conn:    conn,
		br:      bufio.NewReaderSize(conn, readBufSize),
		closing: closing,
		pending: make(map[uint64]call),
	}
}

// ReadRequestHeader reads one whole frame and decodes its header.
func (c *ServerCodec) ReadRequestHeader(r *rpc.Request) error {
	if err := c.awaitFrame(); err != nil {
		return err
	}
	frameLen, headerLen, err := c.readLengths()
	if err != nil {
		return err
	}
	buf := c.cfg.Pool.Get(int(frameLen - lenSize))
	if _, err := io.ReadFull(c.br, *buf); err != nil {
		c.cfg.Pool.Put(buf)
		return fmt.Errorf("reading a %d-byte frame: %w", frameLen, err)
	}
	method, seq, err := DecodeRequestHeader((*buf)[:headerLen])
	if err != nil {
		c.cfg.Pool.Put(buf)
		return c.connError(err)
	}
	c.nextID++
	c.body = (*buf)[headerLen:]
	c.mu.Lock()
	c.pending[c.nextID] = call{clientSeq: seq, method: method, methodErr: CheckMethod(method), start: time.Now(), buf: buf}
	c.mu.Unlock()
	r.ServiceMethod, r.Seq = method, c.nextID
	if c.cfg.Observer != nil {
		c.cfg.Observer.Started()
	}
	return nil
}

// awaitFrame waits, with no deadline, for the first byte of the next frame,
// then gives the rest of the frame ReadTimeout.
func (c *ServerCodec) awaitFrame() error {
	if c.br.Buffered() == 0 {
		if err := c.conn.SetReadDeadline(time.Time{}); err != nil {
			return err
		}
		// Checked after clearing the deadline: Shutdown sets the flag, then
		// a past deadline, so one of the two always stops this wait.
		if c.closing.Load() {
			return io.EOF
		}
		if _, err := c.br.Peek(1); err != nil {
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

// readLengths reads and checks frame_len, then header_len, each as soon as
// it arrives, so an oversized frame is refused before its body is read.
func (c *ServerCodec) readLengths() (frameLen, headerLen uint32, err error) {
	if _, err := io.ReadFull(c.br, c.lenBuf[:lenSize]); err != nil {
		return 0, 0, fmt.Errorf("reading frame length: %w", err)
	}
	frameLen = binary.BigEndian.Uint32(c.lenBuf[:lenSize])
	if err := CheckFrameLen(frameLen, c.cfg.MaxFrame); err != nil {
		return 0, 0, c.connError(err)
	}
	if _, err := io.ReadFull(c.br, c.lenBuf[lenSize:]); err != nil {
		return 0, 0, fmt.Errorf("reading header length: %w", err)
	}
	headerLen = binary.BigEndian.Uint32(c.lenBuf[lenSize:])
	if err := CheckHeaderLen(frameLen, headerLen); err != nil {
		return 0, 0, c.connError(err)
	}
	return frameLen, headerLen, nil
}

// ReadRequestBody decodes the body into x, or discards it when x is nil.
// A body that does not decode is a call error: net/rpc answers the call
// with this error's text and keeps reading the connection.
func (c *ServerCodec) ReadRequestBody(x any) error {
	body := c.body
	c.body = nil
	if x == nil {
		return nil // the frame buffer goes back with the response
	}
	var err error
	switch m := x.(type) {
	case *xferv1.UploadChunkRequest:
		err = decodeUploadChunk(body, m)
	case *xferv1.EchoRequest:
		err = decodeEcho(body, m)
	case proto.Message: // the two above have no 32-bit fields to check
		err = wirecheck.Unmarshal(body, m)
	default:
		return errs.New(errs.Internal, "request type %T is not a protobuf message", x)
	}
	if err != nil {
		return errs.New(errs.InvalidArgument, "malformed %s body", typeName(x))
	}
	return nil
}

func typeName(x any) string {
	if m, ok := x.(proto.Message); ok {
		return string(m.ProtoReflect().Descriptor().Name())
	}
	return fmt.Sprintf("%T", x)
}

// WriteResponse encodes and sends one response, then releases the request
// frame (bodies alias it) and the reply's buffers.
func (c *ServerCodec) WriteResponse(r *rpc.Response, reply any) error {
	c.mu.Lock()
	cl, ok := c.pending[r.Seq]
	delete(c.pending, r.Seq)
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("response for unknown call %d", r.Seq)
	}
	errStr := rewriteRPCError(r.Error, cl.method)
	if cl.methodErr != nil {
		errStr = cl.methodErr.Error()
	}
	var msg proto.Message
	if errStr == "" {
		m, isMsg := reply.(proto.Message)
		if !isMsg {
			errStr = errs.New(errs.Internal, "reply type %T is not a protobuf message", reply).Error()
		}
		msg = m
	}
	out, err := c.encodeResponse(cl.clientSeq, EchoMethod(cl.method), errStr, msg)
	if err == nil {
		err = c.write(*out)
		c.cfg.Pool.Put(out)
	}
	c.cfg.Pool.Put(cl.buf)
	if errStr == "" && c.cfg.OnWritten != nil {
		c.cfg.OnWritten(reply)
	}
	if c.cfg.Observer != nil {
		c.cfg.Observer.Done(MethodLabel(cl.method), errs.CodeOfString(errStr), time.Since(cl.start))
	}
	return err
}

// rewriteRPCError turns net/rpc's own errors (unknown service or method,
// ill-formed name) into the protocol's unimplemented error.
func rewriteRPCError(e, method string) string {
	if strings.HasPrefix(e, "rpc: ") {
		return errs.New(errs.Unimplemented, "unknown method %q", method).Error()
	}
	return e
}

// encodeResponse builds a whole response frame in a pooled buffer.
func (c *ServerCodec) encodeResponse(seq uint64, method, errStr string, msg proto.Message) (*[]byte, error) {
	opts := proto.MarshalOptions{Deterministic: true}
	bodyLen := 0
	if msg != nil {
		bodyLen = opts.Size(msg)
	}
	hl := headerSize(method, seq, errStr)
	out := c.cfg.Pool.Get(prefixLen + hl + bodyLen)
	b := appendPrefix((*out)[:0], hl, bodyLen)
	b = appendHeader(b, method, seq, errStr)
	if msg != nil {
		var err error
		if b, err = opts.MarshalAppend(b, msg); err != nil {
			c.cfg.Pool.Put(out)
			return nil, fmt.Errorf("encoding %s reply: %w", typeName(msg), err)
		}
	}
	*out = b
	return out, nil
}

func (c *ServerCodec) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.conn.SetWriteDeadline(time.Now().Add(c.cfg.WriteTimeout)); err != nil {
		return err
	}
	if _, err := c.conn.Write(b); err != nil {
		// A half-written frame leaves the stream unusable: drop the
		// connection so the reader stops too.
		_ = c.conn.Close()
		return fmt.Errorf("writing a %d-byte response: %w", len(b), err)
	}
	return nil
}

// connError sends the seq=0 response that fails the whole connection and
// returns err, which ends net/rpc's read loop (it then closes the codec).
func (c *ServerCodec) connError(err error) error {
	if werr := WriteConnError(c.conn, &c.wmu, c.cfg.WriteTimeout, err.Error()); werr != nil {
		return fmt.Errorf("%v (and sending it failed: %v)", err, werr)
	}
	c.linger = true
	return err
}

// WriteConnError writes one seq=0 response carrying msg; mu, when not nil,
// serialises it with other writers of the connection.
func WriteConnError(conn net.Conn, mu *sync.Mutex, timeout time.Duration, msg string) error {
	if mu != nil {
		mu.Lock()
		defer mu.Unlock()
	}
	if err := conn.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	_, err := conn.Write(AppendResponse(nil, 0, "", msg, nil))
	return err
}

// Close closes the connection once; after a connection error it first
// drains what the client still sends, within bounds.
func (c *ServerCodec) Close() error {
	var err error
	c.closeMu.Do(func() {
		if c.linger {
			LingerClose(c.conn)
			return
		}
		err = c.conn.Close()
	})
	return err
}

// LingerClose half-closes conn, reads and drops what the peer still sends
// (at most lingerMaxBytes, for at most lingerTimeout), then closes. Closing
// with unread input would make the kernel send a reset, which can destroy
// the error response before the client reads it.
func LingerClose(conn net.Conn) {
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite() // best effort: the full close below still happens
	}
	if err := conn.SetReadDeadline(time.Now().Add(lingerTimeout)); err == nil {
		_, _ = io.CopyN(io.Discard, conn, lingerMaxBytes) // ends at EOF, deadline or bound
	}
	_ = conn.Close() // nothing more to report to a client we are dropping
}

// Interrupt makes a codec blocked between frames return (shutdown).
func (c *ServerCodec) Interrupt() {
	_ = c.conn.SetReadDeadline(time.Now()) // a closed conn is already interrupted
}
