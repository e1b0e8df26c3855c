//go:build unix

// Package proccpu reads the CPU time the process has used, for the
// benchmarks' CPU-per-operation figures. It imports nothing of docket, so
// a test binary that uses it links nothing more.
package proccpu

import (
	"syscall"
	"time"
)

// Used returns the CPU time (user and system) the process has used, 0
// where the platform does not say.
func Used() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
