package frame

import (
	"bytes"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/errs"
	"xferbench/servers/go/internal/testvec"
)

// Ensure the generated package is linked so its types are registered.
var _ = xferv1.File_xfer_v1_frame_proto

func parseUint(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("bad number %q", s)
	}
	return v
}

func TestFrameVectors(t *testing.T) {
	for _, v := range testvec.Lines(t, "frames.vectors") {
		switch v[0] {
		case "request":
			checkRequest(t, parseUint(t, v[1]), testvec.Field(v[2]), testvec.Hex(t, v[3]), testvec.Hex(t, v[4]))
		case "response":
			checkResponse(t, parseUint(t, v[1]), testvec.Field(v[2]), testvec.Field(v[3]), testvec.Hex(t, v[4]), testvec.Hex(t, v[5]))
		case "parse":
			checkParse(t, uint32(parseUint(t, v[1])), v[2], testvec.Hex(t, v[3]))
		default:
			t.Fatalf("unknown vector kind %q", v[0])
		}
	}
}

func checkRequest(t *testing.T, seq uint64, method string, body, want []byte) {
	if got := AppendRequest(nil, seq, method, body); !bytes.Equal(got, want) {
		t.Errorf("request %d %s: encoded %x, want %x", seq, method, got, want)
	}
	n, err := Parse(want, 1<<23)
	if err != nil || n != len(want) {
		t.Fatalf("request %d: Parse = %d, %v", seq, n, err)
	}
	hdr, gotBody := Split(want)
	m, s, err := DecodeRequestHeader(hdr)
	if err != nil || m != method || s != seq || !bytes.Equal(gotBody, body) {
		t.Errorf("request %d: decoded %q %d %x, %v", seq, m, s, gotBody, err)
	}
	var ref xferv1.RequestHeader
	if err := proto.Unmarshal(hdr, &ref); err != nil || ref.Method != method || ref.Seq != seq {
		t.Errorf("request %d: proto disagrees: %v %v", seq, &ref, err)
	}
}

func checkResponse(t *testing.T, seq uint64, method, errStr string, body, want []byte) {
	if got := AppendResponse(nil, seq, method, errStr, body); !bytes.Equal(got, want) {
		t.Errorf("response %d: encoded %x, want %x", seq, got, want)
	}
	n, err := Parse(want, 1<<23)
	if err != nil || n != len(want) {
		t.Fatalf("response %d: Parse = %d, %v", seq, n, err)
	}
	hdr, gotBody := Split(want)
	m, s, e, err := DecodeResponseHeader(hdr)
	if err != nil || m != method || s != seq || e != errStr || !bytes.Equal(gotBody, body) {
		t.Errorf("response %d: decoded %q %d %q %x, %v", seq, m, s, e, gotBody, err)
	}
	ref := &xferv1.ResponseHeader{Method: method, Seq: seq, Error: errStr}
	canon, _ := proto.MarshalOptions{Deterministic: true}.Marshal(ref)
	if !bytes.Equal(canon, hdr) {
		t.Errorf("response %d: header %x, proto says %x", seq, hdr, canon)
	}
}

func checkParse(t *testing.T, maxFrame uint32, outcome string, in []byte) {
	n, err := Parse(in, maxFrame)
	var got string
	switch {
	case err != nil:
		got = "error:" + errs.CodeOf(err).String()
	case n == 0:
		got = "need_more"
	default:
		got = "frame:" + strconv.Itoa(n)
	}
	if got != outcome {
		t.Errorf("parse %x (max %d) = %s (%v), want %s", in, maxFrame, got, err, outcome)
	}
}

// buildMessage makes a message of bodies.vectors from "name=value,..."
// using the descriptor, so every type is handled the same way.
func buildMessage(t *testing.T, typ, fields string) proto.Message {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName("xfer.v1." + typ))
	if err != nil {
		t.Fatalf("type %s: %v", typ, err)
	}
	m := mt.New()
	if fields == "-" {
		return m.Interface()
	}
	for _, kv := range strings.Split(fields, ",") {
		name, val, _ := strings.Cut(kv, "=")
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			t.Fatalf("%s has no field %s", typ, name)
		}
		switch fd.Kind() {
		case protoreflect.StringKind:
			m.Set(fd, protoreflect.ValueOfString(val))
		case protoreflect.BytesKind:
			b, _ := hex.DecodeString(val)
			m.Set(fd, protoreflect.ValueOfBytes(b))
		case protoreflect.Uint64Kind:
			m.Set(fd, protoreflect.ValueOfUint64(parseUint(t, val)))
		case protoreflect.Uint32Kind:
			m.Set(fd, protoreflect.ValueOfUint32(uint32(parseUint(t, val))))
		default:
			t.Fatalf("field kind %v not handled", fd.Kind())
		}
	}
	return m.Interface()
}

func TestBodyVectors(t *testing.T) {
	for _, v := range testvec.Lines(t, "bodies.vectors") {
		want := buildMessage(t, v[0], v[1])
		body := testvec.Hex(t, v[2])
		got, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
		if err != nil || !bytes.Equal(got, body) {
			t.Errorf("%s: marshal %x, want %x (%v)", v[0], got, body, err)
		}
		back := want.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(body, back); err != nil || !proto.Equal(back, want) {
			t.Errorf("%s: unmarshal gave %v (%v)", v[0], back, err)
		}
		checkFastDecoders(t, v[0], body, want)
	}
}

// checkFastDecoders holds the codec's copy-free decoders to proto's answer.
func checkFastDecoders(t *testing.T, typ string, body []byte, want proto.Message) {
	var got proto.Message
	var err error
	switch typ {
	case "UploadChunkRequest":
		m := &xferv1.UploadChunkRequest{}
		err, got = decodeUploadChunk(body, m), m
	case "EchoRequest":
		m := &xferv1.EchoRequest{}
		err, got = decodeEcho(body, m), m
	default:
		return
	}
	if err != nil || !proto.Equal(got, want) {
		t.Errorf("%s fast decode: %v (%v)", typ, got, err)
	}
}

// headerOutcome is what a server makes of a request header, in the words
// of headers.vectors.
func headerOutcome(hdr []byte) string {
	method, seq, err := DecodeRequestHeader(hdr)
	if err != nil {
		return "conn_error:" + errs.CodeOf(err).String()
	}
	if e := CheckMethod(method); e != nil {
		return "call_error:" + e.Code.String()
	}
	m := "-"
	if method != "" {
		m = hex.EncodeToString([]byte(method))
	}
	return "ok:" + strconv.FormatUint(seq, 10) + ":" + m
}

func TestHeaderVectors(t *testing.T) {
	lines := testvec.Lines(t, "headers.vectors")
	if len(lines) == 0 {
		t.Fatal("no header vectors")
	}
	for _, v := range lines {
		if got := headerOutcome(testvec.Hex(t, v[0])); got != v[1] {
			t.Errorf("header %s: %s, want %s", v[0], got, v[1])
		}
	}
}

// TestResponseHeaderBound is PROTOCOL.md's promise that a response header
// fits 400 bytes whatever the request's method and the quoted subject.
func TestResponseHeaderBound(t *testing.T) {
	worst := strings.Repeat("\xff", 1000)
	errStr := errs.New(errs.Unimplemented, "unknown method %q", worst).Error()
	n := headerSize(EchoMethod(worst), 1<<63, errStr)
	if n > 400 || EchoMethod(worst) != "" {
		t.Fatalf("response header of %d bytes (error %q)", n, errStr)
	}
	if m := strings.Repeat("é", 32); EchoMethod(m) != m {
		t.Fatalf("a 64-byte method is not echoed")
	}
}
