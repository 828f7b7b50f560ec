package store

import "runtime"

// runtimeMem samples the bytes allocated so far.
type runtimeMem struct{ total uint64 }

func (r *runtimeMem) read() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.total = ms.TotalAlloc
}
