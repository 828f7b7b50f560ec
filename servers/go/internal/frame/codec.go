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

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/bufpool"
	"xferbench/servers/go/internal/errs"
	"xferbench/servers/go/internal/meta"
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
	// firstFrameBuf is the most a frame buffer starts with; it doubles as
	// bytes arrive, so a length prefix alone never costs --max-frame, and
	// takes the frame's whole size once 1/exactFraction of it arrived, so a
	// stalled frame costs at most exactFraction times what was sent while a
	// 1 MiB chunk is copied once (64 KiB), not at every doubling.
	firstFrameBuf = 64 << 10
	exactFraction = 16
	// replyOverhead is what a response adds to its body (prefix, header).
	replyOverhead = 512
)

// errConnDead is what writing a response returns after a connection error
// or a failed write: the answer is dropped, as the protocol requires.
var errConnDead = errors.New("connection already failed: response dropped")

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
	// MaxConnCalls and MaxConnUnsent bound one connection's outstanding
	// calls and the response bytes they are expected to produce; at either
	// bound the codec stops reading (PROTOCOL.md "Backpressure"). 0: none.
	MaxConnCalls  int
	MaxConnUnsent uint64
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
	reserved  uint64  // response bytes counted against MaxConnUnsent
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
	// Backpressure, under mu: calls from parse until their response is
	// written, the bytes reserved for those responses, and whether the
	// connection stopped (shutdown, close) so a waiting reader gives up.
	outstanding int
	unsent      uint64
	stopped     bool
	resume      *sync.Cond

	wmu     sync.Mutex // one response at a time on the wire, seq=0 included
	dead    bool       // under wmu: a connection error went out, nothing may follow
	linger  bool       // a connection error was sent: drain before closing
	closeMu sync.Once
}

// NewServerCodec wraps conn. closing, once set, makes the codec stop at the
// next frame boundary (graceful shutdown).
func NewServerCodec(conn net.Conn, cfg *CodecConfig, closing *atomic.Bool) *ServerCodec {
	c := &ServerCodec{
		cfg:     cfg,
		conn:    conn,
		br:      bufio.NewReaderSize(conn, readBufSize),
		closing: closing,
		pending: make(map[uint64]call),
	}
	c.resume = sync.NewCond(&c.mu)
	return c
}

// ReadRequestHeader reads one whole frame and decodes its header.
func (c *ServerCodec) ReadRequestHeader(r *rpc.Request) error {
	if err := c.awaitRoom(); err != nil {
		return err
	}
	if err := c.awaitFrame(); err != nil {
		return err
	}
	frameLen, headerLen, err := c.readLengths()
	if err != nil {
		return err
	}
	buf, err := c.readFrame(int(frameLen - lenSize))
	if err != nil {
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
	c.outstanding++
	c.mu.Unlock()
	r.ServiceMethod, r.Seq = method, c.nextID
	if c.cfg.Observer != nil {
		c.cfg.Observer.Started()
	}
	return nil
}

// readFrame reads the n bytes after frame_len into a buffer that starts
// small and grows as bytes arrive (firstFrameBuf, exactFraction).
func (c *ServerCodec) readFrame(n int) (*[]byte, error) {
	size := min(n, firstFrameBuf)
	buf := c.cfg.Pool.Get(size)
	got := 0
	for {
		k, err := io.ReadFull(c.br, (*buf)[got:size])
		got += k
		if err != nil {
			c.cfg.Pool.Put(buf)
			return nil, err
		}
		if size == n {
			return buf, nil
		}
		next := min(2*size, n)
		if got >= n/exactFraction {
			next = n
		}
		nb := c.cfg.Pool.Get(next)
		copy(*nb, (*buf)[:got])
		c.cfg.Pool.Put(buf)
		buf, size = nb, next
	}
}

// awaitRoom blocks reading while the connection is at its backpressure
// bounds; net/rpc starts a goroutine per call read, so this also bounds
// the goroutines (and their memory) one connection can hold.
func (c *ServerCodec) awaitRoom() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for !c.stopped && !c.closing.Load() && c.full() {
		c.resume.Wait()
	}
	if c.stopped || c.closing.Load() {
		return io.EOF
	}
	return nil
}

func (c *ServerCodec) full() bool {
	return (c.cfg.MaxConnCalls > 0 && c.outstanding >= c.cfg.MaxConnCalls) ||
		(c.cfg.MaxConnUnsent > 0 && c.unsent >= c.cfg.MaxConnUnsent)
}

// reserve counts a call's expected response size against MaxConnUnsent
// as soon as its body says how large the answer will be.
func (c *ServerCodec) reserve(n uint64) {
	c.mu.Lock()
	if cl, ok := c.pending[c.nextID]; ok {
		cl.reserved += n
		c.pending[c.nextID] = cl
		c.unsent += n
	}
	c.mu.Unlock()
}

