// Package config turns flags and XFERD_* environment variables into the
// server's configuration. A flag on the command line wins over its
// environment variable, which wins over the default.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"

	"xferbench/servers/go/internal/gctune"
	"xferbench/servers/go/internal/limits"
)

// EnvPrefix starts every flag's environment variable: --max-frame is
// XFERD_MAX_FRAME.
const EnvPrefix = "XFERD_"

// Defaults of the addresses (the ports of docs/DESIGN.md) and of the grpc-go settings
// (0 keeps grpc-go's own default).
const (
	DefaultGRPCAddr          = "127.0.0.1:50051"
	DefaultFrameAddr         = "127.0.0.1:7070"
	DefaultMetricsAddr       = "127.0.0.1:9101"
	DefaultMaxConcurrentStrm = 1024
	// DefaultGRPCBufferSize is the gRPC read and write buffer: grpc-go's 32 KiB makes a 1 MiB chunk 32 reads
	// or writes; 256 KiB moved about 1.5x the MB/s at the same CPU per GB (BENCHMARKS.md, "xferd-go gRPC"). The
	// windows stay grpc-go's (dynamic, BDP-estimated): fixed 4/16 MiB windows measured no better.
	DefaultGRPCBufferSize = 256 << 10
	// DefaultGRPCStreamWorkers keeps goroutines (with their grown stacks) to serve streams: grpc-go's own
	// default starts one per stream, whose stack growth (runtime.newstack) was a fifth of Echo's CPU; with
	// 16 workers Echo cost about 0.8x bare grpc-go's server CPU per call (BENCHMARKS.md, "xferd-go gRPC"). Streams beyond the
	// workers still get their own goroutine, so this never queues a call.
	DefaultGRPCStreamWorkers = 16
	// CodecProtobuf and CodecGob are --frame-codec's values: the frame
	// protocol of PROTOCOL.md, or net/rpc's own gob stream (GOB.md).
	CodecProtobuf = "protobuf"
	CodecGob      = "gob"
	// minMaxFrame: a frame must at least hold its two length fields.
	minMaxFrame = 8
)

// Config is the effective configuration.
type Config struct {
	GRPCAddr, FrameAddr, MetricsAddr string
	Store                            string // "mem" or "disk:DIR"
	Pool                             bool
	GOGC                             *int // nil: leave the runtime's (GOGC env); -1 is off
	GOGCAdaptive                     bool // --gogc adaptive: GCTune sets the percent (GOGC is nil)
	GCTune                           gctune.Params
	LogLevel                         slog.Level
	MemLimit                         *int64 // nil: leave the runtime's (GOMEMLIMIT env); MaxInt64 is off
	Limits                           limits.Limits
	FrameCodec                       string // the frame listener's net/rpc codec: "protobuf" or "gob"
	TLS                              TLS

	GRPCInitialWindowSize     int32
	GRPCInitialConnWindowSize int32
	GRPCReadBufferSize        int
	GRPCWriteBufferSize       int
	GRPCMaxConcurrentStreams  uint32
	GRPCStreamWorkers         uint32
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

// ErrVersion is returned by Parse for --version: the caller prints the version and exits 0.
var ErrVersion = errors.New("version requested")

// versionFlag is the one flag that is not a setting: it has no environment variable.
const versionFlag = "version"

// Parse reads args (without the program name) and env (os.Getenv-like).
// The help text goes to out. flag.ErrHelp is returned for -h and --help,
// ErrVersion for --version.
func Parse(args []string, getenv func(string) string, out io.Writer) (*Config, error) {
	c := &Config{Store: "mem", Pool: true, FrameCodec: CodecProtobuf, Limits: limits.Defaults(), GCTune: gctune.Defaults(), LogLevel: slog.LevelInfo, GRPCMaxConcurrentStreams: DefaultMaxConcurrentStrm,
		GRPCReadBufferSize: DefaultGRPCBufferSize, GRPCWriteBufferSize: DefaultGRPCBufferSize, GRPCStreamWorkers: DefaultGRPCStreamWorkers,
		TLS: TLS{Tickets: true, HandshakeTimeout: DefaultTLSHandshakeTimeout}}
	fs := flag.NewFlagSet("xferd-go", flag.ContinueOnError)
	// The flag package's own messages are silenced: the caller prints one
	// "xferd-go: error: ..." line; only -h prints the usage.
	fs.SetOutput(io.Discard)
	c.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(fs, out)
		}
		return nil, err
	}
	if fs.Lookup(versionFlag).Value.String() == "true" {
		return nil, ErrVersion
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := applyEnv(fs, getenv); err != nil {
		return nil, err
	}
	if err := c.checkTuneFlags(fs); err != nil {
		return nil, err
	}
	return c, c.validate(fs)
}

