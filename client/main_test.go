package client

import (
	"testing"

	"github.com/docketdb/docket/internal/testrun"
)

// TestMain runs twice as many tests at once as there are CPUs unless
// -parallel says otherwise: most of this package's tests wait (on
// deadlines, paused and refusing nodes, servers restarting) rather than
// compute, about 0.6 s of CPU time in 2 s of wall time with one test per
// CPU, 1.3 s with two.
func TestMain(m *testing.M) { testrun.Waiting(m) }
