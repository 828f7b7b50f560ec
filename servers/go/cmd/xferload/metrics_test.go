package main

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// family returns the gathered family of that name, failing the test without it.
func family(t *testing.T, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	t.Fatalf("no family %s", name)
	return nil
}

func TestMetricsCountEveryCall(t *testing.T) {
	cfg, err := parseFlags([]string{"--addr", startServer(t), "--method", "meta", "--entries", "8",
		"--conns", "2", "--inflight", "4", "--max-calls", "300", "--warmup", "1ms"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r, err := run(cfg, "t", runOpts{obs: newClientMetrics(reg, cfg)})
	if err != nil || len(r.Errors) != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	req := family(t, reg, "xfer_client_requests_total").GetMetric()
	if len(req) != 1 || req[0].GetCounter().GetValue() != 300 {
		t.Fatalf("requests: %v, want one series of 300 (warm-up included)", req)
	}
	labels := map[string]string{}
	for _, l := range req[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["transport"] != "frame" || labels["method"] != "Meta" || labels["code"] != "ok" {
		t.Errorf("labels %v", labels)
	}
	h := family(t, reg, "xfer_client_request_duration_seconds").GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 300 || len(h.GetBucket()) != len(promBounds()) || h.GetSampleSum() <= 0 {
		t.Errorf("histogram: count %d, %d buckets, sum %v", h.GetSampleCount(), len(h.GetBucket()), h.GetSampleSum())
	}
	if v := family(t, reg, "xfer_client_verifications_total").GetMetric()[0].GetCounter().GetValue(); v != 300 {
		t.Errorf("verifications %v, want 300", v)
	}
}

func TestMetricsLabelFailuresAsLoadgen(t *testing.T) {
	cfg, err := parseFlags([]string{"--addr", "127.0.0.1:1", "--method", "echo"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := newClientMetrics(reg, cfg)
	m.observe(time.Millisecond, 0, "verify_payload")
	m.observe(time.Millisecond, 0, "resource_exhausted")
	got := map[string]float64{}
	for _, s := range family(t, reg, "xfer_client_errors_total").GetMetric() {
		for _, l := range s.GetLabel() {
			if l.GetName() == "code" {
				got[l.GetValue()] = s.GetCounter().GetValue()
			}
		}
	}
	if got["data_loss"] != 1 || got["resource_exhausted"] != 1 || len(got) != 2 {
		t.Errorf("errors by code %v, want a failed check as data_loss", got)
	}
}

func TestHaltEndsTheRunAndKeepsItsFigures(t *testing.T) {
	cfg, err := parseFlags([]string{"--addr", startServer(t), "--method", "echo", "--rate", "500",
		"--conns", "2", "--inflight", "8", "--duration", "1h"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan os.Signal, 1)
	time.AfterFunc(300*time.Millisecond, func() { stop <- syscall.SIGTERM })
	began := time.Now()
	r, err := run(cfg, "t", runOpts{stop: stop})
	if err != nil || r.Calls == 0 || len(r.Errors) != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	if took := time.Since(began); took > 30*time.Second {
		t.Fatalf("a halted run took %v", took)
	}
	if r.MissedCalls > 10 {
		t.Errorf("%d missed calls: the halt counted calls due after it", r.MissedCalls)
	}
}
