package meta

import (
	"hash/crc32"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/errs"
	"xferbench/servers/go/internal/testvec"
	"xferbench/servers/go/internal/wirecheck"
)

// outcome is what a server answers to body, in meta.vectors' notation.
func outcome(t *testing.T, body []byte, maxEntries int) string {
	t.Helper()
	var req xferv1.MetaRequest
	if err := wirecheck.Unmarshal(body, &req); err != nil {
		return "invalid_argument:" + MalformedMessage(err)
	}
	resp, err := Answer(&req, maxEntries)
	if err != nil {
		return errs.CodeOf(err).String() + ":" + err.(*errs.Error).Msg
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(resp)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	if len(b) == 0 {
		return "ok:-"
	}
	return "ok:" + bytesHex(b)
}

func bytesHex(b []byte) string {
	const digits = "0123456789abcdef"
	var s strings.Builder
	for _, c := range b {
		s.WriteByte(digits[c>>4])
		s.WriteByte(digits[c&15])
	}
	return s.String()
}

func TestMetaVectors(t *testing.T) {
	rows := testvec.Lines(t, "meta.vectors")
	if len(rows) < 10 {
		t.Fatalf("meta.vectors has %d rows", len(rows))
	}
	for _, v := range rows {
		limit, err := strconv.Atoi(v[1])
		if err != nil {
			t.Fatalf("%s: bad max_entries %q", v[0], v[1])
		}
		got := outcome(t, testvec.Hex(t, v[2]), limit)
		want := v[3]
		if strings.HasPrefix(want, "ok:") {
			if got != want {
				t.Errorf("%s: got %s, want %s", v[0], got, want)
			}
			continue
		}
		code, what, _ := strings.Cut(want, ":")
		if !strings.HasPrefix(got, code+":") || !strings.Contains(got, what) {
			t.Errorf("%s: got %q, want code %s naming %q", v[0], got, code, what)
		}
	}
}

func TestDigestCheckValue(t *testing.T) {
	// key "12345678", value "9" hashes "12345678\x009\x00"; compare with one pass.
	e := []*xferv1.MetaEntry{{Key: "12345678", Value: "9"}}
	want := crc32.ChecksumIEEE([]byte("12345678\x009\x00"))
	if got := Digest(e); got != want {
		t.Fatalf("Digest = %08x, want %08x", got, want)
	}
	if Digest(nil) != 0 {
		t.Fatal("digest of no entries must be 0")
	}
}

func TestAnswerDoesNotAliasRequest(t *testing.T) {
	req := &xferv1.MetaRequest{Entries: []*xferv1.MetaEntry{{Key: "b", Value: "2"}, {Key: "a", Value: "1"}}}
	resp, err := Answer(req, 2)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Entries[0] == req.Entries[1] {
		t.Fatal("response entries must be new messages built from the map")
	}
	if _, err := Answer(req, 1); err == nil || !strings.Contains(err.Error(), "limit 1 (--max-meta-entries)") {
		t.Fatalf("over the limit: %v", err)
	}
}
