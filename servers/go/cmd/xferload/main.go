// Command xferload is a load driver for the frame protocol
// (proto/PROTOCOL.md): C connections with K pipelined calls each, every
// answer checked, latencies in an HDR histogram, one JSON object of figures
// on stdout. `xferload --help` documents the flags and the output.
package main

import (
	"os/signal"
	"syscall"

	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"io"
	"os"
	"strconv"
	"time"
)

const (
	exitOK      = 0
	exitFailure = 1
	exitBadFlag = 2
)

func main() { os.Exit(mainStatus(os.Args[1:], os.Stdout, os.Stderr)) }

func mainStatus(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		// The flag package already printed its own parse errors with the usage.
		fmt.Fprintf(stderr, "xferload: error: %v\n", err)
		return exitBadFlag
	}
	opts, err := processOpts(cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "xferload: error: %v\n", err)
		return exitFailure
	}
	runID := strconv.FormatInt(time.Now().UnixNano(), 36)
	res, err := run(cfg, runID, opts)
	if err != nil {
		fmt.Fprintf(stderr, "xferload: error: %v\n", err)
		return exitFailure
	}
	enc := json.NewEncoder(stdout)
	if err := enc.Encode(res); err != nil {
		fmt.Fprintf(stderr, "xferload: error: writing the result: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// processOpts ties the run to the process: SIGTERM and SIGINT halt it (calls in flight finish, the JSON is
// printed, exit 0), and with --metrics-addr its families are served from before the first call.
func processOpts(cfg *Config, stderr io.Writer) (runOpts, error) {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	opts := runOpts{stop: stop}
	if cfg.MetricsAddr == "" {
		return opts, nil
	}
	reg := prometheus.NewRegistry()
	opts.obs = newClientMetrics(reg, cfg)
	addr, err := serveMetrics(cfg.MetricsAddr, reg)
	if err != nil {
		return opts, err
	}
	fmt.Fprintf(stderr, "xferload metrics=%s\n", addr)
	return opts, nil
}
