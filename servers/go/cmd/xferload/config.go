package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"xferbench/servers/go/internal/config"
	"xferbench/servers/go/internal/content"
	"xferbench/servers/go/internal/limits"
	"xferbench/servers/go/internal/tlsx"
)

// Config is one run's parsed command line.
type Config struct {
	Addr     string
	Codec    string // "protobuf" (the frame protocol) or "gob" (net/rpc's own, --frame-codec gob)
	Method   string
	Conns    int
	Inflight int
	Rate     float64 // calls/s over all connections; 0: as fast as possible (closed model)
	Duration time.Duration
	Warmup   time.Duration
	MaxCalls uint64 // 0: no count bound
	Size     uint64 // echo payload
	Chunk    uint64 // upload chunk and Read length
	FileSize uint64 // upload file size (and download's own file without --name)
	Name     string // download: a stored name or gen:SIZE:SEED (canonical); "": upload one first
	Entries  int    // meta: entries per call
	EntryMin int    // meta: bytes per key and per value, at least
	EntryMax int    // meta: ... and at most
	Verify   bool
	Drain    time.Duration // how long calls in flight at the end may take to finish
	// MetricsAddr serves loadgen's client families on /metrics while the run lasts ("": not served).
	MetricsAddr string
	// TLS, when set, makes every connection TLS (--tls-ca); tlsConfig is its configuration, one session
	// cache for all the connections.
	TLS       *tlsx.ClientOptions
	tlsConfig *tls.Config
}

const usageHead = `usage: xferload --addr HOST:PORT --method upload|download|echo|meta [flags]

A load driver for the frame protocol (proto/PROTOCOL.md). It opens --conns TCP connections and keeps
--inflight calls in flight on each (pipelined, answers matched by sequence number), checks every answer,
and prints one JSON object on stdout:

  method, conns, inflight, rate, seconds, calls, calls_per_s, bytes, mb_per_s (payload, 10^6 B/s),
  errors {code: count}, latency_us {p50, p90, p99, p999, max}, cpu_seconds (the driver's own user+system
  CPU over the measured time, getrusage), cpu_cores (cpu_seconds / seconds), send_lag_us {p50, ...} (how
  late calls were sent after their intended time: the driver's own delay), missed_calls (--rate),
  warmup_calls, setup_calls. A driver whose cpu_cores nears the CPUs it may use, or with a large
  send_lag_us, was itself the bottleneck.

A call is one request/response frame pair, the unit the server's xfer_requests_total counts: the server's
counter grows by setup_calls + warmup_calls + calls (calls still in flight at the end are waited for and
counted, up to --drain). Only calls answered after --warmup enter calls, bytes and latency_us.

Methods (each worker, --inflight of them per connection, runs its own sequence of calls):
  upload    UploadBegin, --file-size/--chunk UploadChunk calls, UploadCommit; each worker re-uploads one
            name of its own (xferload-<run>-c<conn>-w<worker>), so a run stores at most conns x inflight
            files. bytes = chunk data sent.
  download  Read of --name in --chunk lengths across the file, from offset 0 to its end and again;
            --name gen:SIZE[:SEED] reads generated content (PROTOCOL.md "Generated content", SEED 0 by
            default); without --name one file of --file-size is uploaded first (setup_calls).
            bytes = data received.
  echo      Echo of a --size payload. bytes = payload sent.
  meta      Meta of --entries key/value entries, each key and value --entry-size MIN-MAX letters (drawn
            once from a fixed seed: every call sends the same request); the answer must hold every entry,
            sorted by key, and their digest (PROTOCOL.md "Meta"). bytes = key and value bytes sent.

Checks: every answer must have no error, the right lengths (chunk received count, Read data length,
Echo payload, commit size and CRC-32), and, for downloads, data whose CRC-32 over a whole pass equals the
crc32 the server sends (skipped with --verify=false). A server error counts under its code (not_found,
...), a failed check under verify_<what>, a dropped connection under connection.

Load model: by default each worker sends its next call as soon as the previous one is answered (closed
model). --rate R is an open model: call i is due at start + i/R over all connections, and its latency is
measured from that intended send time, not from when a worker got free to send it, so queueing behind a
slow server shows up in the latencies (coordinated omission is not hidden). If every worker is busy the
calls wait (conns x inflight bounds the calls in flight); calls due before the end but not sent by then
are not sent and are counted in missed_calls. Raise --inflight when latencies grow without bound or
missed_calls is not 0. The latencies include the lateness of the driver's timers (send_lag_us: tens of
microseconds on an idle machine, about a millisecond on a loaded one).

TLS: --tls-ca FILE speaks TLS to a TLS listener (xferd-go's --tls-frame-addr), trusting the PEM
certificates in FILE; --tls-server-name NAME is the name the certificate must carry (default: the host of
--addr). With --tls-resume on (the default) the connections share one session cache: the first connection
is dialled, and the others once its session ticket arrived (at most 500ms later), so they resume it;
tls_resumed in the JSON counts the connections that did. A certificate that is not trusted, expired or for
another name fails the run with a message that says so.

Codecs: --codec protobuf (the default) speaks the frame protocol (proto/PROTOCOL.md); --codec gob speaks
net/rpc's own gob stream (proto/GOB.md) to a server run with --frame-codec gob, through one rpc.Client
per connection on which the --inflight workers make their calls concurrently (net/rpc matches answers by
sequence number). Calls, checks and figures are the same.

Bounds: --duration (after --warmup) and --max-calls (calls of the run, warmup included, setup not;
0 = no count bound).
--metrics-addr HOST:PORT serves /metrics while the run lasts, with the families, labels and buckets of
loadgen's exporter (docs/DESIGN.md): xfer_client_requests_total{transport,method,code},
xfer_client_request_duration_seconds (from the intended send time under --rate), xfer_client_errors_total,
xfer_client_transfer_bytes_total{direction}, xfer_client_verifications_total, xfer_client_users (= --conns),
process_cpu_seconds_total. Every call counts there, warm-up included. Method labels: Echo, Meta (one call
per operation, as in loadgen), UploadCall (each UploadBegin/Chunk/Commit), DownloadChunk (each Read). The
address bound is printed on stderr as "xferload metrics=HOST:PORT".

SIGTERM or SIGINT ends the run early: no call starts after it, calls in flight get --drain to finish, the
JSON is printed and the exit status is 0.

Exit status: 0 done (even with errors counted), 1 the run failed (connection refused, setup failed),
2 a bad flag.

flags:
`

