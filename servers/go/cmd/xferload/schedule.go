package main

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// schedule hands out the calls of a run. Closed model (rate 0): a call may
// start at once, until the deadline. Open model: call i is due at
// start + i/rate, whether or not a worker is free then, and its latency is
// measured from that due time (coordinated omission is not hidden).
type schedule struct {
	start    time.Time
	end      time.Time // no call starts at or after it
	rate     float64
	maxCalls uint64 // 0: no count bound
	taken    atomic.Uint64
	handed   atomic.Uint64 // calls handed out (taken and within the bounds)
	halted   chan struct{} // closed by halt: no call starts after it
	haltedAt atomic.Int64  // when, in Unix nanoseconds (0: not halted)
	haltOnce sync.Once
}

func newSchedule(start, end time.Time, rate float64, maxCalls uint64) *schedule {
	return &schedule{start: start, end: end, rate: rate, maxCalls: maxCalls, halted: make(chan struct{})}
}

// halt ends the run now (SIGTERM): calls not yet sent are not sent, calls in flight finish.
func (s *schedule) halt(now time.Time) {
	s.haltOnce.Do(func() {
		s.haltedAt.Store(now.UnixNano())
		close(s.halted)
	})
}

// until is the end of the run: its deadline, or when it was halted if that came first.
func (s *schedule) until() time.Time {
	if ns := s.haltedAt.Load(); ns != 0 && time.Unix(0, ns).Before(s.end) {
		return time.Unix(0, ns)
	}
	return s.end
}

// due is the intended send time of call i (from 0) of an open model.
func (s *schedule) due(i uint64) time.Time {
	return s.start.Add(time.Duration(float64(i) / s.rate * float64(time.Second)))
}

// next takes the next call: its intended send time (now, for the closed
// model), or ok = false when the run is over. The caller sleeps until the
// intended time (wait).
func (s *schedule) next(now time.Time) (intended time.Time, ok bool) {
	if s.haltedAt.Load() != 0 {
		return time.Time{}, false
	}
	i := s.taken.Add(1) - 1
	if s.maxCalls > 0 && i >= s.maxCalls {
		return time.Time{}, false
	}
	if s.rate == 0 {
		ok = now.Before(s.end)
	} else {
		// A call due before the end but not yet sent at the end is missed:
		// sending a backlog after the deadline would stretch the run.
		intended = s.due(i)
		ok = intended.Before(s.end) && now.Before(s.end)
	}
	if !ok {
		return time.Time{}, false
	}
	s.handed.Add(1)
	if s.rate == 0 {
		return now, true
	}
	return intended, true
}

// missed is how many calls of an open model were due before the end but
// never sent, because every worker was busy until then (0 when closed).
func (s *schedule) missed() uint64 {
	if s.rate == 0 {
		return 0
	}
	due := uint64(0)
	if span := s.until().Sub(s.start).Seconds() * s.rate; span > 0 {
		due = uint64(math.Ceil(span))
	}
	if s.maxCalls > 0 {
		due = min(due, s.maxCalls)
	}
	return due - min(due, s.handed.Load())
}

// wait sleeps until t (at once if t has passed); false if the run was halted first, and then the call is
// not sent.
func (s *schedule) wait(t time.Time) bool {
	if d := time.Until(t); d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-s.halted:
			return false
		}
	}
	return true
}
