package gobrpc_test

import (
	"bytes"
	"encoding/gob"
	"testing"

	"google.golang.org/protobuf/proto"

	"xferbench/servers/go/gen/xferv1"
)

// The serialisation alone, for the stress report's "1.8 ms -> 0.3 ms" (BENCHMARKS.md, "net/rpc codecs"): one request body
// encoded and decoded, gob on a long-lived stream (its type sent once, as on a connection) against protobuf.
// `go test -run '^$' -bench Serialise -benchmem ./internal/gobrpc`

func benchSizes() map[string]int { return map[string]int{"256B": 256, "1MiB": 1 << 20} }

func BenchmarkSerialiseGob(b *testing.B) {
	for name, n := range benchSizes() {
		b.Run(name, func(b *testing.B) {
			req := &xferv1.UploadChunkRequest{UploadId: 7, Offset: 1 << 20, Data: make([]byte, n)}
			var stream bytes.Buffer
			enc, dec := gob.NewEncoder(&stream), gob.NewDecoder(&stream)
			b.SetBytes(int64(n))
			for b.Loop() {
				if err := enc.Encode(req); err != nil {
					b.Fatal(err)
				}
				var out xferv1.UploadChunkRequest
				if err := dec.Decode(&out); err != nil || len(out.Data) != n {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSerialiseProtobuf(b *testing.B) {
	for name, n := range benchSizes() {
		b.Run(name, func(b *testing.B) {
			req := &xferv1.UploadChunkRequest{UploadId: 7, Offset: 1 << 20, Data: make([]byte, n)}
			var buf []byte
			b.SetBytes(int64(n))
			for b.Loop() {
				var err error
				if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf[:0], req); err != nil {
					b.Fatal(err)
				}
				var out xferv1.UploadChunkRequest
				if err := proto.Unmarshal(buf, &out); err != nil || len(out.Data) != n {
					b.Fatal(err)
				}
			}
		})
	}
}
