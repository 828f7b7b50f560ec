// Package config turns flags and XFERD_* environment variables into the
// server's configuration. A flag on the command line wins over its
// environment variable, which wins over the default.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"xferbench/servers/go/internal/limits"
)

// EnvPrefix starts every flag's environment variable: --max-frame is
// XFERD_MAX_FRAME.
const EnvPrefix = "XFERD_"

// Defaults of the addresses (DESIGN.md ports) and of the grpc-go settings
// (0 keeps grpc-go's own default).
const (
	DefaultGRPCAddr          = "127.0.0.1:50051"
	DefaultFrameAddr         = "127.0.0.1:7070"
	DefaultMetricsAddr       = "127.0.0.1:9101"
	DefaultMaxConcurrentStrm = 1024
	// minMaxFrame: a frame must at least hold its two length fields.
	minMaxFrame = 8
)

// Config is the effective configuration.
type Config struct {
	GRPCAddr, FrameAddr, MetricsAddr string
	Store                            string // "mem" or "disk:DIR"
	Pool                             bool
	GOGC                             *int   // nil: leave the runtime's (GOGC env); -1 is off
	MemLimit                         *int64 // nil: leave the runtime's (GOMEMLIMIT env); MaxInt64 is off
	Limits                           limits.Limits

	GRPCInitialWindowSize     int32
	GRPCInitialConnWindowSize int32
	GRPCReadBufferSize        int
	GRPCWriteBufferSize       int
	GRPCMaxConcurrentStreams  uint32
}

// DiskDir is the directory of a disk store, "" for the memory store.
func (c *Config) DiskDir() string {
	dir, _ := strings.CutPrefix(c.Store, "disk:")
	if dir == c.Store {
		return ""
	}
	return dir
}

// EnvName is the environment variable of a flag.
func EnvName(flagName string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Parse reads args (without the program name) and env (os.Getenv-like).
// Usage and errors go to out. flag.ErrHelp is returned for -h.
func Parse(args []string, getenv func(string) string, out io.Writer) (*Config, error) {
	c := &Config{Store: "mem", Pool: true, Limits: limits.Defaults(), GRPCMaxConcurrentStreams: DefaultMaxConcurrentStrm}
	fs := flag.NewFlagSet("xferd-go", flag.ContinueOnError)
	// The flag package's own messages are silenced: the caller prints one
	// "xferd-go: error: ..." line; only -h prints the usage.
	fs.SetOutput(io.Discard)
	c.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(out)
			fs.PrintDefaults()
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := applyEnv(fs, getenv); err != nil {
		return nil, err
	}
	return c, c.validate()
}

// applyEnv sets each flag not given on the command line from its variable,
// through the flag's own parser so the same validation applies.
func applyEnv(fs *flag.FlagSet, getenv func(string) string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		v := getenv(EnvName(f.Name))
		if err != nil || given[f.Name] || v == "" {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = fmt.Errorf("%s=%q: %v", EnvName(f.Name), v, e)
		}
	})
	return err
}

