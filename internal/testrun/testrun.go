// Package testrun holds what the TestMain of this repository's packages
// share.
package testrun

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"testing"
)

// Waiting runs m with twice as many tests at once as there are CPUs,
// unless -parallel says otherwise, and exits with its status: for a
// package whose tests mostly wait (on connections, deadlines, servers
// stopping) rather than compute.
func Waiting(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", fmt.Sprint(2*runtime.GOMAXPROCS(0)))
	}
	os.Exit(m.Run())
}
