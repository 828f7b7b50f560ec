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
	for _, v := range testvec.Lines(f, "headers.vectors") {
		h := testvec.Hex(f, v[0])
		f.Add(headerOnlyFrame(h), uint32(1<<23))
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
		checkHeaderAgainstProto(t, hdr)
	})
}

// headerOnlyFrame wraps raw header bytes in a frame with no body.
func headerOnlyFrame(h []byte) []byte {
	return append(appendPrefix(nil, len(h), 0), h...)
}

// checkHeaderAgainstProto holds the strict header decoder to proto: what
// it accepts proto accepts with the same values (and seq is never 0), and
// what proto rejects it rejects; it may reject more (PROTOCOL.md "Request
// headers": wrong wire types for method and seq, groups, seq 0).
func checkHeaderAgainstProto(t *testing.T, hdr []byte) {
	method, seq, err := DecodeRequestHeader(hdr)
	var ref xferv1.RequestHeader
	refErr := proto.Unmarshal(hdr, &ref)
	if refErr != nil && err == nil {
		t.Fatalf("header %x: accepted, proto says %v", hdr, refErr)
	}
	if err == nil && (method != ref.Method || seq != ref.Seq || seq == 0) {
		t.Fatalf("header %x: ours %q %d, proto %q %d", hdr, method, seq, ref.Method, ref.Seq)
	}
	if err != nil && err != ErrMalformedHeader && err != ErrSeqZero {
		t.Fatalf("header %x: unexpected error %v", hdr, err)
	}
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
