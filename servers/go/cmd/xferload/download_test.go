package main

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"xferbench/servers/go/gen/xferv1"
)

func TestDecodeReadMatchesProto(t *testing.T) {
	want := &xferv1.ReadResponse{Data: []byte("abcdef"), Size: 1 << 40, Crc32: 0xcbf43926}
	b, _ := proto.Marshal(want)
	data, size, crc, err := decodeRead(b)
	if err != nil || !bytes.Equal(data, want.Data) || size != want.Size || crc != want.Crc32 {
		t.Fatalf("%q %d %x %v", data, size, crc, err)
	}
	if &data[0] != &b[2] { // field 1 comes first: tag, length, then the bytes
		t.Fatal("data does not alias the frame")
	}
	// crc32 is uint32: a wider varint is malformed, as PROTOCOL.md "Integers" requires.
	bad := append(b[:0:0], b...)
	bad = append(bad, 0x18, 0x80, 0x80, 0x80, 0x80, 0x10)
	if _, _, _, err := decodeRead(bad); err == nil {
		t.Fatal("crc32 above 2^32-1 accepted")
	}
	if _, _, _, err := decodeRead([]byte{0x0a, 0x05, 'a'}); err == nil {
		t.Fatal("truncated data accepted")
	}
}
