package main

import (
	"context"
	"testing"
	"time"

	"xferbench/servers/go/internal/config"
	"xferbench/servers/go/internal/metrics"
	"xferbench/servers/go/internal/server"
)

// startServer runs xferd-go's own server in the test process (the Python
// suite tests/bench drives the real binaries of both servers), so the
// driver's pipelining runs under the race detector.
func startServer(t *testing.T) string {
	t.Helper()
	cfg, err := config.Parse([]string{"--grpc-addr", "127.0.0.1:0", "--frame-addr", "127.0.0.1:0",
		"--metrics-addr", "127.0.0.1:0"}, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start(cfg, metrics.BuildInfo{Version: "test", Pool: "on", GOGC: "100", MemLimit: "off"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	_, frameAddr, _ := srv.Addrs()
	return frameAddr
}

func TestRunEveryMethodPipelined(t *testing.T) {
	addr := startServer(t)
	for _, args := range [][]string{
		{"--method", "echo", "--size", "100", "--max-calls", "500"},
		{"--method", "upload", "--chunk", "64KiB", "--file-size", "256KiB", "--max-calls", "120"},
		{"--method", "download", "--chunk", "64KiB", "--file-size", "256KiB", "--max-calls", "120"},
		{"--method", "download", "--chunk", "64KiB", "--name", "gen:256KiB:3", "--max-calls", "120"},
		{"--method", "echo", "--rate", "2000", "--duration", "200ms"},
	} {
		cfg, err := parseFlags(append([]string{"--addr", addr, "--conns", "2", "--inflight", "3"}, args...), nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := run(cfg, "t", runOpts{})
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if r.Calls == 0 || len(r.Errors) != 0 || r.Bytes == 0 {
			t.Fatalf("%v: %+v", args, r)
		}
		if cfg.MaxCalls > 0 && r.Calls != cfg.MaxCalls {
			t.Errorf("%v: %d calls, want --max-calls %d", args, r.Calls, cfg.MaxCalls)
		}
		// 400 calls are due in 200 ms at 2000/s: each is made or counted missed (how many are missed
		// depends on the machine's load, so it is not asserted).
		if cfg.Rate > 0 && r.Calls+r.MissedCalls != 400 {
			t.Errorf("%v: %d calls + %d missed in 200 ms at 2000/s, want 400", args, r.Calls, r.MissedCalls)
		}
	}
}

func TestRunCountsServerErrorsByCode(t *testing.T) {
	cfg, err := parseFlags([]string{"--addr", startServer(t), "--method", "download", "--name", "missing",
		"--max-calls", "7"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := run(cfg, "t", runOpts{})
	if err != nil || r.Calls != 7 || r.Errors["not_found"] != 7 || len(r.Errors) != 1 {
		t.Fatalf("%+v %v", r, err)
	}
}
