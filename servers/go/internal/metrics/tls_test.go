package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

func TestTLSFiguresOnlyWithATLSListener(t *testing.T) {
	m := New(BuildInfo{Version: "t", Pool: "on", GOGC: "100", MemLimit: "off", FrameCodec: "protobuf"},
		func() uint64 { return 0 }, func() uint64 { return 0 })
	if text := scrape(t, m); strings.Contains(text, "xfer_tls_") {
		t.Fatal("a server without a TLS listener exports TLS figures")
	}
	reasons := []string{"timeout", "not_tls"}
	frame, grpc := m.TLS("frame", reasons), m.TLS("grpc", reasons)
	frame.Handshook(3*time.Millisecond, false)
	frame.Handshook(time.Millisecond, true)
	frame.Closed()
	frame.Failed("not_tls")
	frame.Failed("no such reason") // counted nowhere, no new series
	_ = grpc
	text := scrape(t, m)
	for _, want := range []string{
		`xfer_tls_handshakes_total{transport="frame"} 2`,
		`xfer_tls_handshakes_total{transport="grpc"} 0`,
		`xfer_tls_resumed_handshakes_total{transport="frame"} 1`,
		`xfer_tls_connections{transport="frame"} 1`,
		`xfer_tls_handshake_failures_total{reason="not_tls",transport="frame"} 1`,
		`xfer_tls_handshake_failures_total{reason="timeout",transport="grpc"} 0`,
		`xfer_tls_handshake_duration_seconds_bucket{transport="frame",le="0.003"} 2`,
		`xfer_tls_handshake_duration_seconds_count{transport="grpc"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(text, "no such reason") {
		t.Error("an unknown reason made a series")
	}
	if n := strings.Count(text, `xfer_tls_handshake_duration_seconds_bucket{transport="frame"`); n != len(DurationBuckets)+1 {
		t.Errorf("%d buckets, want %d (the latency histograms' bounds)", n, len(DurationBuckets)+1)
	}
}
