// Command grpcxfer drives xferd-go's gRPC Upload or Download streams as
// fast as they go, on C connections with S streams each, and prints one
// JSON object: method, conns, streams, seconds, calls (whole transfers that
// passed their checks), bytes, mb_per_s (10^6 B/s), errors and cpu_cores
// (its own user+system CPU over the run). It is the bench's gRPC transfer
// client: lean enough that the server, not the client, sets the pace.
package main

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"xferbench/servers/go/internal/config"
	"xferbench/servers/go/internal/tlsx"
)

// Config is one run's parsed command line.
type Config struct {
	Addr     string
	Method   string
	Conns    int
	Streams  int
	Duration time.Duration
	FileSize uint64
	Chunk    uint64
	Name     string // download: a stored name or gen:SIZE[:SEED]; "": upload one of FileSize first
	// TLS, when set, makes every connection TLS (--tls-ca), all sharing tlsConfig and its session cache.
	TLS       *tlsx.ClientOptions
	tlsConfig *tls.Config
}

func main() { os.Exit(mainStatus(os.Args[1:], os.Stdout, os.Stderr)) }

func mainStatus(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "grpcxfer: error: %v\n", err)
		return 2
	}
	res, err := run(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "grpcxfer: error: %v\n", err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		fmt.Fprintf(stderr, "grpcxfer: error: writing the result: %v\n", err)
		return 1
	}
	return 0
}

// sizeFlag reads a flag in the project's one size grammar (PROTOCOL.md).
type sizeFlag struct{ v *uint64 }

func (f sizeFlag) String() string {
	if f.v == nil {
		return ""
	}
	return fmt.Sprint(*f.v)
}

func (f sizeFlag) Set(s string) error {
	v, err := config.ParseSize(s, 1<<30)
	if err == nil && v == 0 {
		err = errors.New("must be at least 1 byte")
	}
	*f.v = v
	return err
}

// durationFlag reads a flag in the project's one duration grammar.
type durationFlag struct{ v *time.Duration }

func (f durationFlag) String() string {
	if f.v == nil {
		return ""
	}
	return config.FormatDuration(*f.v)
}

func (f durationFlag) Set(s string) error {
	v, err := config.ParseDuration(s)
	if err == nil && v <= 0 {
		err = errors.New("must be positive")
	}
	*f.v = v
	return err
}

func parseFlags(args []string, out io.Writer) (*Config, error) {
	cfg := &Config{Conns: 1, Streams: 4, Duration: 5 * time.Second, FileSize: 8 << 20, Chunk: 1 << 20}
	fs := flag.NewFlagSet("grpcxfer", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.Addr, "addr", "", "xferd-go's gRPC address, `HOST:PORT`")
	fs.StringVar(&cfg.Method, "method", "", "upload or download")
	fs.IntVar(&cfg.Conns, "conns", cfg.Conns, "gRPC connections")
	fs.IntVar(&cfg.Streams, "streams", cfg.Streams, "streams in flight on each connection")
	fs.Var(durationFlag{&cfg.Duration}, "duration", "how long to run, `DURATION` (transfers in flight then finish)")
	fs.Var(sizeFlag{&cfg.FileSize}, "file-size", "bytes per uploaded file, `SIZE`")
	fs.Var(sizeFlag{&cfg.Chunk}, "chunk", "bytes per chunk message, `SIZE`")
	fs.StringVar(&cfg.Name, "name", "", "download: the file to read (a stored name or gen:SIZE[:SEED]); default: one of --file-size uploaded first")
	tlsFlags := tlsx.RegisterClientFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var err error
	if cfg.TLS, err = tlsFlags.Options(fs); err != nil {
		return nil, err
	}
	if cfg.tlsConfig, err = tlsConfig(cfg); err != nil {
		return nil, err
	}
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case cfg.Addr == "":
		return nil, errors.New("--addr is required")
	case cfg.Method != "upload" && cfg.Method != "download":
		return nil, fmt.Errorf("--method must be upload or download, not %q", cfg.Method)
	case cfg.Conns < 1 || cfg.Streams < 1:
		return nil, errors.New("--conns and --streams must be at least 1")
	case cfg.Chunk > cfg.FileSize:
		cfg.Chunk = cfg.FileSize
	}
	return cfg, nil
}
