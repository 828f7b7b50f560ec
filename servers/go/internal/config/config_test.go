package config

import (
	"errors"
	"flag"
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	c, err := Parse(nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.GRPCAddr != DefaultGRPCAddr || c.Limits.MaxFrame != 8<<20 || c.Limits.MaxChunk != 4<<20 ||
		c.Limits.MaxFileSize != 1<<30 || c.Limits.ReadTimeout != 10*time.Second || !c.Pool ||
		c.GOGC != nil || c.MemLimit != nil || c.Store != "mem" || c.Limits.MaxConns != 0 ||
		c.Limits.MaxConnCalls != 256 || c.Limits.MaxConnUnsent != 32<<20 || c.Limits.DrainTimeout != 5*time.Second {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestFlagBeatsEnv(t *testing.T) {
	c, err := Parse([]string{"--max-frame", "1MiB", "--pool=off"},
		env(map[string]string{"XFERD_MAX_FRAME": "99", "XFERD_MAX_CHUNK": "64KiB", "XFERD_GOGC": "off",
			"XFERD_MEMLIMIT": "512MiB", "XFERD_STORE": "disk:/tmp/x"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.MaxFrame != 1<<20 || c.Limits.MaxChunk != 64<<10 || c.Pool || *c.GOGC != -1 ||
		*c.MemLimit != 512<<20 || c.DiskDir() != "/tmp/x" {
		t.Fatalf("got %+v", c)
	}
}

func TestFrameCodec(t *testing.T) {
	c, err := Parse(nil, env(nil), io.Discard)
	if err != nil || c.FrameCodec != CodecProtobuf {
		t.Fatalf("default: %v %+v", err, c)
	}
	if c, err = Parse(nil, env(map[string]string{"XFERD_FRAME_CODEC": "gob"}), io.Discard); err != nil || c.FrameCodec != CodecGob {
		t.Fatalf("env: %v %+v", err, c)
	}
	_, err = Parse([]string{"--frame-codec", "json"}, env(nil), io.Discard)
	if err == nil || !strings.Contains(err.Error(), `--frame-codec "json": want protobuf or gob`) {
		t.Fatalf("bad value: %v", err)
	}
}

func TestConnFlags(t *testing.T) {
	c, err := Parse([]string{"--max-conns", "7", "--max-conn-unsent", "1MiB"},
		env(map[string]string{"XFERD_MAX_CONN_CALLS": "3", "XFERD_DRAIN_TIMEOUT": "250ms"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	l := c.Limits
	if l.MaxConns != 7 || l.MaxConnUnsent != 1<<20 || l.MaxConnCalls != 3 || l.DrainTimeout != 250*time.Millisecond {
		t.Fatalf("got %+v", l)
	}
	if c, err = Parse([]string{"--max-conns=auto"}, env(nil), io.Discard); err != nil || c.Limits.MaxConns != 0 {
		t.Fatalf("auto: %v %+v", err, c)
	}
}

func TestBad(t *testing.T) {
	for _, args := range [][]string{
		{"--pool", "maybe"}, {"--gogc", "-5"}, {"--memlimit", "1XB"}, {"--max-frame", "4"},
		{"--store", "s3"}, {"--max-conns", "0"}, {"--read-timeout", "0s"}, {"--nope"},
		{"--max-frame", "5GiB"}, {"extra"}, {"--max-conns", "lots"}, {"--max-conn-calls", "0"},
		{"--write-timeout", "0s"}, {"--memlimit", "1TiB"}, {"--max-chunk", "64B"}, {"--version=maybe"},
	} {
		if _, err := Parse(args, env(nil), io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	if _, err := Parse(nil, env(map[string]string{"XFERD_MAX_CONNS": "many"}), io.Discard); err == nil {
		t.Error("bad env accepted")
	}
	if v, _ := parseMemLimit("off"); v != math.MaxInt64 {
		t.Error("memlimit off")
	}
}

func TestUploadLimits(t *testing.T) {
	c, err := Parse([]string{"--min-chunk", "4KiB"},
		env(map[string]string{"XFERD_MAX_UPLOADS_PER_CONN": "8", "XFERD_MAX_STAGED_BYTES": "1GiB", "XFERD_MIN_CHUNK": "1"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Limits; l.MaxUploadsPerConn != 8 || l.MaxStagedBytes != 1<<30 || l.MinChunk != 4<<10 {
		t.Fatalf("got %+v", l)
	}
	d, _ := Parse(nil, env(nil), io.Discard)
	if l := d.Limits; l.MaxUploadsPerConn != 64 || l.MaxStagedBytes != 4<<30 || l.MinChunk != 1<<10 {
		t.Fatalf("defaults %+v", l)
	}
	for _, args := range [][]string{{"--max-uploads-per-conn", "0"}, {"--max-staged-bytes", "0"}, {"--min-chunk", "0"}} {
		if _, err := Parse(args, env(nil), io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

func TestVersionAndHelp(t *testing.T) {
	var help strings.Builder
	if _, err := Parse([]string{"--help"}, env(nil), &help); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	for _, want := range []string{"XFERD_MAX_FRAME", "(default 8388608)", "--version", "GOMEMLIMIT"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("--help does not mention %q:\n%s", want, help.String())
		}
	}
	if _, err := Parse([]string{"--pool=off", "--version"}, env(nil), io.Discard); !errors.Is(err, ErrVersion) {
		t.Fatalf("--version: %v", err)
	}
	// --version is not a setting: no environment variable turns it on.
	if _, err := Parse(nil, env(map[string]string{"XFERD_VERSION": "true"}), io.Discard); err != nil {
		t.Fatalf("XFERD_VERSION: %v", err)
	}
}

func TestMaxMetaEntries(t *testing.T) {
	c, err := Parse(nil, env(nil), io.Discard)
	if err != nil || c.Limits.MaxMetaEntries != 1024 {
		t.Fatalf("default: %v %d", err, c.Limits.MaxMetaEntries)
	}
	c, err = Parse([]string{"--max-meta-entries", "8"}, env(map[string]string{"XFERD_MAX_META_ENTRIES": "9"}), io.Discard)
	if err != nil || c.Limits.MaxMetaEntries != 8 {
		t.Fatalf("flag over env: %v %d", err, c.Limits.MaxMetaEntries)
	}
	if _, err := Parse([]string{"--max-meta-entries", "-1"}, env(nil), io.Discard); err == nil {
		t.Fatal("--max-meta-entries -1 accepted")
	}
}

func TestTLSFlags(t *testing.T) {
	c, err := Parse(nil, env(nil), io.Discard)
	if err != nil || c.TLS.Enabled() || !c.TLS.Tickets || c.TLS.HandshakeTimeout != DefaultTLSHandshakeTimeout {
		t.Fatalf("defaults: %v %+v", err, c.TLS)
	}
	c, err = Parse([]string{"--tls-frame-addr", "127.0.0.1:0", "--tls-cert", "c.pem", "--tls-tickets", "off"},
		env(map[string]string{"XFERD_TLS_KEY": "k.pem", "XFERD_TLS_HANDSHAKE_TIMEOUT": "250ms", "XFERD_TLS_GRPC_ADDR": "127.0.0.1:0"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := (TLS{GRPCAddr: "127.0.0.1:0", FrameAddr: "127.0.0.1:0", CertFile: "c.pem", KeyFile: "k.pem",
		HandshakeTimeout: 250 * time.Millisecond}); c.TLS != want || c.TLS.Listeners() != 2 {
		t.Fatalf("got %+v, want %+v", c.TLS, want)
	}
	for _, bad := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--tls-cert", "c.pem"}, nil, "--tls-cert: only with --tls-grpc-addr or --tls-frame-addr"},
		{nil, map[string]string{"XFERD_TLS_TICKETS": "off"}, "--tls-tickets: only with"},
		{[]string{"--tls-grpc-addr", "127.0.0.1:0"}, nil, "needs --tls-cert and --tls-key"},
		{[]string{"--tls-frame-addr", "7443", "--tls-cert", "c", "--tls-key", "k"}, nil, `--tls-frame-addr "7443": want HOST:PORT`},
		{[]string{"--tls-frame-addr", ":0", "--tls-cert", "c", "--tls-key", "k", "--tls-handshake-timeout", "0"}, nil, "--tls-handshake-timeout 0s: must be positive"},
		{[]string{"--tls-frame-addr", ":0", "--tls-tickets", "maybe"}, nil, `want on or off, got "maybe"`},
	} {
		if _, err := Parse(bad.args, env(bad.env), io.Discard); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v %v: error %v, want %q", bad.args, bad.env, err, bad.want)
		}
	}
}
