package server

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"testing"
)

// TestMain runs twice as many tests at once as there are CPUs unless
// -parallel says otherwise: most of this package's tests wait (on
// connections, body and frame deadlines, a server's shutdown) rather than
// compute, about 1.5 s of CPU time in 4 s of wall time with one test per
// CPU, 2.5 s with two.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", fmt.Sprint(2*runtime.GOMAXPROCS(0)))
	}
	os.Exit(m.Run())
}
