package grpcsvc

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"xferbench/servers/go/gen/xferv1"
)

func TestChunkOnly(t *testing.T) {
	data := bytes.Repeat([]byte{1, 2, 3}, 1000)
	enc, _ := proto.Marshal(&xferv1.UploadRequest{Msg: &xferv1.UploadRequest_Chunk{Chunk: data}})
	got, ok := chunkOnly(enc)
	if !ok || !bytes.Equal(got, data) {
		t.Fatalf("chunk message: ok=%v, %d bytes; want the %d sent", ok, len(got), len(data))
	}
	if &got[0] != &enc[len(enc)-len(data)] {
		t.Fatal("chunk was copied, want it aliased")
	}
	hdr, _ := proto.Marshal(&xferv1.UploadRequest{Msg: &xferv1.UploadRequest_Header{Header: &xferv1.UploadHeader{Name: "a"}}})
	for name, b := range map[string][]byte{
		"header":          hdr,
		"chunk twice":     append(append([]byte{}, enc...), enc...),
		"truncated":       enc[:len(enc)-1],
		"trailing field":  append(append([]byte{}, enc...), 0x08, 0x01),
		"empty":           {},
		"chunk as varint": {0x10, 0x05},
	} {
		if _, ok := chunkOnly(b); ok {
			t.Errorf("%s: taken as a lone chunk", name)
		}
	}
}

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
