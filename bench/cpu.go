package bench

import (
	"time"

	"github.com/docketdb/docket/internal/proccpu"
)

// ProcessCPU returns the CPU time (user and system) the process has used
// (0 where the platform does not say).
func ProcessCPU() time.Duration { return proccpu.Used() }
