package frame

import (
	"bufio"
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"net"
	"net/rpc"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/bufpool"
	"xferbench/servers/go/internal/limits"
	"xferbench/servers/go/internal/rpcsvc"
	"xferbench/servers/go/internal/store"
)

type nopBytes struct{}

func (nopBytes) Upload(int)   {}
func (nopBytes) Download(int) {}

// testServer serves the real Xfer service on loopback.
func testServer(t *testing.T, maxFrame uint32) (string, *bufpool.Leases) {
	t.Helper()
	lim := limits.Defaults()
	st := store.NewMem(lim)
	pool := bufpool.New(true, 1<<24)
	svc, release := rpcsvc.New(st, lim, pool, nopBytes{})
	rs := rpc.NewServer()
	if err := rs.RegisterName(Service, svc); err != nil {
		t.Fatal(err)
	}
	srv := NewServer(rs, &CodecConfig{MaxFrame: maxFrame, ReadTimeout: 300 * time.Millisecond,
		WriteTimeout: time.Second, Pool: pool, OnWritten: release})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ln.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		st.Close()
	})
	return ln.Addr().String(), nil
}

type client struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &client{t: t, conn: c, br: bufio.NewReader(c)}
}

func (c *client) send(seq uint64, method string, msg proto.Message) {
	body, _ := proto.Marshal(msg)
	c.sendRaw(AppendRequest(nil, seq, method, body))
}

