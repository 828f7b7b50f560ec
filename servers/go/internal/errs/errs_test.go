package errs

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"xferbench/servers/go/internal/testvec"
)

func TestErrorStringAndStatus(t *testing.T) {
	e := New(NotFound, "file %q not found", "missing.bin")
	if got, want := e.Error(), `not_found: file "missing.bin" not found`; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	st, ok := status.FromError(e)
	if !ok || st.Code() != codes.NotFound || st.Message() != `file "missing.bin" not found` {
		t.Fatalf("status = %v %q", st.Code(), st.Message())
	}
}

func TestCodeOf(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{New(DataLoss, "x"), "data_loss"},
		{status.Error(codes.Canceled, "gone"), "cancelled"},
		{errors.New("plain"), "internal"},
	}
	for _, c := range cases {
		if got := CodeOf(c.err).String(); got != c.want {
			t.Errorf("CodeOf(%v) = %s, want %s", c.err, got, c.want)
		}
	}
	if got := CodeOfString("unimplemented: unknown method \"X\""); got != Unimplemented {
		t.Errorf("CodeOfString = %v", got)
	}
	if got := CodeOfString("rpc: whatever"); got != Internal {
		t.Errorf("CodeOfString(rpc:) = %v", got)
	}
}

func TestQuoteVectors(t *testing.T) {
	lines := testvec.Lines(t, "quote.vectors")
	if len(lines) == 0 {
		t.Fatal("no quote vectors")
	}
	for _, v := range lines {
		in := string(testvec.Hex(t, v[0]))
		if got := Quote(in); got != v[1] {
			t.Errorf("Quote(%x) = %s, want %s", in, got, v[1])
		}
		if got := New(NotFound, "file %q not found", in).Msg; got != "file "+v[1]+" not found" {
			t.Errorf("New with %%q of %x = %s", in, got)
		}
	}
}

// FuzzQuote holds Quote to the promises of PROTOCOL.md "Quoting" for any
// subject: valid UTF-8, bounded, "..." exactly when bytes were left out.
func FuzzQuote(f *testing.F) {
	for _, v := range testvec.Lines(f, "quote.vectors") {
		f.Add(testvec.Hex(f, v[0]))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		q := Quote(string(in))
		if !utf8.ValidString(q) || len(q) > 2+4*QuoteMax+3 {
			t.Fatalf("Quote(%x) = %q: not UTF-8 or too long", in, q)
		}
		// At most QuoteMax bytes are quoted, and a subject that fits is whole.
		want := `"`
		if len(in) > QuoteMax {
			want = `"...`
		}
		if !strings.HasPrefix(q, `"`) || !strings.HasSuffix(q, want) {
			t.Fatalf("Quote(%x) = %q: want it to end with %s", in, q, want)
		}
	})
}
