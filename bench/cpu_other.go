//go:build !unix

package bench

import "time"

// processCPU returns 0 where the process's CPU time is not read.
func processCPU() time.Duration { return 0 }
