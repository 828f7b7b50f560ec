package main

import (
	"encoding/json"
	"testing"
	"time"
)

func TestSummaryJSON(t *testing.T) {
	tl := newTally()
	warm := time.Unix(100, 0)
	// 1000 calls of 1..1000 µs, plus one during warmup that must not count.
	tl.record(warm.Add(-time.Second), warm.Add(-time.Second), warm.Add(-time.Millisecond), warm, 10, "")
	for i := 1; i <= 1000; i++ {
		at := warm.Add(time.Duration(i) * time.Millisecond)
		code := ""
		if i%100 == 0 {
			code = "not_found"
		}
		tl.record(at, at, at.Add(time.Duration(i)*time.Microsecond), warm, 4, code)
	}
	other := newTally()
	other.record(warm, warm.Add(5*time.Microsecond), warm.Add(2*time.Second), warm, 6, "verify_crc32")
	tl.merge(other)

	cfg := &Config{Method: "echo", Conns: 2, Inflight: 3, Duration: time.Second, Verify: true}
	var got map[string]any
	b, _ := json.Marshal(tl.result(cfg, "", warm, 0.5, 7))
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	lat := got["latency_us"].(map[string]any)
	// HDR keeps 3 significant digits: values within 0.1%.
	near := func(v any, want float64) bool { f := v.(float64); return f >= want*0.999 && f <= want*1.001+1 }
	if !near(lat["p50"], 501) || !near(lat["p90"], 901) || !near(lat["p99"], 991) || !near(lat["max"], 2e6) {
		t.Fatalf("latency_us = %v", lat)
	}
	if lag := got["send_lag_us"].(map[string]any); !near(lag["max"], 5) {
		t.Fatalf("send_lag_us = %v", lag)
	}
	errs := got["errors"].(map[string]any)
	if got["calls"].(float64) != 1001 || got["warmup_calls"].(float64) != 1 || got["setup_calls"].(float64) != 7 ||
		got["bytes"].(float64) != 4006 || errs["not_found"].(float64) != 10 || errs["verify_crc32"].(float64) != 1 {
		t.Fatalf("figures = %v", got)
	}
	// seconds run to the last answer (2 s after warmup), not to --duration.
	if got["seconds"].(float64) != 2 || got["calls_per_s"].(float64) != 500.5 || got["mb_per_s"].(float64) != 4006/2/1e6 ||
		got["cpu_cores"].(float64) != 0.25 {
		t.Fatalf("rates = %v", got)
	}
}

func TestEmptyRunHasZeroRates(t *testing.T) {
	r := newTally().result(&Config{Method: "echo", Duration: 3 * time.Second}, "", time.Now(), 0, 0)
	if r.Seconds != 3 || r.Calls != 0 || r.CallsPerS != 0 || r.Errors == nil || r.LatencyUs.Max != 0 {
		t.Fatalf("%+v", r)
	}
}

func TestLatencyBeyondRangeCountsAsHighest(t *testing.T) {
	h := newHistogram()
	recordLatency(h, time.Hour)
	recordLatency(h, 0)
	if h.TotalCount() != 2 || h.Max() < latencyMaxUs*999/1000 || h.Min() != latencyMinUs {
		t.Fatalf("count %d min %d max %d", h.TotalCount(), h.Min(), h.Max())
	}
}
