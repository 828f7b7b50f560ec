// Package rusage reads the process's own CPU time, which the load drivers
// report beside their figures: a driver near its CPUs was the bottleneck.
package rusage

import "syscall"

// CPUSeconds is this process's user + system CPU time (getrusage).
func CPUSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}
