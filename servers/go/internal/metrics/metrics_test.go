package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"xferbench/servers/go/internal/errs"
)

func TestExposition(t *testing.T) {
	m := New(BuildInfo{Version: "t", Pool: "on", GOGC: "100", MemLimit: "off", FrameCodec: "gob"},
		func() uint64 { return 7 }, func() uint64 { return 3 })
	f := m.For("frame")
	f.Started()
	f.Done("Echo", errs.OK, 2*time.Millisecond)
	m.Upload(10)
	m.ConnOpened()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`xfer_requests_total{code="ok",method="Echo",transport="frame"} 1`,
		`xfer_request_duration_seconds_bucket{method="Echo",transport="frame",le="0.0001"} 0`,
		`xfer_request_duration_seconds_bucket{method="Echo",transport="frame",le="0.003"} 1`,
		`xfer_transfer_bytes_total{direction="upload"} 10`,
		`xfer_connections 1`,
		`xfer_connections_accepted_total 1`,
		`xfer_inflight_requests 0`,
		`xfer_buffer_pool_gets_total 7`,
		`xfer_buffer_pool_news_total 3`,
		`xfer_build_info{allocator="go",gogc="100",memlimit="off",pool="on",server="xferd-go",version="t"} 1`,
		`xfer_frame_codec_info{codec="gob"} 1`,
		`go_gc_duration_seconds`,
		`go_sched_pauses_total_gc_seconds_bucket`,
		`go_memstats_heap_alloc_bytes`,
		`process_resident_memory_bytes`,
		`process_cpu_seconds_total`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if n := strings.Count(text, `xfer_request_duration_seconds_bucket{method="Echo"`); n != len(DurationBuckets)+1 {
		t.Errorf("%d buckets, want %d", n, len(DurationBuckets)+1)
	}
	if r, err := srv.Client().Get(srv.URL + "/debug/pprof/"); err != nil || r.StatusCode != 200 {
		t.Errorf("pprof: %v", err)
	} else {
		r.Body.Close()
	}
	if r, err := srv.Client().Get(srv.URL + "/"); err != nil || r.StatusCode != 404 {
		t.Errorf("/ should be 404")
	} else {
		r.Body.Close()
	}
}

// The cached series are the vectors' own: counts from many goroutines over
// several methods and codes all land, and only codes that happened appear.
func TestCachedObserversConcurrent(t *testing.T) {
	m := New(BuildInfo{}, func() uint64 { return 0 }, func() uint64 { return 0 })
	g := m.For("grpc")
	const workers, calls = 8, 200
	done := make(chan struct{})
	for w := 0; w < workers; w++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < calls; i++ {
				g.Started()
				g.Done([]string{"Echo", "Stat"}[i%2], []errs.Code{errs.OK, errs.NotFound}[i%2], time.Millisecond)
			}
		}()
	}
	for w := 0; w < workers; w++ {
		<-done
	}
	g.Done("Upload", errs.Code(99), time.Millisecond) // outside grpc's codes: still counted
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`xfer_requests_total{code="ok",method="Echo",transport="grpc"} 800`,
		`xfer_requests_total{code="not_found",method="Stat",transport="grpc"} 800`,
		`xfer_request_duration_seconds_count{method="Echo",transport="grpc"} 800`,
		`xfer_request_duration_seconds_count{method="Upload",transport="grpc"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(text, `code="ok",method="Stat"`) || strings.Contains(text, `code="not_found",method="Echo"`) {
		t.Error("a code that never happened has a series")
	}
}
