package server

import (
	"math"
	"runtime/debug"
	"strconv"

	"xferbench/servers/go/internal/config"
)

// ApplyRuntime applies --gogc and --memlimit when given (otherwise GOGC and
// GOMEMLIMIT, read by the runtime, stay in force) and returns the values in
// effect as the startup line and xfer_build_info show them.
func ApplyRuntime(cfg *config.Config) (gogc, memlimit string) {
	if cfg.GOGC != nil {
		debug.SetGCPercent(*cfg.GOGC)
	}
	if cfg.MemLimit != nil {
		debug.SetMemoryLimit(*cfg.MemLimit)
	}
	// SetGCPercent has no getter: set and restore at once.
	pct := debug.SetGCPercent(-1)
	debug.SetGCPercent(pct)
	gogc = "off"
	if cfg.GOGCAdaptive {
		gogc = "adaptive" // the controller sets the percent once the server starts
	} else if pct >= 0 {
		gogc = strconv.Itoa(pct)
	}
	memlimit = "off"
	if lim := debug.SetMemoryLimit(-1); lim != math.MaxInt64 {
		memlimit = strconv.FormatInt(lim, 10)
	}
	return gogc, memlimit
}
