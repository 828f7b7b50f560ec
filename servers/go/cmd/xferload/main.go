// Command xferload is a load driver for the frame protocol
// (proto/PROTOCOL.md): C connections with K pipelined calls each, every
// answer checked, latencies in an HDR histogram, one JSON object of figures
// on stdout. `xferload --help` documents the flags and the output.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
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
	runID := strconv.FormatInt(time.Now().UnixNano(), 36)
	res, err := run(cfg, runID)
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
