package main

import (
	"testing"
	"time"
)

func TestOpenModelDueTimes(t *testing.T) {
	start := time.Unix(1000, 0)
	s := &schedule{start: start, end: start.Add(time.Second), rate: 4}
	// Call i is due at start + i/rate whenever it is taken, however late (before the end).
	late := start.Add(900 * time.Millisecond)
	for i, want := range []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond} {
		got, ok := s.next(late)
		if !ok || !got.Equal(start.Add(want)) {
			t.Fatalf("call %d: due %v ok %v, want start+%v", i, got.Sub(start), ok, want)
		}
	}
	if _, ok := s.next(start); ok {
		t.Fatal("a call due at the end was handed out")
	}
}

func TestClosedModelStopsAtDeadline(t *testing.T) {
	start := time.Unix(1000, 0)
	s := &schedule{start: start, end: start.Add(time.Second)}
	if at, ok := s.next(start.Add(time.Millisecond)); !ok || !at.Equal(start.Add(time.Millisecond)) {
		t.Fatalf("closed model: %v %v", at, ok)
	}
	if _, ok := s.next(start.Add(time.Second)); ok {
		t.Fatal("a call started at the deadline")
	}
}

func TestMaxCallsBoundsBothModels(t *testing.T) {
	start := time.Unix(1000, 0)
	for _, rate := range []float64{0, 1e6} {
		s := &schedule{start: start, end: start.Add(time.Hour), rate: rate, maxCalls: 3}
		n := 0
		for range 10 {
			if _, ok := s.next(start); ok {
				n++
			}
		}
		if n != 3 {
			t.Fatalf("rate %v: %d calls, want 3", rate, n)
		}
	}
}

func TestOpenModelCountsMissedCalls(t *testing.T) {
	start := time.Unix(1000, 0)
	s := &schedule{start: start, end: start.Add(time.Second), rate: 10}
	// Three calls taken in time; at the end a worker finds call 3 (due at 0.3 s) unsent: it is not sent.
	for range 3 {
		if _, ok := s.next(start); !ok {
			t.Fatal("a call due in time was refused")
		}
	}
	if _, ok := s.next(start.Add(time.Second)); ok {
		t.Fatal("a backlogged call was sent after the end")
	}
	if m := s.missed(); m != 7 {
		t.Fatalf("missed %d, want 10 due - 3 sent", m)
	}
	if m := (&schedule{start: start, end: start.Add(time.Second)}).missed(); m != 0 {
		t.Fatalf("closed model missed %d", m)
	}
}
