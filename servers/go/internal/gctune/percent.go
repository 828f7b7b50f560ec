// Package gctune is xferd-go's adaptive GOGC (--gogc adaptive): every interval it reads the live heap
// from runtime/metrics, computes the heap's growth rate over a sliding window, and sets the GC percent
// from that rate alone (Percent), clamped to [Min, Max].
//
// Fast growth gets a low percent, so the heap is collected earlier and RSS stays bounded during a burst;
// a flat or shrinking heap gets a high percent, so steady work spends less CPU in the collector. A soft
// memory limit (--memlimit, GOMEMLIMIT) is never touched: the runtime collects when either the percent's
// heap goal or the limit is reached, so the limit still caps the heap whatever percent is set.
package gctune

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Defaults of the parameters (the flags of internal/config show them).
const (
	DefaultInterval   = time.Second
	DefaultWindow     = 5 * time.Second
	DefaultMin        = 10
	DefaultMax        = 200
	DefaultFlatGrowth = 0.0
	DefaultFastGrowth = 0.5
	DefaultDeadBand   = 5
	// MaxPercent bounds --gogc-max: a larger percent is GOGC off in all but name.
	MaxPercent = 10000
	// MinBaseHeap is the smallest heap growth is measured against: the runtime's own minimum heap goal
	// (4 MiB), so a near-empty heap's first megabytes do not read as explosive growth.
	MinBaseHeap = 4 << 20
)

// Params are the controller's knobs.
type Params struct {
	Interval time.Duration // between two reads of the live heap
	Window   time.Duration // the growth rate is measured over this much history
	Min, Max int           // the percent is clamped to [Min, Max]
	// FlatGrowth and FastGrowth are growth rates (fraction of the heap per second): at or below
	// FlatGrowth the percent is Max, at or above FastGrowth it is Min, linear in between.
	FlatGrowth, FastGrowth float64
	// DeadBand: a new percent closer than this to the one in force is not set (no churn on noise).
	DeadBand int
}

// Defaults are the parameters of --gogc adaptive without further flags.
func Defaults() Params {
	return Params{Interval: DefaultInterval, Window: DefaultWindow, Min: DefaultMin, Max: DefaultMax,
		FlatGrowth: DefaultFlatGrowth, FastGrowth: DefaultFastGrowth, DeadBand: DefaultDeadBand}
}

// Validate names every parameter out of range, by its flag.
func (p Params) Validate() error {
	var problems []error
	check := func(bad bool, format string, args ...any) {
		if bad {
			problems = append(problems, fmt.Errorf(format, args...))
		}
	}
	check(p.Interval <= 0, "--gogc-interval %v: must be positive", p.Interval)
	check(p.Window < p.Interval, "--gogc-window %v: must be at least --gogc-interval (%v)", p.Window, p.Interval)
	check(p.Min < 1, "--gogc-min %d: must be at least 1", p.Min)
	check(p.Max > MaxPercent, "--gogc-max %d: must be at most %d", p.Max, MaxPercent)
	check(p.Min > p.Max, "--gogc-min %d: must not exceed --gogc-max %d", p.Min, p.Max)
	check(!(p.FastGrowth > p.FlatGrowth), "--gogc-fast-growth %g: must exceed --gogc-flat-growth %g", p.FastGrowth, p.FlatGrowth)
	check(math.IsInf(p.FastGrowth, 0) || math.IsNaN(p.FastGrowth) || math.IsInf(p.FlatGrowth, 0) || math.IsNaN(p.FlatGrowth),
		"--gogc-flat-growth and --gogc-fast-growth must be finite numbers")
	check(p.DeadBand < 0, "--gogc-dead-band %d: must not be negative", p.DeadBand)
	return errors.Join(problems...)
}

// Percent is the mapping of a growth rate (fraction of the heap per second) to a GC percent:
//
//	growth <= FlatGrowth                 → Max
//	growth >= FastGrowth                 → Min
//	in between, linear:  Max - (Max-Min) * (growth-FlatGrowth) / (FastGrowth-FlatGrowth), rounded
//
// With the defaults (10, 200, 0, 0.5): a heap growing 25%/s gets 105, one growing 50%/s or more 10.
func Percent(growth float64, p Params) int {
	switch {
	case math.IsNaN(growth) || growth <= p.FlatGrowth:
		return p.Max
	case growth >= p.FastGrowth:
		return p.Min
	}
	f := (growth - p.FlatGrowth) / (p.FastGrowth - p.FlatGrowth)
	pct := int(math.Round(float64(p.Max) - f*float64(p.Max-p.Min)))
	return min(p.Max, max(p.Min, pct))
}

// Growth is the heap's growth rate between two samples: the change as a fraction of the older heap
// (at least MinBaseHeap), per second. Zero when no time passed.
func Growth(from, to Sample) float64 {
	dt := to.At.Sub(from.At).Seconds()
	if dt <= 0 {
		return 0
	}
	base := max(float64(from.Heap), MinBaseHeap)
	return (float64(to.Heap) - float64(from.Heap)) / base / dt
}