// applyEnv sets each flag not given on the command line from its variable,
// through the flag's own parser so the same validation applies.
func applyEnv(fs *flag.FlagSet, getenv func(string) string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		v := getenv(EnvName(f.Name))
		if err != nil || given[f.Name] || f.Name == versionFlag || v == "" {
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
	fs.StringVar(&c.GRPCAddr, "grpc-addr", DefaultGRPCAddr, "gRPC listen address, `HOST:PORT` (port 0: any free port)")
	fs.StringVar(&c.FrameAddr, "frame-addr", DefaultFrameAddr, "frame protocol listen address, `HOST:PORT`")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", DefaultMetricsAddr, "/metrics and /debug/pprof listen address, `HOST:PORT`")
	fs.StringVar(&c.Store, "store", c.Store, "file store, in memory or in a directory: `mem|disk:DIR`")
	fs.StringVar(&c.FrameCodec, "frame-codec", c.FrameCodec, "the frame listener's net/rpc codec, `protobuf|gob` (gob: net/rpc's own, proto/GOB.md)")
	fs.Var(onOffValue{&c.Pool}, "pool", "sync.Pool chunk buffers, `on|off`")
	fs.Func("gogc", "GC percent, `PERCENT|off|adaptive` (default: the runtime's, from GOGC, else 100; adaptive: set from the live heap's growth, --gogc-* below)", func(s string) error {
		c.GOGCAdaptive = s == "adaptive"
		if c.GOGCAdaptive {
			c.GOGC = nil
			return nil
		}
		v, err := parseGOGC(s)
		c.GOGC = &v
		return err
	})
	c.registerTune(fs)
	fs.Func("memlimit", "soft memory limit, `SIZE|off` (default: the runtime's, from GOMEMLIMIT, else off)", func(s string) error {
		v, err := parseMemLimit(s)
		c.MemLimit = &v
		return err
	})
	fs.Var(sizeValue[uint64]{&l.MaxFileSize, math.MaxInt64}, "max-file-size", "largest declared file size, `SIZE`")
	fs.Var(sizeValue[uint32]{&l.MaxFrame, math.MaxUint32}, "max-frame", "largest frame_len (also gRPC's message limits), `SIZE`")
	fs.Var(sizeValue[uint32]{&l.MaxChunk, math.MaxUint32}, "max-chunk", "largest chunk size, Read length and Echo payload, `SIZE`")
	fs.Var(maxConnsValue{&l.MaxConns}, "max-conns", "open connections per listener, `N|auto` (auto: from RLIMIT_NOFILE)")
	fs.IntVar(&l.MaxUploads, "max-uploads", l.MaxUploads, "open uploads, server-wide")
	fs.IntVar(&l.MaxUploadsPerConn, "max-uploads-per-conn", l.MaxUploadsPerConn, "open uploads begun on one connection")
	fs.Var(sizeValue[uint64]{&l.MaxStagedBytes, math.MaxInt64}, "max-staged-bytes", "declared sizes of all open uploads, `SIZE`")
	fs.Var(sizeValue[uint32]{&l.MinChunk, math.MaxUint32}, "min-chunk", "smallest upload chunk unless one chunk holds the file, `SIZE`")
	fs.Var(DurationValue{&l.ReadTimeout}, "read-timeout", "time for a begun frame to arrive whole, `DURATION`")
	fs.Var(DurationValue{&l.UploadIdleTimeout}, "upload-idle-timeout", "an upload with no call for this long is aborted, `DURATION`")
	fs.IntVar(&l.MaxConnCalls, "max-conn-calls", l.MaxConnCalls, "outstanding calls per connection before reading pauses")
	fs.Var(sizeValue[uint64]{&l.MaxConnUnsent, math.MaxInt64}, "max-conn-unsent", "unwritten response bytes per connection before reading pauses, `SIZE`")
	fs.Var(DurationValue{&l.WriteTimeout}, "write-timeout", "a response the client does not take for this long closes its connection, `DURATION`")
	fs.Var(DurationValue{&l.DrainTimeout}, "drain-timeout", "calls in flight at SIGTERM finish within this, then connections close, `DURATION`")
	fs.IntVar(&l.MaxMetaEntries, "max-meta-entries", l.MaxMetaEntries, "entries of one Meta call")
	fs.Var(sizeValue[int32]{&c.GRPCInitialWindowSize, math.MaxInt32}, "grpc-initial-window-size", "grpc-go stream window, `SIZE` (0: grpc-go's own default, 64KiB growing by BDP estimate; a size turns BDP off)")
	fs.Var(sizeValue[int32]{&c.GRPCInitialConnWindowSize, math.MaxInt32}, "grpc-initial-conn-window-size", "grpc-go connection window, `SIZE` (0: grpc-go's own default, 64KiB growing by BDP estimate; a size turns BDP off)")
	fs.Var(sizeValue[int]{&c.GRPCReadBufferSize, math.MaxInt32}, "grpc-read-buffer-size", "grpc-go read buffer, `SIZE` (0: grpc-go's own default, 32KiB)")
	fs.Var(sizeValue[int]{&c.GRPCWriteBufferSize, math.MaxInt32}, "grpc-write-buffer-size", "grpc-go write buffer, `SIZE` (0: grpc-go's own default, 32KiB)")
	fs.Var(uint32Value{&c.GRPCMaxConcurrentStreams}, "grpc-max-concurrent-streams", "streams per gRPC connection, `N`")
	fs.Var(uint32Value{&c.GRPCStreamWorkers}, "grpc-stream-workers", "grpc-go stream worker goroutines kept for new streams, `N` (0: a new goroutine per stream, grpc-go's default)")
	c.registerTLS(fs)
	fs.Var(logLevelValue{&c.LogLevel}, "log-level", "stderr log level, `info|debug` (debug: every adaptive GOGC change)")
	fs.Bool(versionFlag, false, "print the version and exit")
}

func (c *Config) validate(fs *flag.FlagSet) error {
	l := c.Limits
	var problems []string
	check := func(bad bool, format string, args ...any) {
		if bad {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	check(c.Store != "mem" && c.DiskDir() == "", "--store %q: want mem or disk:DIR", c.Store)
	check(strings.ContainsAny(c.Store, " \t\n"), "--store %q: the directory must not contain white space (the startup line is space-separated)", c.Store)
	check(c.FrameCodec != CodecProtobuf && c.FrameCodec != CodecGob, "--frame-codec %q: want %s or %s", c.FrameCodec, CodecProtobuf, CodecGob)
	check(l.MaxFrame < minMaxFrame, "--max-frame %d: must be at least %d", l.MaxFrame, minMaxFrame)
	check(l.MaxChunk == 0, "--max-chunk must be at least 1")
	check(l.MaxConnCalls < 1, "--max-conn-calls %d: must be at least 1", l.MaxConnCalls)
	check(l.MaxConnUnsent < 1, "--max-conn-unsent must be at least 1")
	check(l.WriteTimeout <= 0, "--write-timeout %v: must be positive", l.WriteTimeout)
	check(l.DrainTimeout < 0, "--drain-timeout %v: must not be negative", l.DrainTimeout)
	check(l.MaxMetaEntries < 0, "--max-meta-entries %d: must not be negative", l.MaxMetaEntries)
	check(l.MaxUploads < 1, "--max-uploads %d: must be at least 1", l.MaxUploads)
	check(l.MaxUploadsPerConn < 1, "--max-uploads-per-conn %d: must be at least 1", l.MaxUploadsPerConn)
	check(l.MaxStagedBytes < 1, "--max-staged-bytes must be at least 1")
	check(l.MinChunk < 1, "--min-chunk must be at least 1")
	check(l.ReadTimeout <= 0, "--read-timeout %v: must be positive", l.ReadTimeout)
	check(l.UploadIdleTimeout <= 0, "--upload-idle-timeout %v: must be positive", l.UploadIdleTimeout)
	if c.GOGCAdaptive {
		if err := c.GCTune.Validate(); err != nil {
			problems = append(problems, strings.ReplaceAll(err.Error(), "\n", "; "))
		}
	}
	check(c.GRPCMaxConcurrentStreams == 0, "--grpc-max-concurrent-streams must be at least 1")
	for _, a := range []struct{ name, v string }{{"grpc-addr", c.GRPCAddr}, {"frame-addr", c.FrameAddr}, {"metrics-addr", c.MetricsAddr}} {
		check(!strings.Contains(a.v, ":"), "--%s %q: want HOST:PORT", a.name, a.v)
	}
	problems = append(problems, c.checkTLS(fs)...)
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func parseGOGC(s string) (int, error) {
	if s == "off" {
		return -1, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("want a non-negative integer, off or adaptive, got %q", s)
	}
	return v, nil
}

func parseMemLimit(s string) (int64, error) {
	if s == "off" {
		return math.MaxInt64, nil
	}
	v, err := ParseSize(s, math.MaxInt64)
	return int64(v), err
}

// Getenv is os.Getenv, named for callers that pass it to Parse.
var Getenv = os.Getenv
