package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// tlsFamilies are the TLS listeners' figures, registered only once a TLS listener exists (a plaintext
// server exports none of them).
type tlsFamilies struct {
	handshakes *prometheus.CounterVec
	failures   *prometheus.CounterVec
	durations  *prometheus.HistogramVec
	resumed    *prometheus.CounterVec
	open       *prometheus.GaugeVec
}

func newTLSFamilies(reg prometheus.Registerer) *tlsFamilies {
	f := &tlsFamilies{
		handshakes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xfer_tls_handshakes_total", Help: "TLS handshakes completed, by transport.",
		}, []string{"transport"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xfer_tls_handshake_failures_total", Help: "TLS handshakes failed, by transport and reason.",
		}, []string{"transport", "reason"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "xfer_tls_handshake_duration_seconds", Help: "Completed TLS handshakes, from accept to the handshake's end.",
			Buckets: DurationBuckets,
		}, []string{"transport"}),
		resumed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xfer_tls_resumed_handshakes_total", Help: "TLS handshakes completed by resuming a session (a ticket).",
		}, []string{"transport"}),
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "xfer_tls_connections", Help: "Open TLS connections (handshake completed), by transport.",
		}, []string{"transport"}),
	}
	reg.MustRegister(f.handshakes, f.failures, f.durations, f.resumed, f.open)
	return f
}

// TLSObserver counts one transport's TLS handshakes and connections (tlsx.Observer).
type TLSObserver struct {
	handshakes, resumed prometheus.Counter
	duration            prometheus.Observer
	open                prometheus.Gauge
	failures            map[string]prometheus.Counter
}

// TLS returns the figures of a transport's TLS listener, every series present from 0 on (reasons: every
// failure reason the listener can report).
func (m *Metrics) TLS(transport string, reasons []string) *TLSObserver {
	m.tlsMu.Lock()
	if m.tls == nil {
		m.tls = newTLSFamilies(m.reg)
	}
	f := m.tls
	m.tlsMu.Unlock()
	o := &TLSObserver{
		handshakes: f.handshakes.WithLabelValues(transport),
		resumed:    f.resumed.WithLabelValues(transport),
		duration:   f.durations.WithLabelValues(transport),
		open:       f.open.WithLabelValues(transport),
		failures:   make(map[string]prometheus.Counter, len(reasons)),
	}
	for _, r := range reasons {
		o.failures[r] = f.failures.WithLabelValues(transport, r)
	}
	return o
}

// Handshook counts a completed handshake and the connection it opened.
func (o *TLSObserver) Handshook(d time.Duration, resumed bool) {
	o.handshakes.Inc()
	o.duration.Observe(d.Seconds())
	if resumed {
		o.resumed.Inc()
	}
	o.open.Inc()
}

// Failed counts a failed handshake; a reason not given to TLS is a bug, counted nowhere rather than
// making a series at run time.
func (o *TLSObserver) Failed(reason string) {
	if c, ok := o.failures[reason]; ok {
		c.Inc()
	}
}

// Closed counts the end of an open TLS connection.
func (o *TLSObserver) Closed() { o.open.Dec() }
