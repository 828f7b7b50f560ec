package server

import (
	"context"
	"log/slog"

	"xferbench/servers/go/internal/config"
	"xferbench/servers/go/internal/gctune"
	"xferbench/servers/go/internal/metrics"
)

// startGCTune runs the --gogc adaptive controller (internal/gctune) until the returned function is
// called: each change is counted in xfer_gogc_changes_total and logged at debug level. Without
// --gogc adaptive it starts nothing.
func startGCTune(cfg *config.Config, m *metrics.Metrics) context.CancelFunc {
	if !cfg.GOGCAdaptive {
		return func() {}
	}
	ctl := gctune.New(cfg.GCTune, gctune.SetGCPercent)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctl.Run(ctx, func(ch gctune.Change) {
			m.GOGCChanged()
			slog.Debug("gogc changed", "from", ch.From, "to", ch.To, "growth_per_s", ch.Growth)
		})
	}()
	return func() {
		cancel()
		<-done
	}
}
