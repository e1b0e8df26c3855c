//go:build unix

package transport

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user and system) the process has used
// (0 where the platform does not say). It is bench.ProcessCPU, which this
// package does not import: the bench package would bring the whole
// server and engine into its test binary for these lines.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