func (c *Config) register(fs *flag.FlagSet) {
	l := &c.Limits
	fs.StringVar(&c.GRPCAddr, "grpc-addr", DefaultGRPCAddr, "gRPC listen address (port 0: any free port)")
	fs.StringVar(&c.FrameAddr, "frame-addr", DefaultFrameAddr, "frame protocol listen address")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", DefaultMetricsAddr, "/metrics and /debug/pprof listen address")
	fs.StringVar(&c.Store, "store", c.Store, "file store: mem or disk:DIR")
	fs.Func("pool", "sync.Pool chunk buffers: on or off (default on)", func(s string) error {
		return parseOnOff(s, &c.Pool)
	})
	fs.Func("gogc", "GC percent (int) or off; default: the runtime's (GOGC env)", func(s string) error {
		v, err := parseGOGC(s)
		c.GOGC = &v
		return err
	})
	fs.Func("memlimit", "soft memory limit: bytes with optional KiB/MiB/GiB/TiB suffix, or off; default: the runtime's (GOMEMLIMIT env)", func(s string) error {
		v, err := parseMemLimit(s)
		c.MemLimit = &v
		return err
	})
	sizeVar(fs, &l.MaxFileSize, "max-file-size", "largest declared file size, bytes", math.MaxInt64)
	size32Var(fs, &l.MaxFrame, "max-frame", "largest frame_len, bytes (also gRPC's message limits)")
	size32Var(fs, &l.MaxChunk, "max-chunk", "largest chunk size, Read length and Echo payload, bytes")
	fs.Func("max-conns", "open connections per listener: a number or auto (default auto: from RLIMIT_NOFILE)", func(s string) error {
		return parseMaxConns(s, &l.MaxConns)
	})
	fs.IntVar(&l.MaxUploads, "max-uploads", l.MaxUploads, "open uploads, server-wide")
	fs.IntVar(&l.MaxUploadsPerConn, "max-uploads-per-conn", l.MaxUploadsPerConn, "open uploads begun on one connection")
	sizeVar(fs, &l.MaxStagedBytes, "max-staged-bytes", "declared sizes of all open uploads, bytes", math.MaxInt64)
	size32Var(fs, &l.MinChunk, "min-chunk", "smallest upload chunk size unless one chunk holds the file, bytes")
	fs.DurationVar(&l.ReadTimeout, "read-timeout", l.ReadTimeout, "time for a begun frame to arrive whole")
	fs.DurationVar(&l.UploadIdleTimeout, "upload-idle-timeout", l.UploadIdleTimeout, "an upload with no call for this long is aborted")
	fs.IntVar(&l.MaxConnCalls, "max-conn-calls", l.MaxConnCalls, "outstanding calls per connection before reading pauses")
	sizeVar(fs, &l.MaxConnUnsent, "max-conn-unsent", "unwritten response bytes per connection before reading pauses", math.MaxInt64)
	fs.DurationVar(&l.WriteTimeout, "write-timeout", l.WriteTimeout, "a response the client does not take for this long closes its connection")
	fs.DurationVar(&l.DrainTimeout, "drain-timeout", l.DrainTimeout, "calls in flight at SIGTERM finish within this, then connections close")
	window := func(dst *int32) func(string) error {
		return func(s string) error {
			v, err := parseSize(s, math.MaxInt32)
			*dst = int32(v)
			return err
		}
	}
	fs.Func("grpc-initial-window-size", "grpc-go stream window, bytes (0: grpc-go default)", window(&c.GRPCInitialWindowSize))
	fs.Func("grpc-initial-conn-window-size", "grpc-go connection window, bytes (0: grpc-go default)", window(&c.GRPCInitialConnWindowSize))
	intSizeVar(fs, &c.GRPCReadBufferSize, "grpc-read-buffer-size", "grpc-go read buffer, bytes (0: grpc-go default)")
	intSizeVar(fs, &c.GRPCWriteBufferSize, "grpc-write-buffer-size", "grpc-go write buffer, bytes (0: grpc-go default)")
	fs.Func("grpc-max-concurrent-streams", fmt.Sprintf("streams per gRPC connection (default %d)", DefaultMaxConcurrentStrm), func(s string) error {
		v, err := strconv.ParseUint(s, 10, 32)
		c.GRPCMaxConcurrentStreams = uint32(v)
		return err
	})
}

func sizeVar(fs *flag.FlagSet, dst *uint64, name, usage string, limit uint64) {
	fs.Func(name, fmt.Sprintf("%s (default %d)", usage, *dst), func(s string) error {
		v, err := parseSize(s, limit)
		*dst = v
		return err
	})
}

func size32Var(fs *flag.FlagSet, dst *uint32, name, usage string) {
	fs.Func(name, fmt.Sprintf("%s (default %d)", usage, *dst), func(s string) error {
		v, err := parseSize(s, math.MaxUint32)
		*dst = uint32(v)
		return err
	})
}

