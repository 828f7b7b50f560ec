package config

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"xferbench/servers/go/internal/gctune"
)

func TestGOGCAdaptiveFromFlagAndEnv(t *testing.T) {
	c, err := Parse([]string{"--gogc", "adaptive", "--gogc-window=10s", "--gogc-min=20", "--gogc-fast-growth=1.5"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := gctune.Defaults()
	want.Window, want.Min, want.FastGrowth = 10*time.Second, 20, 1.5
	if !c.GOGCAdaptive || c.GOGC != nil || c.GCTune != want {
		t.Errorf("adaptive %v gogc %v params %+v, want %+v", c.GOGCAdaptive, c.GOGC, c.GCTune, want)
	}
	c, err = Parse(nil, env(map[string]string{"XFERD_GOGC": "adaptive", "XFERD_GOGC_MAX": "300", "XFERD_LOG_LEVEL": "debug"}), io.Discard)
	if err != nil || !c.GOGCAdaptive || c.GCTune.Max != 300 || c.LogLevel != slog.LevelDebug {
		t.Errorf("env: %v %+v", err, c)
	}
	// A later static value wins over adaptive, as any flag's last value does.
	if c, err = Parse([]string{"--gogc=adaptive", "--gogc=50"}, env(nil), io.Discard); err != nil || c.GOGCAdaptive || *c.GOGC != 50 {
		t.Errorf("adaptive then 50: %v %+v", err, c)
	}
}

func TestGOGCAdaptiveBadValuesNameTheFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--gogc=adaptive", "--gogc-min=0"}, "--gogc-min 0: must be at least 1"},
		{[]string{"--gogc=adaptive", "--gogc-min=300"}, "--gogc-min 300: must not exceed --gogc-max 200"},
		{[]string{"--gogc=adaptive", "--gogc-interval=0s"}, "--gogc-interval"},
		{[]string{"--gogc=adaptive", "--gogc-window=500ms"}, "--gogc-window 500ms: must be at least --gogc-interval"},
		{[]string{"--gogc=adaptive", "--gogc-fast-growth=-1"}, "--gogc-fast-growth -1: must exceed"},
		{[]string{"--gogc=adaptive", "--gogc-dead-band=-2"}, "--gogc-dead-band"},
		{[]string{"--gogc-min=20"}, "--gogc-min: only with --gogc adaptive"},
		{[]string{"--gogc=100", "--gogc-window=3s"}, "--gogc-window: only with --gogc adaptive"},
		{[]string{"--gogc=adaptiv"}, `got "adaptiv"`},
		{[]string{"--log-level=trace"}, "want info or debug"},
	} {
		_, err := Parse(c.args, env(nil), io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want it to contain %q", c.args, err, c.want)
		}
	}
}
