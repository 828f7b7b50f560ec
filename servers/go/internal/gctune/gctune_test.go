package gctune

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

const mib = 1 << 20

func TestPercentMapsGrowthLinearlyBetweenTheEnds(t *testing.T) {
	p := Defaults() // 10..200 between growth 0 and 0.5/s
	for _, c := range []struct {
		growth float64
		want   int
	}{
		{-0.3, 200}, // shrinking: as flat
		{0, 200},
		{0.05, 181}, // 200 - 190*0.1
		{0.25, 105},
		{0.45, 29},
		{0.5, 10},
		{3, 10}, // beyond the fast end: clamped
		{math.Inf(1), 10},
		{math.NaN(), 200}, // no figure: as no growth
	} {
		if got := Percent(c.growth, p); got != c.want {
			t.Errorf("Percent(%g) = %d, want %d", c.growth, got, c.want)
		}
	}
}

func TestPercentNeverLeavesMinMax(t *testing.T) {
	p := Params{Interval: time.Second, Window: time.Second, Min: 37, Max: 41, FlatGrowth: 0.1, FastGrowth: 0.2}
	for g := -1.0; g <= 1.0; g += 0.001 {
		if got := Percent(g, p); got < p.Min || got > p.Max {
			t.Fatalf("Percent(%g) = %d outside [%d, %d]", g, got, p.Min, p.Max)
		}
	}
}

func TestGrowthIsRelativeToAtLeastTheMinimumHeap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		from, to uint64
		dt       time.Duration
		want     float64
	}{
		{100 * mib, 150 * mib, 5 * time.Second, 0.1}, // +50% in 5 s
		{100 * mib, 50 * mib, 5 * time.Second, -0.1}, // shrinking
		{0, 4 * mib, time.Second, 1},                 // from nothing: measured against 4 MiB
		{1 * mib, 3 * mib, 2 * time.Second, 0.25},    // small heap: 2 MiB over 4 MiB in 2 s
		{100 * mib, 200 * mib, 0, 0},                 // no time passed
	} {
		got := Growth(Sample{t0, c.from}, Sample{t0.Add(c.dt), c.to})
		if math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Growth(%d -> %d in %v) = %g, want %g", c.from, c.to, c.dt, got, c.want)
		}
	}
}

// recorder stands in for debug.SetGCPercent.
type recorder struct{ set []int }

func (r *recorder) SetGCPercent(p int) int { r.set = append(r.set, p); return 0 }

// feed gives the controller one heap sample per second, from t = 0.
func feed(c *Controller, heaps ...uint64) []Change {
	var out []Change
	t0 := time.Unix(1000, 0)
	for i, h := range heaps {
		if ch, ok := c.Observe(Sample{t0.Add(time.Duration(i) * time.Second), h}); ok {
			out = append(out, ch)
		}
	}
	return out
}

func TestControllerSetsThePercentOfTheWindowsGrowth(t *testing.T) {
	for _, c := range []struct {
		name  string
		heaps []uint64
		want  []int // the percents set after the initial Max
	}{
		{"flat heap keeps max", []uint64{100 * mib, 100 * mib, 100 * mib, 100 * mib}, nil},
		{"doubling every second reaches min", []uint64{100 * mib, 200 * mib}, []int{10}},
		// 100 -> 125 MiB over 1 s is 0.25/s: 105; then the window (5 s) still starts at 100 MiB, so the
		// rate falls as 25/100/t (0.125: 153, ...), until at t = 6 s the window starts at 125 MiB: flat.
		{"moderate growth, then flat", []uint64{100 * mib, 125 * mib, 125 * mib, 125 * mib, 125 * mib, 125 * mib, 125 * mib},
			[]int{105, 153, 168, 176, 181, 200}},
		{"spike then shrink goes back to max", []uint64{20 * mib, 80 * mib, 80 * mib, 10 * mib}, []int{10, 200}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &recorder{}
			ctl := New(Defaults(), r.SetGCPercent)
			feed(ctl, c.heaps...)
			if len(r.set) == 0 || r.set[0] != DefaultMax {
				t.Fatalf("first percent set %v, want %d at start", r.set, DefaultMax)
			}
			if got := r.set[1:]; !equal(got, c.want) {
				t.Errorf("set %v, want %v", got, c.want)
			}
			if ctl.Percent() != r.set[len(r.set)-1] {
				t.Errorf("Percent() = %d, last set %d", ctl.Percent(), r.set[len(r.set)-1])
			}
		})
	}
}

