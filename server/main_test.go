package server

import (
	"testing"

	"github.com/docketdb/docket/internal/testrun"
)

// TestMain runs twice as many tests at once as there are CPUs unless
// -parallel says otherwise: most of this package's tests wait (on
// connections, body and frame deadlines, a server's shutdown) rather than
// compute, about 1.5 s of CPU time in 4 s of wall time with one test per
// CPU, 2.5 s with two.
func TestMain(m *testing.M) { testrun.Waiting(m) }
