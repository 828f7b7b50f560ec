// Package metrics owns the server's private Prometheus registry: the shared
// xfer_* names of docs/DESIGN.md, the Go runtime (with the GC-pause histogram of
// runtime/metrics) and process collectors, and the admin mux that serves
// /metrics and /debug/pprof.
package metrics

import (
	"net/http"
	"net/http/pprof"
	"regexp"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"xferbench/servers/go/internal/errs"
)

// DurationBuckets are PROTOCOL.md's bucket bounds, shared by both servers
// and the client so one histogram_quantile serves all.
var DurationBuckets = []float64{
	0.00001, 0.000015, 0.00002, 0.00003, 0.00005, 0.00007,
	0.0001, 0.00015, 0.0002, 0.0003, 0.0005, 0.0007, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.007, 0.01, 0.015, 0.02, 0.03,
	0.05, 0.07, 0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1, 1.5, 2, 3, 5, 7, 10,
}

// runtimeMetrics adds to the default Go collector: the GC-pause histogram
// (the deprecated /gc/pauses is not asked for), GC cycle, heap and GC CPU
// figures, and the GOGC / GOMEMLIMIT in effect.
var runtimeMetrics = collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(
	`^(/sched/pauses/total/gc:seconds|/gc/cycles/total:gc-cycles|/gc/heap/goal:bytes|/gc/heap/live:bytes` +
		`|/gc/gogc:percent|/gc/gomemlimit:bytes|/cpu/classes/gc/total:cpu-seconds)$`)}

// BuildInfo labels xfer_build_info.
type BuildInfo struct {
	Version, Pool, GOGC, MemLimit string
	FrameCodec                    string // --frame-codec: protobuf or gob, on xfer_frame_codec_info
}

// Metrics holds every collector the server updates.
type Metrics struct {
	reg         *prometheus.Registry
	requests    *prometheus.CounterVec
	durations   *prometheus.HistogramVec
	transferred *prometheus.CounterVec
	upBytes     prometheus.Counter
	downBytes   prometheus.Counter
	connections prometheus.Gauge
	accepted    prometheus.Counter
	inflight    prometheus.Gauge
	gogcChanges prometheus.Counter

	tlsMu sync.Mutex
	tls   *tlsFamilies // nil until a TLS listener asks for its figures
}

// New registers everything on a private registry. poolGets and poolNews
// read the buffer pool's counters at scrape time.
func New(info BuildInfo, poolGets, poolNews func() uint64) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xfer_requests_total", Help: "Calls answered, by transport, method and result code.",
	}, []string{"transport", "method", "code"})
	m.durations = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "xfer_request_duration_seconds", Help: "Call duration from request read to response written.",
		Buckets: DurationBuckets,
	}, []string{"transport", "method"})
	m.transferred = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "xfer_transfer_bytes_total", Help: "File payload bytes moved, by direction.",
	}, []string{"direction"})
	m.upBytes = m.transferred.WithLabelValues("upload")
	m.downBytes = m.transferred.WithLabelValues("download")
	m.connections = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "xfer_connections", Help: "Open client connections, both transports.",
	})
	m.accepted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "xfer_connections_accepted_total",
		Help: "Client connections admitted since start, both transports (refused ones over --max-conns are not).",
	})
	m.inflight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "xfer_inflight_requests", Help: "Calls read but not yet answered.",
	})
	m.gogcChanges = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "xfer_gogc_changes_total", Help: "GC percent changes made by --gogc adaptive (0 under a static GOGC).",
	})
	m.reg.MustRegister(m.requests, m.durations, m.transferred, m.connections, m.accepted, m.inflight, m.gogcChanges,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "xfer_gogc_percent", Help: "GC percent in force (static or set by --gogc adaptive); -1 when GOGC is off.",
		}, gogcPercent),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "xfer_buffer_pool_gets_total", Help: "Buffers requested from the pool.",
		}, func() float64 { return float64(poolGets()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "xfer_buffer_pool_news_total", Help: "Buffers freshly allocated (pool miss or pool off).",
		}, func() float64 { return float64(poolNews()) }),
		buildInfo(info),
		frameCodecInfo(info.FrameCodec),
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(runtimeMetrics)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

func buildInfo(info BuildInfo) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "xfer_build_info", Help: "Server identity and configuration; always 1.",
		ConstLabels: prometheus.Labels{
			"server": "xferd-go", "version": info.Version, "allocator": "go",
			"pool": info.Pool, "gogc": info.GOGC, "memlimit": info.MemLimit,
		},
	})
	g.Set(1)
	return g
}

// frameCodecInfo names the frame listener's codec. It is its own gauge, not
// a label of xfer_build_info, whose labels both servers share (xferd-c has
// only the frame protocol's codec).
func frameCodecInfo(codec string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "xfer_frame_codec_info", Help: "The frame listener's net/rpc codec (--frame-codec); always 1.",
		ConstLabels: prometheus.Labels{"codec": codec},
	})
	g.Set(1)
	return g
}

// Registry exposes the registry (tests gather from it).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Upload and Download count file payload bytes.
func (m *Metrics) Upload(n int)   { m.upBytes.Add(float64(n)) }
func (m *Metrics) Download(n int) { m.downBytes.Add(float64(n)) }

// GOGCChanged counts one change of the GC percent by the adaptive controller.
func (m *Metrics) GOGCChanged() { m.gogcChanges.Inc() }

// ConnOpened and ConnClosed track open connections; ConnOpened also counts
// the connection as accepted (connections per second = its rate).
func (m *Metrics) ConnOpened() { m.connections.Inc(); m.accepted.Inc() }
func (m *Metrics) ConnClosed() { m.connections.Dec() }

// Transport is the per-call observer of one transport.
type Transport struct {
	m     *Metrics
	name  string
	cache observerCache
}

// For returns the observer of a transport ("grpc" or "frame").
func (m *Metrics) For(transport string) *Transport { return &Transport{m: m, name: transport} }

// Started counts a call in flight.
func (t *Transport) Started() { t.m.inflight.Inc() }

// Done records a finished call.
func (t *Transport) Done(method string, code errs.Code, d time.Duration) {
	t.m.inflight.Dec()
	o := t.cache.get(t, method)
	o.counter(t, method, code).Inc()
	o.duration.Observe(d.Seconds())
}

// Handler is the admin mux: /metrics and /debug/pprof/ only.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