func TestControllerWindowForgetsOldGrowth(t *testing.T) {
	// Window 2 s: a jump at t=1 is outside the window from t=3 on, so the percent returns to max.
	p := Defaults()
	p.Window = 2 * time.Second
	r := &recorder{}
	changes := feed(New(p, r.SetGCPercent), 100*mib, 200*mib, 200*mib, 200*mib, 200*mib)
	if len(changes) != 2 || changes[0].To != 10 || changes[len(changes)-1].To != 200 {
		t.Fatalf("changes %+v, want 10 first and 200 last", changes)
	}
	if changes[0].From != 200 || changes[0].Growth != 1 {
		t.Errorf("first change %+v, want from 200 at growth 1/s", changes[0])
	}
}

func TestControllerDeadBand(t *testing.T) {
	p := Defaults()
	p.DeadBand = 20
	r := &recorder{}
	ctl := New(p, r.SetGCPercent)
	// 0.02/s maps to 192: within 20 of 200, not set.
	if ch := feed(ctl, 100*mib, 102*mib); len(ch) != 0 {
		t.Fatalf("a change within the dead band was made: %+v", ch)
	}
	// 0.3/s maps to 86: set.
	ctl2 := New(p, (&recorder{}).SetGCPercent)
	if ch := feed(ctl2, 100*mib, 130*mib); len(ch) != 1 || ch[0].To != 86 {
		t.Fatalf("changes %+v, want one to 86", ch)
	}
	// The ends are reached even from within the band: from 86, a flat heap goes to 200 and a fast
	// one to 10, whatever the band.
	p.DeadBand = 500
	ctl3 := New(p, (&recorder{}).SetGCPercent)
	if ch := feed(ctl3, 100*mib, 300*mib); len(ch) != 1 || ch[0].To != 10 {
		t.Fatalf("changes %+v, want min reached despite the dead band", ch)
	}
}

func TestValidateNamesTheFlag(t *testing.T) {
	for _, c := range []struct {
		edit func(*Params)
		want string
	}{
		{func(p *Params) { p.Interval = 0 }, "--gogc-interval"},
		{func(p *Params) { p.Window = 100 * time.Millisecond }, "--gogc-window"},
		{func(p *Params) { p.Min = 0 }, "--gogc-min 0"},
		{func(p *Params) { p.Min, p.Max = 150, 100 }, "must not exceed --gogc-max"},
		{func(p *Params) { p.Max = MaxPercent + 1 }, "--gogc-max"},
		{func(p *Params) { p.FastGrowth = p.FlatGrowth }, "--gogc-fast-growth"},
		{func(p *Params) { p.FastGrowth = math.Inf(1) }, "finite"},
		{func(p *Params) { p.DeadBand = -1 }, "--gogc-dead-band"},
	} {
		p := Defaults()
		c.edit(&p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one naming %q", p, err, c.want)
		}
	}
	if err := Defaults().Validate(); err != nil {
		t.Errorf("defaults refused: %v", err)
	}
}

// TestRunKeepsTheMemoryLimit drives the real runtime: Run changes the GC percent under a growing heap
// and leaves the soft memory limit (--memlimit, GOMEMLIMIT) as it was.
func TestRunKeepsTheMemoryLimit(t *testing.T) {
	oldPct := debug.SetGCPercent(100)
	oldLim := debug.SetMemoryLimit(512 * mib)
	defer debug.SetGCPercent(oldPct)
	defer debug.SetMemoryLimit(oldLim)

	p := Defaults()
	p.Interval, p.Window = 10*time.Millisecond, 50*time.Millisecond
	p.FastGrowth = 0.01 // any growth at all reads as fast
	ctl := New(p, SetGCPercent)
	if got := debug.SetGCPercent(p.Max); got != p.Max {
		t.Fatalf("start: runtime percent %d, want %d", got, p.Max)
	}
	ctx, cancel := context.WithCancel(context.Background())
	changes := make(chan Change, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctl.Run(ctx, func(ch Change) {
			select {
			case changes <- ch:
			default:
			}
		})
	}()
	var keep [][]byte
	deadline := time.After(10 * time.Second)
	var got Change
wait:
	for {
		keep = append(keep, make([]byte, 4*mib)) // live heap grows by 4 MiB per step
		if len(keep) > 60 {
			keep = keep[:0] // bounded: at most 240 MiB live
		}
		select {
		case got = <-changes:
			break wait
		case <-deadline:
			t.Fatal("no change of the GC percent within 10 s of a growing heap")
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	<-done
	if got.To >= p.Max || got.To < p.Min {
		t.Errorf("change %+v: want a percent below %d, at least %d", got, p.Max, p.Min)
	}
	if lim := debug.SetMemoryLimit(-1); lim != 512*mib {
		t.Errorf("memory limit %d after the controller ran, want %d untouched", lim, 512*mib)
	}
	runtime.KeepAlive(keep)
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
