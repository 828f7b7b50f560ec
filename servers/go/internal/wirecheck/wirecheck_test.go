package wirecheck

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"xferbench/servers/go/gen/xferv1"
)

// varintField encodes field num as a varint of value v.
func varintField(num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
}

func TestUint32Bounds(t *testing.T) {
	cases := []struct {
		m    proto.Message
		body []byte
		want error
	}{
		{&xferv1.ReadRequest{}, varintField(3, 1<<32-1), nil},
		{&xferv1.ReadRequest{}, varintField(3, 1<<32), ErrOverflow},
		{&xferv1.ReadRequest{}, varintField(2, 1<<63), nil}, // offset is 64-bit
		{&xferv1.UploadBeginRequest{}, varintField(3, 1<<32+65536), ErrOverflow},
		{&xferv1.UploadCommitRequest{}, varintField(2, 1<<40), ErrOverflow},
		{&xferv1.StatRequest{}, varintField(9, 1<<40), nil}, // unknown fields are not checked
	}
	for _, c := range cases {
		if err := Unmarshal(c.body, c.m); !errors.Is(err, c.want) {
			t.Errorf("%T %x: %v, want %v", c.m, c.body, err, c.want)
		}
	}
}

// TestNested checks a 32-bit field inside a oneof message (gRPC's Upload).
func TestNested(t *testing.T) {
	inner := varintField(3, 1<<33)
	body := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), inner)
	if err := Unmarshal(body, &xferv1.UploadRequest{}); !errors.Is(err, ErrOverflow) {
		t.Fatalf("nested overflow: %v", err)
	}
	ok := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), varintField(3, 65536))
	var m xferv1.UploadRequest
	if err := Unmarshal(ok, &m); err != nil || m.GetHeader().GetChunkSize() != 65536 {
		t.Fatalf("nested in range: %v %v", &m, err)
	}
}
