//go:build !unix

// Package proccpu reads the CPU time the process has used, for the
// benchmarks' CPU-per-operation figures. It imports nothing of docket, so
// a test binary that uses it links nothing more.
package proccpu

import "time"

// Used returns 0 where the process's CPU time is not read.
func Used() time.Duration { return 0 }
