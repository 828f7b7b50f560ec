package config

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"xferbench/servers/go/internal/testvec"
)

// Every size flag parses with ParseSize: it must pass proto/testdata/size.vectors.
func TestSizeVectors(t *testing.T) {
	lines := testvec.Lines(t, "size.vectors")
	if len(lines) == 0 {
		t.Fatal("size.vectors has no vectors")
	}
	for _, l := range lines {
		if len(l) != 2 {
			t.Fatalf("size.vectors: want 2 fields, got %q", l)
		}
		in, want := testvec.Field(l[0]), l[1]
		got, err := ParseSize(in, math.MaxUint64)
		if want == "error" {
			if err == nil {
				t.Errorf("ParseSize(%q) = %d, want an error", in, got)
			}
			continue
		}
		n, perr := strconv.ParseUint(want, 10, 64)
		if perr != nil {
			t.Fatalf("size.vectors: bad expectation %q", want)
		}
		if err != nil || got != n {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, n)
		}
	}
}

// A flag's own bound is reported with the value that broke it.
func TestSizeOverFlagLimit(t *testing.T) {
	_, err := Parse([]string{"--max-frame", "4GiB"}, env(nil), nil)
	if err == nil {
		t.Fatal("--max-frame 4GiB accepted (its limit is 2^32-1)")
	}
	if want := `"4GiB" exceeds the limit 4294967295`; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
}
