package grpcsvc

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"xferbench/servers/go/gen/xferv1"
)

func TestEncodeChunkDecodes(t *testing.T) {
	data := bytes.Repeat([]byte{0xAB}, 300000)
	msg, err := encodeChunk(mem.DefaultBufferPool(), len(data), func(p []byte) error { copy(p, data); return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer msg.data.Free()
	var got xferv1.DownloadResponse
	if err := proto.Unmarshal(msg.data.ReadOnlyData(), &got); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	if !bytes.Equal(got.GetChunk(), data) {
		t.Fatalf("decoded %d bytes, want the %d encoded", len(got.GetChunk()), len(data))
	}
	out, err := checkedCodec{}.Marshal(msg)
	if err != nil || out.Len() != msg.data.Len() {
		t.Fatalf("codec Marshal of an encoded message: %v, %d bytes", err, out.Len())
	}
	boom := errors.New("read failed")
	if _, err := encodeChunk(mem.DefaultBufferPool(), 10, func([]byte) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("fill error: got %v", err)
	}
}