// --codec's values, the same words as xferd-go's --frame-codec.
const (
	codecProtobuf = "protobuf"
	codecGob      = "gob"
)

// ErrBadFlag marks errors that exit with status 2.
var ErrBadFlag = errors.New("bad flag")

// maxInflight keeps a worker count sane; the server's own bound per connection is 256 outstanding calls.
const maxInflight = 256

// maxMetaEntries is the servers' default --max-meta-entries.
const maxMetaEntries = limits.DefaultMaxMetaEntries

// parseFlags reads the command line; errors name the flag and what is wrong.
func parseFlags(args []string, out io.Writer) (*Config, error) {
	c := &Config{Duration: 10 * time.Second, Drain: 10 * time.Second}
	fs := flag.NewFlagSet("xferload", flag.ContinueOnError)
	// Parse errors are reported once, by the caller; --help prints the usage to out.
	fs.SetOutput(io.Discard)
	var size, chunk, fileSize string
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:7070", "frame address of the server, HOST:PORT")
	fs.StringVar(&c.Codec, "codec", codecProtobuf, "the server's --frame-codec: protobuf (frame protocol) or gob (net/rpc's gob stream)")
	fs.StringVar(&c.Method, "method", "", "upload, download, echo or meta (required)")
	fs.IntVar(&c.Conns, "conns", 1, "TCP connections")
	fs.IntVar(&c.Inflight, "inflight", 1, "calls in flight per connection (1 to 256)")
	fs.Float64Var(&c.Rate, "rate", 0, "calls/s over all connections, open model (0: as fast as possible)")
	// Durations take the grammar of docs/DESIGN.md, as xferd-go's flags do (config.ParseDuration).
	fs.Var(config.DurationValue{Dst: &c.Duration}, "duration", "measured `DURATION`, after --warmup")
	fs.Var(config.DurationValue{Dst: &c.Warmup}, "warmup", "`DURATION` at the start whose calls are left out of the figures")
	fs.Uint64Var(&c.MaxCalls, "max-calls", 0, "stop after this many calls, warmup included, setup not (0: no count bound)")
	fs.StringVar(&size, "size", "256", "echo payload size (bytes, or KiB/MiB)")
	fs.StringVar(&chunk, "chunk", "1MiB", "upload chunk size and Read length")
	fs.StringVar(&fileSize, "file-size", "64MiB", "size of each uploaded file")
	fs.IntVar(&c.Entries, "entries", 64, "meta: entries per call")
	var entrySize string
	fs.StringVar(&entrySize, "entry-size", "8-64", "meta: bytes per key and per value, MIN-MAX")
	fs.StringVar(&c.Name, "name", "", "download: a stored file name, or gen:SIZE[:SEED]")
	fs.BoolVar(&c.Verify, "verify", true, "check downloaded data against the CRC-32 (false: lengths and status only)")
	fs.Var(config.DurationValue{Dst: &c.Drain}, "drain", "how long calls in flight at the end may take, `DURATION`")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "", "serve loadgen's xfer_client_* families on HOST:PORT/metrics while running (\"\": off)")
	tlsFlags := tlsx.RegisterClientFlags(fs)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(out, usageHead)
			fs.SetOutput(out)
			fs.PrintDefaults()
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", ErrBadFlag, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected argument %q (every setting is a flag)", ErrBadFlag, fs.Arg(0))
	}
	var err error
	if c.Size, err = sizeFlag("size", size, 0, maxCallBytes); err != nil {
		return nil, err
	}
	if c.Chunk, err = sizeFlag("chunk", chunk, 1, maxCallBytes); err != nil {
		return nil, err
	}
	if c.FileSize, err = sizeFlag("file-size", fileSize, 0, limits.DefaultMaxFileSize); err != nil {
		return nil, err
	}
	if c.EntryMin, c.EntryMax, err = parseEntrySize(entrySize); err != nil {
		return nil, err
	}
	if c.Name, err = canonicalName(c.Name); err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	if c.TLS, err = tlsFlags.Options(fs); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadFlag, err)
	}
	if c.TLS != nil {
		if c.tlsConfig, err = c.TLS.Config(c.Addr); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadFlag, err)
		}
	}
	return c, nil
}

