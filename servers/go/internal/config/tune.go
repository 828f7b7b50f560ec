package config

import (
	"flag"
	"fmt"
	"log/slog"
	"strings"
)

// tuneFlags are the parameters of --gogc adaptive (internal/gctune); they mean nothing without it.
var tuneFlags = []string{"gogc-interval", "gogc-window", "gogc-min", "gogc-max", "gogc-flat-growth",
	"gogc-fast-growth", "gogc-dead-band"}

func (c *Config) registerTune(fs *flag.FlagSet) {
	t := &c.GCTune
	fs.Var(DurationValue{&t.Interval}, "gogc-interval", "--gogc adaptive: time between two reads of the live heap, `DURATION`")
	fs.Var(DurationValue{&t.Window}, "gogc-window", "--gogc adaptive: the live heap's growth rate is measured over this window, `DURATION`")
	fs.IntVar(&t.Min, "gogc-min", t.Min, "--gogc adaptive: the lowest GC percent it sets, reached at --gogc-fast-growth")
	fs.IntVar(&t.Max, "gogc-max", t.Max, "--gogc adaptive: the highest GC percent it sets, reached at --gogc-flat-growth")
	fs.Float64Var(&t.FlatGrowth, "gogc-flat-growth", t.FlatGrowth, "--gogc adaptive: growth `RATE` (fraction of the heap per second) at or below which the percent is --gogc-max")
	fs.Float64Var(&t.FastGrowth, "gogc-fast-growth", t.FastGrowth, "--gogc adaptive: growth `RATE` (fraction of the heap per second) at or above which the percent is --gogc-min")
	fs.IntVar(&t.DeadBand, "gogc-dead-band", t.DeadBand, "--gogc adaptive: a new percent closer than this to the one in force is not set")
}

// checkTuneFlags refuses a --gogc-* parameter (or its variable) without --gogc adaptive: it would be
// silently ignored.
func (c *Config) checkTuneFlags(fs *flag.FlagSet) error {
	if c.GOGCAdaptive {
		return nil
	}
	var given []string
	fs.Visit(func(f *flag.Flag) {
		for _, t := range tuneFlags {
			if f.Name == t {
				given = append(given, "--"+t)
			}
		}
	})
	if len(given) > 0 {
		return fmt.Errorf("%s: only with --gogc adaptive", strings.Join(given, ", "))
	}
	return nil
}

type logLevelValue struct{ dst *slog.Level }

func (v logLevelValue) String() string {
	if v.dst == nil || *v.dst != slog.LevelDebug {
		return "info"
	}
	return "debug"
}

func (v logLevelValue) Set(s string) error {
	switch s {
	case "info":
		*v.dst = slog.LevelInfo
	case "debug":
		*v.dst = slog.LevelDebug
	default:
		return fmt.Errorf("want info or debug, got %q", s)
	}
	return nil
}
