package main

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The families below are loadgen's (loadgen/_exporter.py, docs/DESIGN.md): the same names, labels, buckets
// and meaning, so the runner scrapes xferload exactly as it scrapes Locust. Every call counts, warm-up
// included (the runner takes its own window from the per-second scrapes); a duration runs from the call's
// intended send time under --rate.

// promMethod is the method label loadgen uses for one operation of the method. Echo and Meta are one call
// per operation in both; xferload's upload and download calls are frames (UploadBegin/Chunk/Commit, one
// Read each), which loadgen counts as chunks of a whole transfer, so they get labels of their own.
var promMethod = map[string]string{"echo": "Echo", "meta": "Meta", "upload": "UploadCall", "download": "DownloadChunk"}

// promBounds are loadgen's BOUNDS (loadgen/_recorder.py): 12 steps per decade from 10 µs to 8.5 s, the
// PROTOCOL.md bounds, and 15, 20, 30, 60 s.
func promBounds() []float64 {
	steps := []float64{1, 1.2, 1.5, 1.7, 2, 2.5, 3, 4, 5, 6, 7, 8.5}
	protocol := []float64{0.00001, 0.000015, 0.00002, 0.00003, 0.00005, 0.00007, 0.0001, 0.00015, 0.0002, 0.0003, 0.0005, 0.0007, 0.001, 0.0015, 0.002, 0.003, 0.005,
		0.007, 0.01, 0.015, 0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1, 1.5, 2, 3, 5, 7, 10}
	var b []float64
	for e := -5; e <= 0; e++ {
		for _, m := range steps {
			b = append(b, math.Round(m*math.Pow10(e)*1e10)/1e10)
		}
	}
	b = append(append(b, protocol...), 15, 20, 30, 60)
	slices.Sort(b)
	return slices.Compact(b)
}

// clientMetrics records every call of one run into Prometheus families.
type clientMetrics struct {
	requests *prometheus.CounterVec // transport, method, code (ok or the failure's code)
	duration prometheus.Observer
	errors   *prometheus.CounterVec
	bytes    prometheus.Counter // the method's direction; echo and meta move none (as in loadgen)
	verified *prometheus.CounterVec
	opened   prometheus.Counter
	method   string
	verify   bool // checks are counted as loadgen counts them: with --verify on
}

func newClientMetrics(reg prometheus.Registerer, cfg *Config) *clientMetrics {
	labels := prometheus.Labels{"transport": "frame", "method": promMethod[cfg.Method]}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xfer_client_requests_total",
		Help: "Calls made, by outcome: code is ok or the PROTOCOL.md status code the call failed with."},
		[]string{"transport", "method", "code"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "xfer_client_request_duration_seconds",
		Help:    "Call durations (ok and failed), from the intended start in open-loop mode.",
		Buckets: promBounds()}, []string{"transport", "method"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xfer_client_errors_total",
		Help: "Failed calls by code (the server's status code, or the client's)."},
		[]string{"transport", "method", "code"})
	moved := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xfer_client_transfer_bytes_total",
		Help: "Bytes of completed transfers."}, []string{"direction"})
	verified := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xfer_client_verifications_total",
		Help: "Answers checked; result is ok or mismatch."}, []string{"method", "result"})
	users := prometheus.NewGauge(prometheus.GaugeOpts{Name: "xfer_client_users",
		Help: "Connections of this xferload (the runner's users)."})
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "xfer_client_info",
		Help: "This load generator: role, pid, transport and profile."}, []string{"role", "pid", "transport", "profile"})
	// xferload dials its connections once and never reconnects: a lost one ends its worker (code
	// unavailable), so reconnects stay 0, exported as loadgen does.
	opened := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xfer_client_connections_opened_total",
		Help: "Connections opened to the server."}, []string{"transport"})
	reconnects := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xfer_client_reconnects_total",
		Help: "Connections opened again after an error or close."}, []string{"transport"})
	reconnects.WithLabelValues("frame")
	reg.MustRegister(requests, duration, errs, moved, verified, users, info, opened, reconnects,
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	users.Set(float64(cfg.Conns))
	info.WithLabelValues("local", strconv.Itoa(os.Getpid()), "frame", "steady").Set(1)
	// Both directions exist from the start, as in loadgen; a method's own grows.
	moved.WithLabelValues("upload")
	moved.WithLabelValues("download")
	direction := map[string]string{"upload": "upload", "download": "download"}[cfg.Method]
	m := &clientMetrics{requests: requests.MustCurryWith(labels), duration: duration.With(labels),
		errors: errs.MustCurryWith(labels), verified: verified, opened: opened.WithLabelValues("frame"), method: promMethod[cfg.Method], verify: cfg.Verify}
	if direction != "" {
		m.bytes = moved.WithLabelValues(direction)
	}
	return m
}

// connected counts the run's connections, all dialed before its first call.
func (m *clientMetrics) connected(n int) { m.opened.Add(float64(n)) }

// observe records one call: code "" succeeded, verify_<what> failed a check (loadgen's data_loss), any
// other is the server's code or the client's.
func (m *clientMetrics) observe(d time.Duration, bytes uint64, code string) {
	m.duration.Observe(d.Seconds())
	checked := strings.HasPrefix(code, "verify_")
	switch {
	case code == "":
		code = "ok"
	case checked:
		code = "data_loss"
	}
	m.requests.WithLabelValues(code).Inc()
	if code != "ok" {
		m.errors.WithLabelValues(code).Inc()
	}
	if m.verify && (m.method == "Echo" || m.method == "Meta") {
		if code == "ok" {
			m.verified.WithLabelValues(m.method, "ok").Inc()
		} else if checked {
			m.verified.WithLabelValues(m.method, "mismatch").Inc()
		}
	}
	if m.bytes != nil && code == "ok" {
		m.bytes.Add(float64(bytes))
	}
}

// serveMetrics serves reg's /metrics on addr until the process exits and returns the address it bound.
func serveMetrics(addr string, reg *prometheus.Registry) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(os.Stderr, "xferload: metrics endpoint stopped: %v\n", err)
		}
	}()
	return ln.Addr().String(), nil
}
