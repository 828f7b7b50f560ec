package metrics

import "runtime/metrics"

// gogcPercent reads the GC percent in force from runtime/metrics at scrape time, so the gauge is right
// for a static GOGC (flag or environment) and for every change --gogc adaptive makes, with no setter
// to forget.
func gogcPercent() float64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	// GOGC off is reported as the uint64 of -1.
	return float64(int64(s[0].Value.Uint64()))
}
