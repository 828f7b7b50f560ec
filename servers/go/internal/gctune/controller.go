package gctune

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// liveHeapMetric is the heap marked live by the last GC: read without stopping the world (unlike
// runtime.ReadMemStats), and free of the garbage not yet collected that makes the allocated heap saw
// up and down with every cycle.
const liveHeapMetric = "/gc/heap/live:bytes"

// Sample is one read of the live heap.
type Sample struct {
	At   time.Time
	Heap uint64
}

// Change is one percent the controller set, with the growth rate that chose it.
type Change struct {
	From, To int
	Growth   float64
}

// Controller keeps the window of samples and the percent in force. It is not safe for concurrent use:
// Run drives it from one goroutine.
type Controller struct {
	p       Params
	set     func(int) int // debug.SetGCPercent, or a recorder in tests
	samples []Sample      // oldest first, spanning at most Window (plus the one sample just before it)
	current int
}

// New makes a controller that starts at Max (no growth seen yet) and sets that percent at once
// through set.
func New(p Params, set func(int) int) *Controller {
	c := &Controller{p: p, set: set, current: p.Max}
	set(p.Max)
	return c
}

// Percent is the GC percent in force.
func (c *Controller) Percent() int { return c.current }

// Observe adds a sample, measures growth over the window and sets the percent it maps to unless that
// is within the dead band of the one in force. It returns the change, if there was one.
func (c *Controller) Observe(s Sample) (Change, bool) {
	c.samples = append(c.samples, s)
	// Keep the newest sample at least Window old as the window's start, drop the older ones.
	cut := 0
	for i := len(c.samples) - 2; i >= 0; i-- {
		if s.At.Sub(c.samples[i].At) >= c.p.Window {
			cut = i
			break
		}
	}
	c.samples = c.samples[cut:]
	if len(c.samples) < 2 {
		return Change{}, false
	}
	g := Growth(c.samples[0], s)
	want := Percent(g, c.p)
	// The ends are always reached exactly, even when within the dead band of them.
	if want == c.current || (abs(want-c.current) < c.p.DeadBand && want != c.p.Min && want != c.p.Max) {
		return Change{}, false
	}
	ch := Change{From: c.current, To: want, Growth: g}
	c.set(want)
	c.current = want
	return ch, true
}

// Run samples the live heap every Interval until ctx ends, calling onChange after each change.
func (c *Controller) Run(ctx context.Context, onChange func(Change)) {
	sample := []metrics.Sample{{Name: liveHeapMetric}}
	tick := time.NewTicker(c.p.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			metrics.Read(sample)
			if sample[0].Value.Kind() != metrics.KindUint64 {
				return // not in this runtime: keep the percent in force rather than guess
			}
			if ch, ok := c.Observe(Sample{At: now, Heap: sample[0].Value.Uint64()}); ok {
				onChange(ch)
			}
		}
	}
}

// SetGCPercent is the production setter: the runtime's own.
func SetGCPercent(p int) int { return debug.SetGCPercent(p) }

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