// release ends a call's backpressure accounting once its response is
// written (or dropped) and lets a waiting reader go on.
func (c *ServerCodec) release(reserved uint64) {
	c.mu.Lock()
	c.outstanding--
	c.unsent -= reserved
	c.mu.Unlock()
	c.resume.Signal()
}

// stop wakes a reader waiting for room: the connection is going away.
func (c *ServerCodec) stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.resume.Broadcast()
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
	if _, isMeta := x.(*xferv1.MetaRequest); isMeta && err != nil {
		return errs.New(errs.InvalidArgument, "%s", meta.MalformedMessage(err))
	}
	if err != nil {
		return errs.New(errs.InvalidArgument, "malformed %s body", typeName(x))
	}
	c.reserve(replySize(x, len(body)))
	return nil
}

// replySize is what a request's answer will occupy at most, known from the
// request alone: Read and Echo carry data back, Meta about its request
// body again, the rest a few fields.
func replySize(x any, bodyLen int) uint64 {
	switch m := x.(type) {
	case *xferv1.ReadRequest:
		return uint64(m.GetLength()) + replyOverhead
	case *xferv1.EchoRequest:
		return uint64(len(m.GetPayload())) + replyOverhead
	case *xferv1.MetaRequest:
		return uint64(bodyLen) + replyOverhead
	}
	return replyOverhead
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
	defer c.release(cl.reserved)
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
		err = c.write(out)
		c.cfg.Pool.Put(out.buf)
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

// response is one encoded response frame: buf (pooled) holds all of it, or,
// for a Read reply whose data is at least inPlaceMin bytes, all but the
// data, which is written from where the handler left it (a pooled buffer or
// the memory store itself) between buf[:split] and buf[split:].
type response struct {
	buf   *[]byte
	data  []byte
	split int
}

// inPlaceMin is the Read reply size from which writing its data from where
// it lies (one more iovec) beats copying it into the frame.
const inPlaceMin = 16 << 10

// encodeResponse builds a response frame. Its bytes are those of the
// deterministic encoding either way: a ReadResponse is data (field 1), then
// size and crc32, so its data splits the frame in two.
func (c *ServerCodec) encodeResponse(seq uint64, method, errStr string, msg proto.Message) (response, error) {
	opts := proto.MarshalOptions{Deterministic: true}
	var data []byte
	if r, ok := msg.(*xferv1.ReadResponse); ok && len(r.Data) >= inPlaceMin {
		data, msg = r.Data, &xferv1.ReadResponse{Size: r.Size, Crc32: r.Crc32}
	}
	dataHead := 0
	if data != nil {
		dataHead = protowire.SizeTag(readDataField) + protowire.SizeVarint(uint64(len(data)))
	}
	rest := 0
	if msg != nil {
		rest = opts.Size(msg)
	}
	hl := headerSize(method, seq, errStr)
	out := c.cfg.Pool.Get(prefixLen + hl + dataHead + rest)
	b := appendPrefix((*out)[:0], hl, dataHead+len(data)+rest)
	b = appendHeader(b, method, seq, errStr)
	if data != nil {
		b = protowire.AppendTag(b, readDataField, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(len(data)))
	}
	split := len(b)
	if msg != nil {
		var err error
		if b, err = opts.MarshalAppend(b, msg); err != nil {
			c.cfg.Pool.Put(out)
			return response{}, fmt.Errorf("encoding %s reply: %w", typeName(msg), err)
		}
	}
	*out = b
	return response{buf: out, data: data, split: split}, nil
}

// readDataField is `bytes data = 1` in ReadResponse (proto/xfer/v1/frame.proto).
const readDataField = 1

func (c *ServerCodec) write(r response) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.dead {
		return errConnDead
	}
	if err := c.conn.SetWriteDeadline(time.Now().Add(c.cfg.WriteTimeout)); err != nil {
		return err
	}
	b := *r.buf
	n := len(b) + len(r.data)
	var err error
	if r.data == nil {
		_, err = c.conn.Write(b)
	} else {
		bufs := net.Buffers{b[:r.split], r.data, b[r.split:]}
		_, err = bufs.WriteTo(c.conn) // one writev on a TCP connection
	}
	if err != nil {
		// A half-written frame leaves the stream unusable: drop the
		// connection so the reader stops too.
		c.dead = true
		_ = c.conn.Close()
		c.stop()
		return fmt.Errorf("writing a %d-byte response: %w", n, err)
	}
	return nil
}

// connError sends the seq=0 response that fails the whole connection and
// returns err, which ends net/rpc's read loop (it then closes the codec).
func (c *ServerCodec) connError(err error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.dead {
		return err
	}
	// Answers of calls still running are never written after this.
	c.dead = true
	if werr := WriteConnError(c.conn, nil, c.cfg.WriteTimeout, err.Error()); werr != nil {
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
	c.stop()
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
	c.stop()
}
