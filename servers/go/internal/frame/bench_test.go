package frame

import (
	"net"
	"net/rpc"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/bufpool"
	"xferbench/servers/go/internal/limits"
	"xferbench/servers/go/internal/rpcsvc"
	"xferbench/servers/go/internal/store"
)

const mib = 1 << 20

func marshal(b *testing.B, m proto.Message) []byte {
	body, err := proto.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

func benchEncode(b *testing.B, method string, body []byte) {
	buf := make([]byte, 0, len(body)+64)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf = AppendRequest(buf[:0], uint64(i+1), method, body)
	}
}

func benchDecode(b *testing.B, frame []byte, decode func(body []byte) error) {
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		n, err := Parse(frame, limits.DefaultMaxFrame)
		if err != nil || n != len(frame) {
			b.Fatal(n, err)
		}
		hdr, body := Split(frame)
		if _, _, err := DecodeRequestHeader(hdr); err != nil {
			b.Fatal(err)
		}
		if err := decode(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFrame(b *testing.B) {
	echo := marshal(b, &xferv1.EchoRequest{Payload: []byte("ping-ping-ping-ping")})
	chunk := marshal(b, &xferv1.UploadChunkRequest{UploadId: 12345, Offset: 7 * mib, Data: make([]byte, mib)})
	b.Run("encode/echo", func(b *testing.B) { benchEncode(b, "Xfer.Echo", echo) })
	b.Run("encode/chunk1MiB", func(b *testing.B) { benchEncode(b, "Xfer.UploadChunk", chunk) })
	b.Run("decode/echo", func(b *testing.B) {
		var m xferv1.EchoRequest
		benchDecode(b, AppendRequest(nil, 1, "Xfer.Echo", echo), func(body []byte) error { return decodeEcho(body, &m) })
	})
	b.Run("decode/chunk1MiB", func(b *testing.B) {
		var m xferv1.UploadChunkRequest
		benchDecode(b, AppendRequest(nil, 1, "Xfer.UploadChunk", chunk), func(body []byte) error { return decodeUploadChunk(body, &m) })
	})
	b.Run("decode/chunk1MiB-proto.Unmarshal", func(b *testing.B) {
		var m xferv1.UploadChunkRequest
		benchDecode(b, AppendRequest(nil, 1, "Xfer.UploadChunk", chunk), func(body []byte) error { return proto.Unmarshal(body, &m) })
	})
}

// loopConn replays one request frame forever and discards what is written:
// the codec's own costs, without sockets.
type loopConn struct {
	net.Conn
	frame []byte
	pos   int
}

func (c *loopConn) Read(p []byte) (int, error) {
	n := copy(p, c.frame[c.pos:])
	c.pos = (c.pos + n) % len(c.frame)
	return n, nil
}
func (c *loopConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *loopConn) SetReadDeadline(time.Time) error  { return nil }
func (c *loopConn) SetWriteDeadline(time.Time) error { return nil }
func (c *loopConn) Close() error                     { return nil }

// benchCodec runs read header, read body, handle, write response per op.
func benchCodec(b *testing.B, pool *bufpool.Pool, frame []byte, payload int64, newReq func() proto.Message,
	handle func(req proto.Message) (any, error), onWritten func(any)) {
	var closing = new(atomicBool)
	c := NewServerCodec(&loopConn{frame: frame}, &CodecConfig{MaxFrame: limits.DefaultMaxFrame,
		ReadTimeout: time.Second, WriteTimeout: time.Second, Pool: pool, OnWritten: onWritten}, &closing.Bool)
	b.SetBytes(payload)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var r rpc.Request
		if err := c.ReadRequestHeader(&r); err != nil {
			b.Fatal(err)
		}
		req := newReq()
		if err := c.ReadRequestBody(req); err != nil {
			b.Fatal(err)
		}
		reply, err := handle(req)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.WriteResponse(&rpc.Response{ServiceMethod: r.ServiceMethod, Seq: r.Seq}, reply); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChunk measures the codec's handling of a 1 MiB UploadChunk
// (read, decode, reply) and a 1 MiB Read reply (service read of generated
// content into a buffer, encode), with the pool on and off.
func BenchmarkChunk(b *testing.B) {
	chunk := AppendRequest(nil, 1, "Xfer.UploadChunk",
		marshal(b, &xferv1.UploadChunkRequest{UploadId: 1, Offset: mib, Data: make([]byte, mib)}))
	read := AppendRequest(nil, 1, "Xfer.Read", marshal(b, &xferv1.ReadRequest{Name: "gen:8388608:1", Offset: mib, Length: mib}))
	for _, on := range []bool{true, false} {
		name := map[bool]string{true: "pool=on", false: "pool=off"}[on]
		b.Run("upload1MiB/"+name, func(b *testing.B) {
			pool := bufpool.New(on, 16*mib)
			benchCodec(b, pool, chunk, mib, func() proto.Message { return new(xferv1.UploadChunkRequest) },
				func(req proto.Message) (any, error) {
					return &xferv1.UploadChunkResponse{Received: uint64(len(req.(*xferv1.UploadChunkRequest).Data))}, nil
				}, nil)
		})
		b.Run("read1MiB/"+name, func(b *testing.B) {
			pool := bufpool.New(on, 16*mib)
			st := store.NewMem(limits.Defaults())
			defer st.Close()
			svc, release := rpcsvc.New(st, limits.Defaults(), pool, nopBytes{})
			benchCodec(b, pool, read, mib, func() proto.Message { return new(xferv1.ReadRequest) },
				func(req proto.Message) (any, error) {
					resp := new(xferv1.ReadResponse)
					return resp, svc.Read(req.(*xferv1.ReadRequest), resp)
				}, release)
		})
	}
}

type atomicBool struct{ Bool atomic.Bool }
