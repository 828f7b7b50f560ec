package gobrpc_test

import (
	"bytes"
	"encoding/gob"
	"io"
	"net"
	"net/rpc"
	"sync/atomic"
	"testing"
	"time"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/bufpool"
	"xferbench/servers/go/internal/frame"
	"xferbench/servers/go/internal/gobrpc"
	"xferbench/servers/go/internal/limits"
	"xferbench/servers/go/internal/rpcsvc"
	"xferbench/servers/go/internal/store"
)

type noBytes struct{}

func (noBytes) Upload(int)   {}
func (noBytes) Download(int) {}

// fuzzSeeds are whole calls and the broken streams of the tests.
func fuzzSeeds(f *testing.F) [][]byte {
	var calls bytes.Buffer
	enc := gob.NewEncoder(&calls)
	for i, c := range []struct {
		method string
		body   any
	}{
		{"Xfer.Echo", &xferv1.EchoRequest{Payload: []byte("hi")}},
		{"Xfer.UploadBegin", &xferv1.UploadBeginRequest{Name: "f", Size: 4, ChunkSize: 4}},
		{"Xfer.UploadChunk", &xferv1.UploadChunkRequest{UploadId: 1, Data: []byte("abcd")}},
		{"Xfer.UploadCommit", &xferv1.UploadCommitRequest{UploadId: 1, Crc32: 0xed82cd11}},
		{"Xfer.Read", &xferv1.ReadRequest{Name: "f", Length: 4}},
		{"Xfer.Stat", &xferv1.StatRequest{Name: "gen:10:1"}},
		{"Xfer.Meta", &xferv1.MetaRequest{Entries: []*xferv1.MetaEntry{{Key: "k", Value: "v"}}}},
		{"Xfer.UploadAbort", &xferv1.UploadAbortRequest{UploadId: 9}},
		{"Xfer.Echo", "wrong type"},
	} {
		if err := enc.Encode(&rpc.Request{ServiceMethod: c.method, Seq: uint64(i + 1)}); err != nil {
			f.Fatal(err)
		}
		if err := enc.Encode(c.body); err != nil {
			f.Fatal(err)
		}
	}
	all := calls.Bytes()
	return [][]byte{all, all[:len(all)/2], {0x80, 0x01}, {0xfc, 0x7f, 0xff, 0xff, 0xff}, {0x00}, {}}
}

// FuzzGobServerCodec feeds arbitrary bytes to the gob codec serving the
// real Xfer service on a net.Pipe: it must not panic, and the connection
// must end within a bound once the client goes away.
func FuzzGobServerCodec(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	lim := limits.Defaults()
	lim.MaxFrame, lim.MaxChunk = 64<<10, 16<<10
	pool := bufpool.New(true, int(lim.MaxFrame)+4096)
	st := store.NewMem(lim)
	f.Cleanup(st.Close)
	svc, release := rpcsvc.New(st, lim, pool, noBytes{})
	perConn := rpcsvc.PerConn(svc, frame.Service)
	cfg := &frame.CodecConfig{MaxFrame: lim.MaxFrame, ReadTimeout: 100 * time.Millisecond,
		WriteTimeout: 100 * time.Millisecond, MaxConnCalls: 8, Pool: pool, OnWritten: release}
	f.Fuzz(func(t *testing.T, in []byte) {
		rs, done, err := perConn()
		if err != nil {
			t.Fatal(err)
		}
		srvEnd, cliEnd := net.Pipe()
		var closing atomic.Bool
		served := make(chan struct{})
		go func() {
			rs.ServeCodec(gobrpc.NewServerCodec(srvEnd, cfg, &closing))
			done()
			close(served)
		}()
		go func() { _, _ = io.Copy(io.Discard, cliEnd) }() // answers, until closed
		_ = cliEnd.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = cliEnd.Write(in) // the server may stop reading early: that is allowed
		_ = cliEnd.Close()
		select {
		case <-served:
		case <-time.After(5 * time.Second):
			t.Fatalf("the codec still serves 5 s after the client closed (input %x)", in)
		}
	})
}
