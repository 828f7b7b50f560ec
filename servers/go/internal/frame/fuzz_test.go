package frame

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/testvec"
)

// FuzzParseFrame feeds arbitrary bytes to the parser and, for whole
// frames, to the header decoder, whose verdict must match proto.Unmarshal.
func FuzzParseFrame(f *testing.F) {
	for _, v := range testvec.Lines(f, "frames.vectors") {
		switch v[0] {
		case "request":
			f.Add(testvec.Hex(f, v[4]), uint32(1<<23))
		case "response":
			f.Add(testvec.Hex(f, v[5]), uint32(1<<23))
		case "parse":
			f.Add(testvec.Hex(f, v[3]), uint32(64))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte, maxFrame uint32) {
		n, err := Parse(in, maxFrame)
		if err != nil || n == 0 {
			return
		}
		if n > len(in) || n < prefixLen {
			t.Fatalf("Parse claimed %d bytes of %d", n, len(in))
		}
		hdr, body := Split(in[:n])
		if len(hdr)+len(body)+prefixLen != n {
			t.Fatal("Split lost bytes")
		}
		method, seq, err := DecodeRequestHeader(hdr)
		var ref xferv1.RequestHeader
		refErr := proto.Unmarshal(hdr, &ref)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("header %x: ours %v, proto %v", hdr, err, refErr)
		}
		if err == nil && (method != ref.Method || seq != ref.Seq) {
			t.Fatalf("header %x: ours %q %d, proto %q %d", hdr, method, seq, ref.Method, ref.Seq)
		}
	})
}

// FuzzDecodeUploadChunk holds the copy-free chunk decoder to proto.
func FuzzDecodeUploadChunk(f *testing.F) {
	f.Add([]byte{0x08, 0x05, 0x10, 0x80, 0x80, 0x04, 0x1a, 0x03, 0x00, 0x01, 0xff})
	f.Add([]byte{0x1a, 0x00, 0x08, 0x01, 0x18, 0x05})
	f.Add([]byte{0x0b, 0x0c})
	f.Fuzz(func(t *testing.T, in []byte) {
		var ours, ref xferv1.UploadChunkRequest
		err := decodeUploadChunk(in, &ours)
		refErr := proto.Unmarshal(in, &ref)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("%x: ours %v, proto %v", in, err, refErr)
		}
		if err == nil && (ours.UploadId != ref.UploadId || ours.Offset != ref.Offset || !bytes.Equal(ours.Data, ref.Data)) {
			t.Fatalf("%x: ours %v, proto %v", in, &ours, &ref)
		}
	})
}
