package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

func TestParseFlagsDefaultsAndValues(t *testing.T) {
	c, err := parseFlags([]string{"--method", "download", "--addr", "127.0.0.1:9", "--conns", "2",
		"--inflight", "4", "--chunk", "64KiB", "--name", "gen:1MiB:7", "--rate", "500", "--warmup", "1s",
		"--verify=false"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Conns != 2 || c.Inflight != 4 || c.Chunk != 64<<10 || c.Name != "gen:1048576:7" || c.Rate != 500 ||
		c.Warmup != time.Second || c.Verify || c.Duration != 10*time.Second || c.FileSize != 64<<20 {
		t.Fatalf("parsed %+v", c)
	}
	c, err = parseFlags([]string{"--method", "download", "--name", "gen:4096"}, &bytes.Buffer{})
	if err != nil || c.Name != "gen:4096:0" {
		t.Fatalf("gen without a seed: %v %+v", err, c)
	}
}

func TestParseFlagsErrorsNameTheFlag(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{}, "-method"},
		{[]string{"--method", "nope"}, `-method: want upload, download, echo or meta, got "nope"`},
		{[]string{"--method", "echo", "--conns", "0"}, "-conns: want 1 to 4096, got 0"},
		{[]string{"--method", "echo", "--inflight", "257"}, "-inflight: want 1 to 256"},
		{[]string{"--method", "echo", "--rate", "-1"}, "-rate"},
		{[]string{"--method", "echo", "--duration", "0s"}, "-duration"},
		{[]string{"--method", "echo", "--warmup", "-1s"}, "-warmup"},
		{[]string{"--method", "echo", "--size", "12XB"}, "-size: want bytes"},
		{[]string{"--method", "upload", "--chunk", "0"}, "-chunk: want at least 1"},
		{[]string{"--method", "upload", "--file-size", "2GiB"}, "-file-size"},
		{[]string{"--method", "echo", "--name", "x"}, "-name: only download"},
		{[]string{"--method", "download", "--name", "gen:1MiB:-3"}, "-name: gen:SIZE[:SEED]: seed"},
		{[]string{"--method", "download", "--name", "gen:lots"}, "-name: gen:SIZE[:SEED]: size"},
		{[]string{"--method", "echo", "--addr", "nohost"}, "-addr: want HOST:PORT"},
		{[]string{"--method", "echo", "extra"}, `unexpected argument "extra"`},
		{[]string{"--bogus"}, "-bogus"},
		{[]string{"--conns", "many"}, "-conns"},
		{[]string{"--method", "meta", "--entries", "1025"}, "-entries: want 0 to 1024"},
		{[]string{"--method", "meta", "--entry-size", "0-4"}, "-entry-size: want MIN-MAX"},
		{[]string{"--method", "meta", "--entry-size", "4-257"}, "-entry-size"},
		{[]string{"--method", "meta", "--entry-size", "04-8"}, "-entry-size"},
		{[]string{"--method", "echo", "--codec", "json"}, `-codec: want protobuf or gob, got "json"`},
	}
	for _, tc := range cases {
		_, err := parseFlags(tc.args, &bytes.Buffer{})
		if !errors.Is(err, ErrBadFlag) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want a bad flag naming %q", tc.args, err, tc.want)
		}
	}
}

func TestHelpDocumentsOutputAndModel(t *testing.T) {
	var out bytes.Buffer
	_, err := parseFlags([]string{"--help"}, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"calls_per_s", "mb_per_s", "latency_us", "cpu_seconds", "coordinated omission",
		"-max-calls", "-verify", "-rate", "gen:SIZE[:SEED]", "errors"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help does not mention %q", want)
		}
	}
}

func TestExitStatuses(t *testing.T) {
	var out, errOut bytes.Buffer
	if st := mainStatus([]string{"--method", "x"}, &out, &errOut); st != exitBadFlag {
		t.Fatalf("bad flag: status %d", st)
	}
	if !strings.HasPrefix(errOut.String(), "xferload: error: ") || out.Len() != 0 {
		t.Fatalf("bad flag output: stdout %q stderr %q", out.String(), errOut.String())
	}
	errOut.Reset()
	// Port 1 on loopback: nothing listens there in a test environment.
	if st := mainStatus([]string{"--method", "echo", "--addr", "127.0.0.1:1"}, &out, &errOut); st != exitFailure {
		t.Fatalf("refused: status %d", st)
	}
	if !strings.Contains(errOut.String(), "cannot connect to 127.0.0.1:1") {
		t.Fatalf("refused: stderr %q", errOut.String())
	}
}

func TestParseFlagsTLS(t *testing.T) {
	ca := t.TempDir() + "/ca.pem"
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-resume", "off"}, "only with --tls-ca"},
		{[]string{"--tls-ca", ca}, "--tls-ca: open " + ca},
		{[]string{"--tls-ca", ca, "--tls-resume", "yes"}, `--tls-resume: want on or off, got "yes"`},
	} {
		_, err := parseFlags(append([]string{"--method", "echo"}, bad.args...), &bytes.Buffer{})
		if !errors.Is(err, ErrBadFlag) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want a bad flag naming %q", bad.args, err, bad.want)
		}
	}
	c, err := parseFlags([]string{"--method", "echo"}, &bytes.Buffer{})
	if err != nil || c.TLS != nil {
		t.Fatalf("plaintext by default: %v %+v", err, c.TLS)
	}
}
