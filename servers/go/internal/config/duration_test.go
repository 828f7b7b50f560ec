package config

import (
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"xferbench/servers/go/internal/testvec"
)

// vectorMicros reads a duration.vectors expectation, an exact decimal number
// of seconds ("90", "0.0015"), as microseconds, without the parser under test.
func vectorMicros(t *testing.T, s string) int64 {
	t.Helper()
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 6 {
		t.Fatalf("duration.vectors: %q is not whole microseconds", s)
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	f, ferr := strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	if err != nil || ferr != nil {
		t.Fatalf("duration.vectors: bad expectation %q", s)
	}
	return w*1e6 + f
}

// Every duration flag parses with ParseDuration: it must pass
// proto/testdata/duration.vectors, and what FormatDuration prints (the help's
// defaults, the ready line) must read back.
func TestDurationVectors(t *testing.T) {
	lines := testvec.Lines(t, "duration.vectors")
	if len(lines) == 0 {
		t.Fatal("duration.vectors has no vectors")
	}
	for _, l := range lines {
		if len(l) != 2 {
			t.Fatalf("duration.vectors: want 2 fields, got %q", l)
		}
		in, want := testvec.Field(l[0]), l[1]
		got, err := ParseDuration(in)
		if want == "error" {
			if err == nil {
				t.Errorf("ParseDuration(%q) = %v, want an error", in, got)
			}
			continue
		}
		us := vectorMicros(t, want)
		if err != nil || got != time.Duration(us)*time.Microsecond {
			t.Errorf("ParseDuration(%q) = %v, %v; want %dus", in, got, err, us)
			continue
		}
		if back, err := ParseDuration(FormatDuration(got)); err != nil || back != got {
			t.Errorf("FormatDuration(%v) = %q reads back as %v, %v", got, FormatDuration(got), back, err)
		}
	}
}

// Every duration flag and variable of xferd-go takes the grammar, bare seconds too.
func TestDurationFlags(t *testing.T) {
	c, err := Parse([]string{"--read-timeout", "1m30s", "--drain-timeout", "10", "--write-timeout=1.5s"},
		env(map[string]string{"XFERD_UPLOAD_IDLE_TIMEOUT": "1h30m", "XFERD_READ_TIMEOUT": "1"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	l := c.Limits
	if l.ReadTimeout != 90*time.Second || l.DrainTimeout != 10*time.Second || l.WriteTimeout != 1500*time.Millisecond ||
		l.UploadIdleTimeout != 90*time.Minute {
		t.Fatalf("got %+v", l)
	}
	c, err = Parse([]string{"--gogc", "adaptive", "--gogc-interval", "500ms", "--gogc-window", "30"}, env(nil), io.Discard)
	if err != nil || c.GCTune.Interval != 500*time.Millisecond || c.GCTune.Window != 30*time.Second {
		t.Fatalf("--gogc-*: %v %+v", err, c)
	}
	for _, args := range [][]string{{"--read-timeout", "1s1m"}, {"--drain-timeout", "-1s"}, {"--write-timeout", "1S"}} {
		_, err := Parse(args, env(nil), io.Discard)
		if err == nil || !strings.Contains(err.Error(), args[0][1:]) || !strings.Contains(err.Error(), "a bare number is seconds") {
			t.Errorf("%v: error %v does not name the flag and the grammar", args, err)
		}
	}
	_, err = Parse(nil, env(map[string]string{"XFERD_DRAIN_TIMEOUT": "1m30"}), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "XFERD_DRAIN_TIMEOUT") {
		t.Errorf("XFERD_DRAIN_TIMEOUT=1m30: %v", err)
	}
}