func intSizeVar(fs *flag.FlagSet, dst *int, name, usage string) {
	fs.Func(name, usage, func(s string) error {
		v, err := parseSize(s, math.MaxInt32)
		*dst = int(v)
		return err
	})
}

func (c *Config) validate() error {
	l := c.Limits
	var problems []string
	check := func(bad bool, format string, args ...any) {
		if bad {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	check(c.Store != "mem" && c.DiskDir() == "", "--store %q: want mem or disk:DIR", c.Store)
	check(strings.ContainsAny(c.Store, " \t\n"), "--store %q: the directory must not contain white space (the startup line is space-separated)", c.Store)
	check(l.MaxFrame < minMaxFrame, "--max-frame %d: must be at least %d", l.MaxFrame, minMaxFrame)
	check(l.MaxChunk == 0, "--max-chunk must be at least 1")
	check(l.MaxConnCalls < 1, "--max-conn-calls %d: must be at least 1", l.MaxConnCalls)
	check(l.MaxConnUnsent < 1, "--max-conn-unsent must be at least 1")
	check(l.WriteTimeout <= 0, "--write-timeout %v: must be positive", l.WriteTimeout)
	check(l.DrainTimeout < 0, "--drain-timeout %v: must not be negative", l.DrainTimeout)
	check(l.MaxUploads < 1, "--max-uploads %d: must be at least 1", l.MaxUploads)
	check(l.MaxUploadsPerConn < 1, "--max-uploads-per-conn %d: must be at least 1", l.MaxUploadsPerConn)
	check(l.MaxStagedBytes < 1, "--max-staged-bytes must be at least 1")
	check(l.MinChunk < 1, "--min-chunk must be at least 1")
	check(l.ReadTimeout <= 0, "--read-timeout %v: must be positive", l.ReadTimeout)
	check(l.UploadIdleTimeout <= 0, "--upload-idle-timeout %v: must be positive", l.UploadIdleTimeout)
	check(c.GRPCMaxConcurrentStreams == 0, "--grpc-max-concurrent-streams must be at least 1")
	for _, a := range []struct{ name, v string }{{"grpc-addr", c.GRPCAddr}, {"frame-addr", c.FrameAddr}, {"metrics-addr", c.MetricsAddr}} {
		check(!strings.Contains(a.v, ":"), "--%s %q: want HOST:PORT", a.name, a.v)
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// parseMaxConns reads "auto" (limits.AutoConns, resolved at start from
// RLIMIT_NOFILE) or a positive count.
func parseMaxConns(s string, dst *int) error {
	if s == "auto" {
		*dst = limits.AutoConns
		return nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		return fmt.Errorf("want auto or a positive integer, got %q", s)
	}
	*dst = v
	return nil
}

func parseOnOff(s string, dst *bool) error {
	switch s {
	case "on":
		*dst = true
	case "off":
		*dst = false
	default:
		return fmt.Errorf("want on or off, got %q", s)
	}
	return nil
}

func parseGOGC(s string) (int, error) {
	if s == "off" {
		return -1, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("want a non-negative integer or off, got %q", s)
	}
	return v, nil
}

func parseMemLimit(s string) (int64, error) {
	if s == "off" {
		return math.MaxInt64, nil
	}
	v, err := parseSize(s, math.MaxInt64)
	return int64(v), err
}

// sizeSuffixes are the binary units accepted after a byte count, as
// GOMEMLIMIT spells them.
var sizeSuffixes = []struct {
	suffix string
	mult   uint64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// parseSize reads "N" or "N<unit>" with a binary unit, at most limit.
func parseSize(s string, limit uint64) (uint64, error) {
	num, mult := s, uint64(1)
	for _, u := range sizeSuffixes {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = n, u.mult
			break
		}
	}
	v, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want bytes with optional KiB/MiB/GiB/TiB suffix, got %q", s)
	}
	if v > limit/mult {
		return 0, fmt.Errorf("%q exceeds the limit %d", s, limit)
	}
	return v * mult, nil
}

// Getenv is os.Getenv, named for callers that pass it to Parse.
var Getenv = os.Getenv
