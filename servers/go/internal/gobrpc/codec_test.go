package gobrpc_test

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"net/rpc"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/config"
	"xferbench/servers/go/internal/gobrpc"
	"xferbench/servers/go/internal/meta"
	"xferbench/servers/go/internal/metrics"
	"xferbench/servers/go/internal/server"
)

// Small limits so the bad-input cases are cheap: messages up to 256 KiB,
// chunks up to 64 KiB, a request whole within 300 ms of its first byte.
const (
	maxFrame    = 256 << 10
	readTimeout = 300 * time.Millisecond
	// closeBound is how long a test waits for the server to act; far
	// above what it needs, so only a server that never acts fails.
	closeBound = 10 * time.Second
)

// startGob runs xferd-go's own server with --frame-codec gob in the test
// process (under -race); the Python suite drives the binary.
func startGob(t *testing.T, extra ...string) string {
	t.Helper()
	cfg, err := config.Parse(append([]string{"--grpc-addr", "127.0.0.1:0", "--frame-addr", "127.0.0.1:0",
		"--metrics-addr", "127.0.0.1:0", "--frame-codec", "gob", "--max-frame", strconv.Itoa(maxFrame),
		"--max-chunk", "64KiB", "--read-timeout", readTimeout.String()}, extra...), func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start(cfg, metrics.BuildInfo{Version: "test", FrameCodec: cfg.FrameCodec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeBound)
		defer cancel()
		srv.Shutdown(ctx)
	})
	_, addr, _ := srv.Addrs()
	return addr
}

