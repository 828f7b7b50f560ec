// Command xferd-go is the Go file-transfer server of xferbench: gRPC and the
// frame protocol over one store, with Prometheus metrics and pprof.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"google.golang.org/grpc"

	"xferbench/servers/go/internal/config"
	"xferbench/servers/go/internal/metrics"
	"xferbench/servers/go/internal/server"
)

// version is stamped at build time with -ldflags "-X main.version=..." from
// `git describe --always --dirty` (the top-level Makefile); "unknown" otherwise.
var version = "unknown"

// Exit statuses of PROTOCOL.md's process interface.
const (
	exitOK      = 0
	exitFailure = 1
	exitBadFlag = 2
)

func main() { os.Exit(run()) }

func run() int {
	cfg, err := config.Parse(os.Args[1:], os.Getenv, os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if errors.Is(err, config.ErrVersion) {
		fmt.Printf("xferd-go %s (%s, grpc-go %s)\n", version, runtime.Version(), grpc.Version)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "xferd-go: error: %v\n", err)
		return exitBadFlag
	}
	// Debug lines (each --gogc adaptive change) go to stderr after the ready line.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel})))
	gogc, memlimit := server.ApplyRuntime(cfg)
	pool := map[bool]string{true: "on", false: "off"}[cfg.Pool]
	srv, err := server.Start(cfg, metrics.BuildInfo{Version: version, Pool: pool, GOGC: gogc, MemLimit: memlimit, FrameCodec: cfg.FrameCodec})
	if err != nil {
		fmt.Fprintf(os.Stderr, "xferd-go: error: %v\n", err)
		return exitFailure
	}
	// Handle SIGTERM before announcing readiness: a client may stop the server as soon as it reads the line.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	fmt.Fprintln(os.Stderr, srv.ReadyLine(version, gogc, memlimit))

	status := exitOK
	select {
	case <-sigs:
	case err := <-srv.Err():
		fmt.Fprintf(os.Stderr, "xferd-go: error: %v\n", err)
		status = exitFailure
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Limits.DrainTimeout)
	defer cancel()
	srv.Shutdown(ctx)
	return status
}
