// Package testvec reads the shared test vectors of proto/testdata for unit
// tests: TAB-separated fields, '#' comment lines, '-' for an empty field.
package testvec

import (
	"bufio"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dir finds proto/testdata by walking up from the test's directory, so
// tests work from any package depth.
func dir(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatalf("testvec: %v", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		cand := filepath.Join(d, "proto", "testdata")
		if st, err := os.Stat(cand); err == nil && st.IsDir() {
			return cand
		}
		if filepath.Dir(d) == d {
			t.Fatalf("testvec: no proto/testdata above %s", wd)
		}
	}
}

// Lines returns the vectors of one file as fields.
func Lines(t testing.TB, name string) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir(t), name))
	if err != nil {
		t.Fatalf("testvec: %v", err)
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, strings.Split(line, "\t"))
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("testvec: reading %s: %v", name, err)
	}
	return out
}

// Field maps "-" to the empty string.
func Field(s string) string {
	if s == "-" {
		return ""
	}
	return s
}

// Hex decodes a hex field ("-" is empty).
func Hex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(Field(s))
	if err != nil {
		t.Fatalf("testvec: bad hex %q: %v", s, err)
	}
	return b
}