func dial(t *testing.T, addr string) *rpc.Client {
	t.Helper()
	c, err := rpc.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func mustCall(t *testing.T, c *rpc.Client, method string, req, resp any) {
	t.Helper()
	if err := c.Call(method, req, resp); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
}

// wantServerError asserts a call error whose text starts with code.
func wantServerError(t *testing.T, err error, code string) {
	t.Helper()
	var se rpc.ServerError
	if !errors.As(err, &se) || !strings.HasPrefix(string(se), code+":") {
		t.Fatalf("got %v, want a server error with code %s", err, code)
	}
}

func TestRoundTripEveryMethod(t *testing.T) {
	c := dial(t, startGob(t))
	data := make([]byte, 3000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	var begin xferv1.UploadBeginResponse
	mustCall(t, c, "Xfer.UploadBegin", &xferv1.UploadBeginRequest{Name: "f", Size: 3000, ChunkSize: 2048}, &begin)
	var chunk xferv1.UploadChunkResponse
	mustCall(t, c, "Xfer.UploadChunk", &xferv1.UploadChunkRequest{UploadId: begin.UploadId, Data: data[:2048]}, &chunk)
	mustCall(t, c, "Xfer.UploadChunk", &xferv1.UploadChunkRequest{UploadId: begin.UploadId, Offset: 2048, Data: data[2048:]}, &chunk)
	if chunk.Received != 3000 {
		t.Fatalf("received %d", chunk.Received)
	}
	crc := crc32.ChecksumIEEE(data)
	var commit xferv1.UploadCommitResponse
	mustCall(t, c, "Xfer.UploadCommit", &xferv1.UploadCommitRequest{UploadId: begin.UploadId, Crc32: crc}, &commit)
	if commit.Size != 3000 || commit.Crc32 != crc {
		t.Fatalf("commit %v", &commit)
	}
	var stat xferv1.StatResponse
	mustCall(t, c, "Xfer.Stat", &xferv1.StatRequest{Name: "f"}, &stat)
	if stat.Name != "f" || stat.Size != 3000 || stat.Crc32 != crc {
		t.Fatalf("stat %v", &stat)
	}
	var read xferv1.ReadResponse
	mustCall(t, c, "Xfer.Read", &xferv1.ReadRequest{Name: "f", Offset: 1000, Length: 4096}, &read)
	if !bytes.Equal(read.Data, data[1000:]) || read.Size != 3000 || read.Crc32 != crc {
		t.Fatalf("read %d bytes, size %d", len(read.Data), read.Size)
	}
	var echo xferv1.EchoResponse
	mustCall(t, c, "Xfer.Echo", &xferv1.EchoRequest{Payload: []byte("hello")}, &echo)
	if string(echo.Payload) != "hello" {
		t.Fatalf("echo %q", echo.Payload)
	}
	entries := []*xferv1.MetaEntry{{Key: "b", Value: "2"}, {Key: "a", Value: "1"}}
	var m xferv1.MetaResponse
	mustCall(t, c, "Xfer.Meta", &xferv1.MetaRequest{Entries: entries}, &m)
	if len(m.Entries) != 2 || m.Entries[0].Key != "a" || m.Digest != meta.Digest([]*xferv1.MetaEntry{entries[1], entries[0]}) {
		t.Fatalf("meta %v", &m)
	}
	mustCall(t, c, "Xfer.UploadBegin", &xferv1.UploadBeginRequest{Name: "g", Size: 10, ChunkSize: 10}, &begin)
	// UploadAbort's reply has no fields: it travels as an empty struct (GOB.md), read into nil.
	mustCall(t, c, "Xfer.UploadAbort", &xferv1.UploadAbortRequest{UploadId: begin.UploadId}, nil)
	wantServerError(t, c.Call("Xfer.UploadAbort", &xferv1.UploadAbortRequest{UploadId: begin.UploadId}, nil), "not_found")
	wantServerError(t, c.Call("Xfer.Stat", &xferv1.StatRequest{Name: "missing"}, &stat), "not_found")
	wantServerError(t, c.Call("Xfer.Nope", &xferv1.StatRequest{}, &stat), "unimplemented")
	// A chunk beyond the upload's chunk size but within the message limit is a call error.
	mustCall(t, c, "Xfer.UploadBegin", &xferv1.UploadBeginRequest{Name: "h", Size: 100 << 10, ChunkSize: 2048}, &begin)
	err := c.Call("Xfer.UploadChunk", &xferv1.UploadChunkRequest{UploadId: begin.UploadId, Data: make([]byte, 4096)}, &chunk)
	wantServerError(t, err, "invalid_argument")
	mustCall(t, c, "Xfer.Echo", &xferv1.EchoRequest{Payload: []byte("still")}, &echo)
}

// TestConcurrentCallsOnOneClient: net/rpc multiplexes calls; answers must
// reach their own callers.
func TestConcurrentCallsOnOneClient(t *testing.T) {
	c := dial(t, startGob(t))
	calls := make([]*rpc.Call, 64)
	for i := range calls {
		calls[i] = c.Go("Xfer.Echo", &xferv1.EchoRequest{Payload: []byte(strconv.Itoa(i))}, &xferv1.EchoResponse{}, nil)
	}
	for i, call := range calls {
		<-call.Done
		if call.Error != nil || string(call.Reply.(*xferv1.EchoResponse).Payload) != strconv.Itoa(i) {
			t.Fatalf("call %d: %v %v", i, call.Error, call.Reply)
		}
	}
}

// encoded is what a gob client writes for one call.
func encoded(t *testing.T, method string, body any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := gob.NewEncoder(&b)
	if err := enc.Encode(&rpc.Request{ServiceMethod: method, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	if err := enc.Encode(body); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// rawConn dials without net/rpc, to write what its client never would.
func rawConn(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	if err := nc.SetDeadline(time.Now().Add(closeBound)); err != nil {
		t.Fatal(err)
	}
	return nc.(*net.TCPConn)
}

// readUntilClosed reads everything the server sends until it closes the
// connection (an error if it does not within the deadline).
func readUntilClosed(t *testing.T, nc net.Conn) []byte {
	t.Helper()
	got, err := io.ReadAll(nc)
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("the server did not close the connection: %v", err)
	}
	return got
}

// connErrorIn decodes the seq-0 response a failed connection gets.
func connErrorIn(t *testing.T, out []byte) string {
	t.Helper()
	dec := gob.NewDecoder(bytes.NewReader(out))
	for {
		var r rpc.Response
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("no seq-0 response in %d bytes: %v", len(out), err)
		}
		if err := dec.DecodeValue(reflect.Value{}); err != nil { // the body, discarded
			t.Fatal(err)
		}
		if r.Seq == 0 {
			return r.Error
		}
	}
}

func TestCorruptStreamsCloseTheConnection(t *testing.T) {
	addr := startGob(t)
	good := dial(t, addr)
	whole := encoded(t, "Xfer.Echo", &xferv1.EchoRequest{Payload: []byte("x")})
	big := encoded(t, "Xfer.UploadChunk", &xferv1.UploadChunkRequest{UploadId: 1, Data: make([]byte, maxFrame)})
	random := make([]byte, 4096)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	cases := []struct {
		name    string
		in      []byte
		halfEnd bool   // close our side after writing
		want    string // in the seq-0 error; "" when only a close is promised
	}{
		{"random bytes", random, false, ""},
		{"truncated message", whole[:len(whole)-3], true, ""},
		{"oversized chunk message", big, false, "exceeds limit 262144 (--max-frame)"},
		{"malformed count prefix", []byte{0x80, 0x01}, false, "count prefix byte 0x80 is malformed"},
		{"stalled request", whole[:len(whole)/2], false, "not received whole within 300ms (--read-timeout)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := rawConn(t, addr)
			if _, err := nc.Write(tc.in); err != nil && !strings.Contains(err.Error(), "reset") {
				t.Fatal(err)
			}
			if tc.halfEnd {
				_ = nc.CloseWrite()
			}
			out := readUntilClosed(t, nc)
			if tc.want != "" {
				if msg := connErrorIn(t, out); !strings.Contains(msg, tc.want) {
					t.Fatalf("seq-0 error %q, want %q", msg, tc.want)
				}
			}
			var echo xferv1.EchoResponse
			mustCall(t, good, "Xfer.Echo", &xferv1.EchoRequest{Payload: []byte("after")}, &echo)
			mustCall(t, dial(t, addr), "Xfer.Echo", &xferv1.EchoRequest{Payload: []byte("new")}, &echo)
		})
	}
}

// TestTypeMismatchIsACallError: a body of the wrong type fails that call
// only; gob's counted messages keep the stream in step for the next one.
func TestTypeMismatchIsACallError(t *testing.T) {
	nc := rawConn(t, startGob(t))
	enc, dec := gob.NewEncoder(nc), gob.NewDecoder(nc)
	send := func(seq uint64, body any) (rpc.Response, *xferv1.EchoResponse) {
		if err := enc.Encode(&rpc.Request{ServiceMethod: "Xfer.Echo", Seq: seq}); err != nil {
			t.Fatal(err)
		}
		if err := enc.Encode(body); err != nil {
			t.Fatal(err)
		}
		var r rpc.Response
		e := &xferv1.EchoResponse{}
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		if r.Error != "" {
			_ = dec.DecodeValue(reflect.Value{}) // the empty body of an error
		} else if err := dec.Decode(e); err != nil {
			t.Fatal(err)
		}
		return r, e
	}
	r, _ := send(7, "a string, not an EchoRequest")
	if r.Seq != 7 || !strings.HasPrefix(r.Error, "invalid_argument: malformed *xferv1.EchoRequest body") {
		t.Fatalf("mismatch answered %+v", r)
	}
	r, e := send(8, &xferv1.EchoRequest{Payload: []byte("ok")})
	if r.Seq != 8 || r.Error != "" || string(e.Payload) != "ok" {
		t.Fatalf("next call answered %+v %q", r, e.Payload)
	}
}

// TestTypeDefinitionsAreBounded: every new type costs the decoder memory
// for the connection's life; past MaxTypeDefs the connection is closed.
func TestTypeDefinitionsAreBounded(t *testing.T) {
	addr := startGob(t)
	nc := rawConn(t, addr)
	enc := gob.NewEncoder(nc)
	go func() { _, _ = io.Copy(io.Discard, nc) }() // call errors come back; take them
	var err error
	for i := 0; i <= gobrpc.MaxTypeDefs && err == nil; i++ {
		typ := reflect.StructOf([]reflect.StructField{{Name: "F" + strconv.Itoa(i), Type: reflect.TypeFor[int]()}})
		v := reflect.New(typ)
		v.Elem().Field(0).SetInt(1)
		if err = enc.Encode(&rpc.Request{ServiceMethod: "Xfer.Echo", Seq: uint64(i + 1)}); err == nil {
			err = enc.Encode(v.Interface())
		}
	}
	// The server closes the connection: a later write or read fails within the bound.
	deadline := time.Now().Add(closeBound)
	for err == nil && time.Now().Before(deadline) {
		err = enc.Encode(&rpc.Request{ServiceMethod: "Xfer.Echo", Seq: 1 << 20})
	}
	if err == nil {
		t.Fatalf("the connection stayed open after %d type definitions", gobrpc.MaxTypeDefs+1)
	}
	var echo xferv1.EchoResponse
	mustCall(t, dial(t, addr), "Xfer.Echo", &xferv1.EchoRequest{Payload: []byte("new")}, &echo)
}

// TestConnectionOverMaxConnsGetsTheReasonInGob: the refusal is a seq-0
// answer on a gob stream, not a frame the client cannot read.
func TestConnectionOverMaxConnsGetsTheReasonInGob(t *testing.T) {
	addr := startGob(t, "--max-conns", "1")
	first := dial(t, addr)
	var echo xferv1.EchoResponse
	mustCall(t, first, "Xfer.Echo", &xferv1.EchoRequest{Payload: []byte("1")}, &echo)
	nc := rawConn(t, addr)
	if msg := connErrorIn(t, readUntilClosed(t, nc)); msg != "resource_exhausted: too many connections (limit 1)" {
		t.Fatalf("refusal %q", msg)
	}
	mustCall(t, first, "Xfer.Echo", &xferv1.EchoRequest{Payload: []byte("2")}, &echo)
}