func (c *client) sendRaw(b []byte) {
	if _, err := c.conn.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// recv reads one response frame; ok false at EOF.
func (c *client) recv() (seq uint64, method, errStr string, body []byte, ok bool) {
	var pre [4]byte
	if _, err := io.ReadFull(c.br, pre[:]); err != nil {
		return 0, "", "", nil, false
	}
	rest := make([]byte, binary.BigEndian.Uint32(pre[:]))
	if _, err := io.ReadFull(c.br, rest); err != nil {
		c.t.Fatal(err)
	}
	hdr, body := Split(append(pre[:], rest...))
	method, seq, errStr, err := DecodeResponseHeader(hdr)
	if err != nil {
		c.t.Fatal(err)
	}
	return seq, method, errStr, body, true
}

func (c *client) call(seq uint64, method string, req, resp proto.Message) string {
	c.send(seq, method, req)
	gotSeq, _, errStr, body, ok := c.recv()
	if !ok || gotSeq != seq {
		c.t.Fatalf("%s: response seq %d ok=%v", method, gotSeq, ok)
	}
	if errStr == "" && resp != nil {
		if err := proto.Unmarshal(body, resp); err != nil {
			c.t.Fatal(err)
		}
	}
	return errStr
}

func TestCodecCalls(t *testing.T) {
	addr, _ := testServer(t, limits.DefaultMaxFrame)
	c := dial(t, addr)
	var echo xferv1.EchoResponse
	if e := c.call(1, "Xfer.Echo", &xferv1.EchoRequest{Payload: []byte("hello")}, &echo); e != "" || string(echo.Payload) != "hello" {
		t.Fatalf("echo: %q %q", e, echo.Payload)
	}
	if e := c.call(2, "Xfer.Nope", &xferv1.EchoRequest{}, nil); e != `unimplemented: unknown method "Xfer.Nope"` {
		t.Fatalf("unknown method: %q", e)
	}
	if e := c.call(3, "NoDot", &xferv1.EchoRequest{}, nil); e != `unimplemented: unknown method "NoDot"` {
		t.Fatalf("ill-formed method: %q", e)
	}
	c.sendRaw(AppendRequest(nil, 4, "Xfer.UploadChunk", []byte{0xff, 0xff}))
	if _, _, e, _, _ := c.recv(); e != "invalid_argument: malformed UploadChunkRequest body" {
		t.Fatalf("malformed body: %q", e)
	}
	c.sendRaw(AppendRequest(nil, 5, "Xfer.Stat", []byte{0x0a, 0x05}))
	if _, _, e, _, _ := c.recv(); e != "invalid_argument: malformed StatRequest body" {
		t.Fatalf("malformed body: %q", e)
	}
	// The connection still serves after call errors.
	var st xferv1.StatResponse
	if e := c.call(6, "Xfer.Stat", &xferv1.StatRequest{Name: "gen:100:42"}, &st); e != "" || st.Crc32 != 0x1587afe2 {
		t.Fatalf("stat: %q %v", e, &st)
	}
	if e := c.call(7, "Xfer.Stat", &xferv1.StatRequest{Name: "a/b"}, nil); e != `invalid_argument: name "a/b" contains '/'` {
		t.Fatalf("bad name: %q", e)
	}
}

func TestCodecUploadAndRead(t *testing.T) {
	addr, _ := testServer(t, limits.DefaultMaxFrame)
	c := dial(t, addr)
	data := make([]byte, 300000)
	for i := range data {
		data[i] = byte(i * 13)
	}
	var begin xferv1.UploadBeginResponse
	if e := c.call(1, "Xfer.UploadBegin", &xferv1.UploadBeginRequest{Name: "f.bin", Size: uint64(len(data)), ChunkSize: 65536}, &begin); e != "" {
		t.Fatal(e)
	}
	// Pipelined chunks: responses may come in any order.
	n := 0
	for off := 0; off < len(data); off += 65536 {
		n++
		c.send(uint64(100+n), "Xfer.UploadChunk", &xferv1.UploadChunkRequest{UploadId: begin.UploadId, Offset: uint64(off), Data: data[off:min(off+65536, len(data))]})
	}
	for i := 0; i < n; i++ {
		if _, _, e, _, _ := c.recv(); e != "" {
			t.Fatal(e)
		}
	}
	e := c.call(2, "Xfer.UploadChunk", &xferv1.UploadChunkRequest{UploadId: begin.UploadId, Offset: 65536, Data: data[65536:131072]}, nil)
	if e != "failed_precondition: chunk at offset 65536 already received" {
		t.Fatalf("duplicate: %q", e)
	}
	var commit xferv1.UploadCommitResponse
	if e := c.call(3, "Xfer.UploadCommit", &xferv1.UploadCommitRequest{UploadId: begin.UploadId, Crc32: crc32.ChecksumIEEE(data)}, &commit); e != "" {
		t.Fatal(e)
	}
	var rd xferv1.ReadResponse
	if e := c.call(4, "Xfer.Read", &xferv1.ReadRequest{Name: "f.bin", Offset: 299990, Length: 100}, &rd); e != "" || string(rd.Data) != string(data[299990:]) || rd.Size != 300000 {
		t.Fatalf("read: %q %d", e, len(rd.Data))
	}
	if e := c.call(5, "Xfer.Read", &xferv1.ReadRequest{Name: "f.bin", Offset: 300001, Length: 1}, nil); !strings.HasPrefix(e, "out_of_range: ") {
		t.Fatalf("read past end: %q", e)
	}
	if e := c.call(6, "Xfer.UploadCommit", &xferv1.UploadCommitRequest{UploadId: begin.UploadId}, nil); !strings.HasPrefix(e, "not_found: no open upload with id ") {
		t.Fatalf("commit again: %q", e)
	}
}

func expectConnError(t *testing.T, c *client, want string) {
	t.Helper()
	seq, method, e, _, ok := c.recv()
	if !ok || seq != 0 || method != "" || e != want {
		t.Fatalf("conn error: seq=%d method=%q err=%q ok=%v, want %q", seq, method, e, ok, want)
	}
	if _, _, _, _, ok := c.recv(); ok {
		t.Fatal("connection not closed after a connection error")
	}
}

func TestCodecConnectionErrors(t *testing.T) {
	addr, _ := testServer(t, 1<<20)
	c := dial(t, addr)
	// Oversized: refused from the length alone, even with body bytes flowing.
	big := make([]byte, 8+256<<10)
	binary.BigEndian.PutUint32(big, 9437184)
	c.sendRaw(big)
	expectConnError(t, c, "resource_exhausted: frame length 9437184 exceeds limit 1048576")

	c = dial(t, addr)
	c.sendRaw([]byte{0, 0, 0, 10, 0, 0, 4, 1})
	expectConnError(t, c, "invalid_argument: header length 1025 exceeds limit 1024")

	c = dial(t, addr)
	c.sendRaw([]byte{0, 0, 0, 3})
	expectConnError(t, c, "invalid_argument: frame length 3 is below the minimum 4")

	c = dial(t, addr)
	c.sendRaw([]byte{0, 0, 0, 6, 0, 0, 0, 2, 0xff, 0xff})
	expectConnError(t, c, "invalid_argument: malformed request header")
}

func TestCodecStalledFrameCloses(t *testing.T) {
	addr, _ := testServer(t, limits.DefaultMaxFrame)
	c := dial(t, addr)
	c.sendRaw([]byte{0, 0, 0, 100, 0}) // begun, never finished
	start := time.Now()
	if _, _, _, _, ok := c.recv(); ok {
		t.Fatal("expected close")
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("read timeout not applied")
	}
	// An idle connection (no byte of a frame yet) is not timed out.
	c = dial(t, addr)
	time.Sleep(500 * time.Millisecond)
	if e := c.call(1, "Xfer.Echo", &xferv1.EchoRequest{}, nil); e != "" {
		t.Fatal(e)
	}
}

// Read replies of 16 KiB and more are written around their data (from the
// memory store itself, or from a pooled buffer when the read spans two
// chunks); the bytes on the wire must still be the deterministic encoding.
func TestCodecReadRepliesAreByteExact(t *testing.T) {
	addr, _ := testServer(t, limits.DefaultMaxFrame)
	c := dial(t, addr)
	data := make([]byte, 4*65536+1000)
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	var begin xferv1.UploadBeginResponse
	if e := c.call(1, "Xfer.UploadBegin", &xferv1.UploadBeginRequest{Name: "r.bin", Size: uint64(len(data)), ChunkSize: 65536}, &begin); e != "" {
		t.Fatal(e)
	}
	for i, off := 0, 0; off < len(data); i, off = i+1, off+65536 {
		chunk := &xferv1.UploadChunkRequest{UploadId: begin.UploadId, Offset: uint64(off), Data: data[off:min(off+65536, len(data))]}
		if e := c.call(uint64(10+i), "Xfer.UploadChunk", chunk, nil); e != "" {
			t.Fatal(e)
		}
	}
	crc := crc32.ChecksumIEEE(data)
	if e := c.call(2, "Xfer.UploadCommit", &xferv1.UploadCommitRequest{UploadId: begin.UploadId, Crc32: crc}, nil); e != "" {
		t.Fatal(e)
	}
	for i, r := range []struct{ off, n int }{
		{0, 65536},           // one whole chunk: in place from the store
		{65536 + 100, 20000}, // inside one chunk
		{60000, 40000},       // across two chunks: a pooled buffer
		{4 * 65536, 5000},    // the short tail, below the in-place size
		{100, 16 << 10},      // exactly the in-place size
	} {
		c.send(uint64(100+i), "Xfer.Read", &xferv1.ReadRequest{Name: "r.bin", Offset: uint64(r.off), Length: uint32(r.n)})
		_, _, e, body, ok := c.recv()
		end := min(r.off+r.n, len(data))
		want, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&xferv1.ReadResponse{Data: data[r.off:end], Size: uint64(len(data)), Crc32: crc})
		if !ok || e != "" || string(body) != string(want) {
			t.Fatalf("read %d bytes at %d: err %q, %d body bytes; want the %d of the deterministic encoding", r.n, r.off, e, len(body), len(want))
		}
	}
}
