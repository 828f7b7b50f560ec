package server

import (
	"fmt"
	"log/slog"
	"runtime"
	"strings"

	"google.golang.org/grpc"

	"xferbench/servers/go/internal/config"
)

// ReadyLine is the one stderr line written once every listener is bound:
// "xferd-go ready" then key=value pairs.
func (s *Server) ReadyLine(version, gogc, memlimit string) string {
	c := s.cfg
	l := c.Limits
	pool := onOff(c.Pool)
	g, f, m := s.Addrs()
	dur := config.FormatDuration // durations in the grammar of docs/DESIGN.md ("500us", not Go's "500µs")
	kv := []any{"grpc", g, "frame", f, "frame_codec", c.FrameCodec, "metrics", m}
	kv = append(kv, s.tlsFields()...)
	kv = append(kv, "store", c.Store, "pool", pool,
		"gogc", gogc, "memlimit", memlimit,
		"max_frame", l.MaxFrame, "max_chunk", l.MaxChunk, "max_file_size", l.MaxFileSize,
		"max_conns", l.MaxConns, "max_uploads", l.MaxUploads,
		"max_uploads_per_conn", l.MaxUploadsPerConn, "max_staged_bytes", l.MaxStagedBytes, "min_chunk", l.MinChunk,
		"read_timeout", dur(l.ReadTimeout), "upload_idle_timeout", dur(l.UploadIdleTimeout),
		"max_conn_calls", l.MaxConnCalls, "max_conn_unsent", l.MaxConnUnsent,
		"write_timeout", dur(l.WriteTimeout), "drain_timeout", dur(l.DrainTimeout), "max_meta_entries", l.MaxMetaEntries,
		"grpc_initial_window_size", c.GRPCInitialWindowSize,
		"grpc_initial_conn_window_size", c.GRPCInitialConnWindowSize,
		"grpc_read_buffer_size", c.GRPCReadBufferSize, "grpc_write_buffer_size", c.GRPCWriteBufferSize,
		"grpc_max_concurrent_streams", c.GRPCMaxConcurrentStreams,
		"log_level", logLevel(c),
		"version", version, "go", runtime.Version(), "grpc_go", grpc.Version,
		// What the runtime chose: under a container CPU limit Go >= 1.25 derives it from the cgroup quota.
		"gomaxprocs", runtime.GOMAXPROCS(0),
	)
	if c.GOGCAdaptive {
		t := c.GCTune
		kv = append(kv, "gogc_interval", dur(t.Interval), "gogc_window", dur(t.Window), "gogc_min", t.Min, "gogc_max", t.Max,
			"gogc_flat_growth", t.FlatGrowth, "gogc_fast_growth", t.FastGrowth, "gogc_dead_band", t.DeadBand)
	}
	var b strings.Builder
	b.WriteString("xferd-go ready")
	for i := 0; i < len(kv); i += 2 {
		fmt.Fprintf(&b, " %s=%v", kv[i], kv[i+1])
	}
	return b.String()
}

func logLevel(c *config.Config) string {
	if c.LogLevel <= slog.LevelDebug {
		return "debug"
	}
	return "info"
}

// tlsFields are the TLS listeners' bound addresses and settings, none without a TLS listener.
func (s *Server) tlsFields() []any {
	t := s.cfg.TLS
	if !t.Enabled() {
		return nil
	}
	var kv []any
	for _, k := range []string{"tls_grpc", "tls_frame"} {
		if a, ok := s.tlsAddrs[k]; ok {
			kv = append(kv, k, a)
		}
	}
	return append(kv, "tls_tickets", onOff(t.Tickets), "tls_handshake_timeout", config.FormatDuration(t.HandshakeTimeout))
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
