package frame

import (
	"io"
	"net"
	"net/rpc"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/bufpool"
)

// pipeCodec is a codec on one end of an in-memory connection; the test
// writes requests into the other end and drains whatever comes back.
func pipeCodec(t *testing.T, cfg *CodecConfig) (*ServerCodec, net.Conn) {
	t.Helper()
	srv, cli := net.Pipe()
	go func() { _, _ = io.Copy(io.Discard, cli) }()
	t.Cleanup(func() { srv.Close(); cli.Close() })
	var closing atomic.Bool
	return NewServerCodec(srv, cfg, &closing), cli
}

func echoFrame(seq uint64) []byte {
	body, _ := proto.Marshal(&xferv1.EchoRequest{Payload: []byte("hi")})
	return AppendRequest(nil, seq, "Xfer.Echo", body)
}

// readNext runs ReadRequestHeader + body in the background.
func readNext(c *ServerCodec) <-chan rpc.Request {
	got := make(chan rpc.Request, 1)
	go func() {
		var r rpc.Request
		if c.ReadRequestHeader(&r) == nil && c.ReadRequestBody(&xferv1.EchoRequest{}) == nil {
			got <- r
		}
	}()
	return got
}

func TestReadingWaitsForOutstandingCalls(t *testing.T) {
	c, cli := pipeCodec(t, &CodecConfig{MaxFrame: 1 << 20, ReadTimeout: time.Second, WriteTimeout: time.Second,
		Pool: bufpool.New(false, 1<<20), MaxConnCalls: 1})
	go func() { _, _ = cli.Write(append(echoFrame(1), echoFrame(2)...)) }()
	first := <-readNext(c)
	second := readNext(c)
	select {
	case r := <-second:
		t.Fatalf("call %d read while one call was outstanding (limit 1)", r.Seq)
	case <-time.After(200 * time.Millisecond):
	}
	if err := c.WriteResponse(&rpc.Response{Seq: first.Seq}, &xferv1.EchoResponse{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-second:
	case <-time.After(5 * time.Second):
		t.Fatal("reading did not resume after the answer was written")
	}
}

func TestNoAnswerAfterConnectionError(t *testing.T) {
	c, _ := pipeCodec(t, &CodecConfig{MaxFrame: 1 << 20, ReadTimeout: time.Second, WriteTimeout: time.Second,
		Pool: bufpool.New(false, 1<<20)})
	c.pending[7] = call{clientSeq: 7, method: "Xfer.Echo"}
	c.outstanding++
	_ = c.connError(io.ErrUnexpectedEOF)
	if err := c.WriteResponse(&rpc.Response{Seq: 7}, &xferv1.EchoResponse{}); err != errConnDead {
		t.Fatalf("answer after a connection error: err = %v", err)
	}
}