// check validates the values that do not depend on each other's parsing.
func (c *Config) check() error {
	switch {
	case c.Method != "upload" && c.Method != "download" && c.Method != "echo" && c.Method != "meta":
		return badFlag("method", "want upload, download, echo or meta, got %q", c.Method)
	case c.Codec != codecProtobuf && c.Codec != codecGob:
		return badFlag("codec", "want %s or %s, got %q", codecProtobuf, codecGob, c.Codec)
	case c.Entries < 0 || c.Entries > maxMetaEntries:
		return badFlag("entries", "want 0 to %d, got %d", maxMetaEntries, c.Entries)
	case c.Addr == "" || !strings.Contains(c.Addr, ":"):
		return badFlag("addr", "want HOST:PORT, got %q", c.Addr)
	case c.Conns < 1 || c.Conns > 4096:
		return badFlag("conns", "want 1 to 4096, got %d", c.Conns)
	case c.Inflight < 1 || c.Inflight > maxInflight:
		return badFlag("inflight", "want 1 to %d, got %d", maxInflight, c.Inflight)
	case c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0):
		return badFlag("rate", "want calls/s >= 0, got %v", c.Rate)
	case c.Duration <= 0:
		return badFlag("duration", "want a positive duration, got %v", c.Duration)
	case c.Warmup < 0:
		return badFlag("warmup", "want a duration >= 0, got %v", c.Warmup)
	case c.Drain <= 0:
		return badFlag("drain", "want a positive duration, got %v", c.Drain)
	case c.Name != "" && c.Method != "download":
		return badFlag("name", "only download reads a name (method %s)", c.Method)
	}
	return nil
}

func badFlag(name, format string, a ...any) error {
	return fmt.Errorf("%w: -%s: %s", ErrBadFlag, name, fmt.Sprintf(format, a...))
}

func sizeFlag(name, s string, lo, hi uint64) (uint64, error) {
	v, err := config.ParseSize(s, hi)
	if err != nil {
		return 0, badFlag(name, "%v", err)
	}
	if v < lo {
		return 0, badFlag(name, "want at least %d, got %q", lo, s)
	}
	return v, nil
}

// canonicalName turns gen:SIZE[:SEED] (SIZE in the size grammar) into the
// protocol's gen:<bytes>:<seed>; other names pass unchanged.
func canonicalName(name string) (string, error) {
	rest, ok := strings.CutPrefix(name, content.GenPrefix)
	if !ok {
		return name, nil
	}
	sizeStr, seedStr, hasSeed := strings.Cut(rest, ":")
	size, err := config.ParseSize(sizeStr, limits.DefaultMaxFileSize)
	if err != nil {
		return "", badFlag("name", "gen:SIZE[:SEED]: size %v", err)
	}
	seed := uint64(0)
	if hasSeed {
		if seed, err = strconv.ParseUint(seedStr, 10, 64); err != nil {
			return "", badFlag("name", "gen:SIZE[:SEED]: seed must be an unsigned decimal below 2^64, got %q", seedStr)
		}
	}
	return fmt.Sprintf("%s%d:%d", content.GenPrefix, size, seed), nil
}

// maxCallBytes bounds --size and --chunk: above the servers' default
// --max-chunk (4 MiB) so a server run with a larger one can be driven, and
// far below what a frame length can carry.
const maxCallBytes = 64 << 20
