package errs

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// QuoteMax is how many bytes of a subject an error quotes (PROTOCOL.md
// "Quoting"): with it every error string fits a response header.
const QuoteMax = 64

// Quote is PROTOCOL.md's quoting of the subject of an error: at most
// QuoteMax bytes, never cutting a UTF-8 character, escaped so the result is
// valid UTF-8 whatever the subject holds, and "..." after the closing quote
// when the subject was cut. proto/testdata/quote.vectors pins it down.
func Quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			n = 1 // not part of a valid character: escaped byte by byte
		}
		if i+n > QuoteMax {
			break
		}
		switch c := s[i]; {
		case n > 1:
			b.WriteString(s[i : i+n])
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, `\x%02x`, c)
		}
		i += n
	}
	b.WriteByte('"')
	if i < len(s) {
		b.WriteString("...")
	}
	return b.String()
}

// subject is a string argument of New: %q formats it with Quote, so every
// quoted subject in an error follows the protocol's one quoting, including
// those of packages that only call New; other verbs print it as a string.
type subject string

// Format implements fmt.Formatter.
func (s subject) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		_, _ = io.WriteString(f, Quote(string(s))) // fmt.State writes to a buffer
		return
	}
	fmt.Fprintf(f, fmt.FormatString(f, verb), string(s))
}
