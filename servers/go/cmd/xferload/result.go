package main

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds, 1 µs to 60 s, 3 significant digits
// (a latency below 1 µs counts as 1 µs).
const (
	latencyMinUs  = 1
	latencyMaxUs  = 60_000_000
	latencyDigits = 3
)

func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(latencyMinUs, latencyMaxUs, latencyDigits)
}

// recordLatency adds one call's latency; beyond the histogram's range it
// counts as the highest value rather than being lost.
func recordLatency(h *hdrhistogram.Histogram, d time.Duration) {
	us := max(d.Microseconds(), latencyMinUs)
	if h.RecordValue(us) != nil {
		_ = h.RecordValue(latencyMaxUs)
	}
}

// Latency is the JSON of a latency histogram, in microseconds.
type Latency struct {
	P50  int64 `json:"p50"`
	P90  int64 `json:"p90"`
	P99  int64 `json:"p99"`
	P999 int64 `json:"p999"`
	Max  int64 `json:"max"`
}

func summarize(h *hdrhistogram.Histogram) Latency {
	return Latency{
		P50:  h.ValueAtQuantile(50),
		P90:  h.ValueAtQuantile(90),
		P99:  h.ValueAtQuantile(99),
		P999: h.ValueAtQuantile(99.9),
		Max:  h.Max(),
	}
}

// Result is the one JSON object xferload prints (see --help).
type Result struct {
	Method      string            `json:"method"`
	Addr        string            `json:"addr"`
	Name        string            `json:"name,omitempty"`
	Conns       int               `json:"conns"`
	Inflight    int               `json:"inflight"`
	Rate        float64           `json:"rate"`
	Verify      bool              `json:"verify"`
	Seconds     float64           `json:"seconds"`
	Calls       uint64            `json:"calls"`
	CallsPerS   float64           `json:"calls_per_s"`
	Bytes       uint64            `json:"bytes"`
	MBPerS      float64           `json:"mb_per_s"`
	Errors      map[string]uint64 `json:"errors"`
	LatencyUs   Latency           `json:"latency_us"`
	SendLagUs   Latency           `json:"send_lag_us"`
	CPUSeconds  float64           `json:"cpu_seconds"`
	CPUCores    float64           `json:"cpu_cores"`
	MissedCalls uint64            `json:"missed_calls"`
	WarmupCalls uint64            `json:"warmup_calls"`
	SetupCalls  uint64            `json:"setup_calls"`
	TLSResumed  *int              `json:"tls_resumed,omitempty"` // connections whose TLS session resumed (--tls-ca only)
}

// tally is one worker's figures; workers keep their own and they are merged
// at the end, so recording takes no lock.
type tally struct {
	hist        *hdrhistogram.Histogram
	lag         *hdrhistogram.Histogram // actual send time - intended (open model: the driver's own delay)
	calls       uint64
	bytes       uint64
	warmupCalls uint64
	errors      map[string]uint64
	last        time.Time // when its last measured call was answered
}

func newTally() *tally {
	return &tally{hist: newHistogram(), lag: newHistogram(), errors: map[string]uint64{}}
}

// record one answered call (code "" is a success) or a failed one.
func (t *tally) record(intended, sent, done, warmEnd time.Time, bytes uint64, code string) {
	if done.Before(warmEnd) {
		t.warmupCalls++
		return
	}
	t.calls++
	t.bytes += bytes
	if code != "" {
		t.errors[code]++
	}
	recordLatency(t.hist, done.Sub(intended))
	recordLatency(t.lag, sent.Sub(intended))
	if done.After(t.last) {
		t.last = done
	}
}

func (t *tally) merge(o *tally) {
	t.hist.Merge(o.hist)
	t.lag.Merge(o.lag)
	t.calls += o.calls
	t.bytes += o.bytes
	t.warmupCalls += o.warmupCalls
	for k, v := range o.errors {
		t.errors[k] += v
	}
	if o.last.After(t.last) {
		t.last = o.last
	}
}

// result fills the figures of a run measured from warmEnd.
func (t *tally) result(cfg *Config, name string, warmEnd time.Time, cpu float64, setup uint64) Result {
	secs := cfg.Duration.Seconds()
	if !t.last.IsZero() {
		secs = t.last.Sub(warmEnd).Seconds()
	}
	r := Result{Method: cfg.Method, Addr: cfg.Addr, Name: name, Conns: cfg.Conns, Inflight: cfg.Inflight,
		Rate: cfg.Rate, Verify: cfg.Verify, Seconds: secs, Calls: t.calls, Bytes: t.bytes, Errors: t.errors,
		LatencyUs: summarize(t.hist), SendLagUs: summarize(t.lag), CPUSeconds: cpu, WarmupCalls: t.warmupCalls, SetupCalls: setup}
	if secs > 0 {
		r.CallsPerS = float64(t.calls) / secs
		r.MBPerS = float64(t.bytes) / secs / 1e6
		r.CPUCores = cpu / secs
	}
	return r
}
