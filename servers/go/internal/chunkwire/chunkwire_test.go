package chunkwire

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"xferbench/servers/go/gen/xferv1"
)

// slices cuts b at the given offsets into a BufferSlice, as grpc-go hands
// over a message received in several DATA frames.
func slices(b []byte, cuts ...int) mem.BufferSlice {
	var out mem.BufferSlice
	prev := 0
	for _, c := range append(cuts, len(b)) {
		out = append(out, mem.SliceBuffer(b[prev:c]))
		prev = c
	}
	return out
}

func TestPieces(t *testing.T) {
	data := bytes.Repeat([]byte{1, 2, 3}, 1000)
	enc, _ := proto.Marshal(&xferv1.UploadRequest{Msg: &xferv1.UploadRequest_Chunk{Chunk: data}})
	for _, cuts := range [][]int{nil, {3}, {100, 2000}, {3, 4, 5, len(enc) - 1}} {
		pieces, ok := Pieces(slices(enc, cuts...))
		if !ok || !bytes.Equal(bytes.Join(pieces, nil), data) {
			t.Fatalf("cut at %v: ok=%v, %d pieces; want the %d bytes sent", cuts, ok, len(pieces), len(data))
		}
		if last := pieces[len(pieces)-1]; &last[len(last)-1] != &enc[len(enc)-1] {
			t.Fatalf("cut at %v: chunk was copied, want it aliased", cuts)
		}
	}
	hdr, _ := proto.Marshal(&xferv1.UploadRequest{Msg: &xferv1.UploadRequest_Header{Header: &xferv1.UploadHeader{Name: "a"}}})
	for name, b := range map[string]mem.BufferSlice{
		"header":             slices(hdr),
		"chunk twice":        slices(append(append([]byte{}, enc...), enc...)),
		"truncated":          slices(enc[:len(enc)-1], 100),
		"trailing field":     slices(append(append([]byte{}, enc...), 0x08, 0x01), 50),
		"empty":              nil,
		"chunk as varint":    slices([]byte{0x10, 0x05}),
		"length split apart": slices(enc, 2), // tag and the first length byte, then the rest: the full decoder's
	} {
		if _, ok := Pieces(b); ok {
			t.Errorf("%s: taken as a lone chunk", name)
		}
	}
}

// FuzzPieces: whatever the bytes and wherever grpc-go cut them, a message
// taken as a lone chunk decodes (with proto) to exactly that chunk, and a
// message that is one chunk field (its length in any valid varint form)
// with its tag and length in the first buffer is taken.
func FuzzPieces(f *testing.F) {
	enc, _ := proto.Marshal(&xferv1.UploadRequest{Msg: &xferv1.UploadRequest_Chunk{Chunk: []byte("abcdef")}})
	f.Add(enc, uint16(3))
	f.Add([]byte{0x12, 0x80, 0x01}, uint16(1))
	f.Add([]byte{0x12, 0x02, 'a', 'b', 0x12, 0x00}, uint16(4))
	f.Fuzz(func(t *testing.T, b []byte, cut uint16) {
		at := int(cut) % (len(b) + 1)
		pieces, ok := Pieces(slices(b, at))
		var msg xferv1.UploadRequest
		err := proto.Unmarshal(b, &msg)
		if ok && (err != nil || msg.GetChunk() == nil || !bytes.Equal(bytes.Join(pieces, nil), msg.GetChunk())) {
			t.Fatalf("taken as chunk %q, but proto reads %v (%v)", bytes.Join(pieces, nil), &msg, err)
		}
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != Field || typ != protowire.BytesType {
			return
		}
		v, m := protowire.ConsumeBytes(b[n:])
		if m >= 0 && n+m == len(b) && at >= len(b)-len(v) && !ok {
			t.Fatalf("one chunk field with its head in the first %d bytes was not taken", at)
		}
	})
}
