package main

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"

	"xferbench/servers/go/internal/rusage"
	"xferbench/servers/go/internal/tlsx"
)

// runOpts are a run's ties to the process: its Prometheus families (nil: none) and a channel that halts
// the run early (SIGTERM; nil: never).
type runOpts struct {
	obs  *clientMetrics
	stop <-chan os.Signal
}

// run dials every connection, runs the method's setup, then the workers,
// and returns the merged figures.
func run(cfg *Config, runID string, opts runOpts) (Result, error) {
	m, err := newMethod(cfg, runID)
	if err != nil {
		return Result{}, err
	}
	conns, err := dialAll(cfg)
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()
	if err != nil {
		return Result{}, err
	}
	if opts.obs != nil {
		opts.obs.connected(len(conns))
	}
	setupCalls, err := m.setup(conns[0])
	if err != nil {
		return Result{}, fmt.Errorf("setup of %s: %w", cfg.Method, err)
	}
	name := cfg.Name
	if d, ok := m.(*download); ok {
		name = d.name
	}

	start := time.Now()
	warmEnd := start.Add(cfg.Warmup)
	s := newSchedule(start, warmEnd.Add(cfg.Duration), cfg.Rate, cfg.MaxCalls)
	cpu := cpuAt(warmEnd)
	// Calls in flight at the end get --drain to finish; then the connections
	// are closed, which fails whatever still waits.
	stuck := time.AfterFunc(time.Until(s.end)+cfg.Drain, func() {
		for _, c := range conns {
			_ = c.nc.Close()
		}
	})
	defer stuck.Stop()
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-opts.stop: // halted: calls in flight get --drain from now, as at the deadline
			s.halt(time.Now())
			stuck.Reset(cfg.Drain)
		case <-finished:
		}
	}()

	tallies := make([]*tally, 0, cfg.Conns*cfg.Inflight)
	var wg sync.WaitGroup
	for ci, c := range conns {
		for wi := range cfg.Inflight {
			t := newTally()
			tallies = append(tallies, t)
			sess := m.session(workerID{conn: ci, worker: wi})
			wg.Add(1)
			go func() {
				defer wg.Done()
				work(s, c, sess, t, warmEnd, opts.obs)
			}()
		}
	}
	wg.Wait()
	total := newTally()
	for _, t := range tallies {
		total.merge(t)
	}
	r := total.result(cfg, name, warmEnd, cpu(), setupCalls)
	r.MissedCalls = s.missed()
	r.TLSResumed = tlsResumed(cfg, conns)
	return r, nil
}

// ticketWait bounds the wait for the first connection's TLS session ticket (tlsx.AwaitTicket).
const ticketWait = 500 * time.Millisecond

// dialAll opens every connection before any call, so a refused one fails
// the run at once; it returns those opened so far with an error.
func dialAll(cfg *Config) ([]*conn, error) {
	conns := make([]*conn, 0, cfg.Conns)
	for i := range cfg.Conns {
		c, err := dial(cfg)
		if err != nil {
			return conns, fmt.Errorf("cannot connect to %s: %w", cfg.Addr, err)
		}
		conns = append(conns, c)
		if i == 0 && cfg.TLS != nil && cfg.Conns > 1 {
			tlsx.AwaitTicket(cfg.tlsConfig, ticketWait) // the first connection's reader takes the ticket
		}
	}
	return conns, nil
}

// tlsResumed counts the connections whose TLS handshake resumed a session; nil without TLS.
func tlsResumed(cfg *Config, conns []*conn) *int {
	if cfg.TLS == nil {
		return nil
	}
	n := 0
	for _, c := range conns {
		if tc, ok := c.nc.(*tls.Conn); ok && tc.ConnectionState().DidResume {
			n++
		}
	}
	return &n
}

// work is one worker: take a call from the schedule, make it, record it.
func work(s *schedule, c *conn, sess session, t *tally, warmEnd time.Time, obs *clientMetrics) {
	for {
		intended, ok := s.next(time.Now())
		if !ok {
			return
		}
		if !s.wait(intended) {
			s.handed.Add(^uint64(0)) // halted before it was sent: not sent
			return
		}
		sent := time.Now()
		bytes, code, err := sess.call(c)
		done := time.Now()
		if err != nil {
			t.errors["connection"]++ // no answer: not a call the server finished
			if obs != nil {
				obs.observe(done.Sub(intended), 0, "unavailable") // loadgen's code for a lost connection
			}
			return
		}
		t.record(intended, sent, done, warmEnd, bytes, code)
		if obs != nil {
			obs.observe(done.Sub(intended), bytes, code)
		}
	}
}

// cpuAt samples the process's CPU time at t (or now, if the run ends before
// t) and returns a function giving the CPU seconds used since.
func cpuAt(t time.Time) func() float64 {
	var mu sync.Mutex
	var base float64
	taken := false
	take := func() {
		mu.Lock()
		defer mu.Unlock()
		if !taken {
			base, taken = rusage.CPUSeconds(), true
		}
	}
	timer := time.AfterFunc(time.Until(t), take)
	return func() float64 {
		timer.Stop()
		take()
		return rusage.CPUSeconds() - base
	}
}
