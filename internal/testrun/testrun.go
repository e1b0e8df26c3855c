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

// shm is where a -short run keeps its scratch directories when it exists.
var shm = "/dev/shm"

// ShortScratch puts the scratch directories of a -short run (t.TempDir,
// os.MkdirTemp) in memory: TMPDIR becomes a directory of its own under
// /dev/shm, and the function returned removes it. The quick tier's tests
// then spend no time in the disk's fsyncs (half of engine's wall time);
// what they assert holds on any file system, and the crash tests use the
// strict memory file system (internal/vfs) either way. Without -short,
// with TMPDIR set by the caller or without /dev/shm, it changes nothing:
// the full tier runs on the disk.
func ShortScratch() (remove func()) {
	if !flag.Parsed() {
		flag.Parse()
	}
	nothing := func() {}
	if !testing.Short() {
		return nothing
	}
	if _, set := os.LookupEnv("TMPDIR"); set {
		return nothing
	}
	if fi, err := os.Stat(shm); err != nil || !fi.IsDir() {
		return nothing
	}
	dir, err := os.MkdirTemp(shm, "docket-test-")
	if err != nil {
		return nothing
	}
	os.Setenv("TMPDIR", dir)
	return func() {
		os.Unsetenv("TMPDIR")
		os.RemoveAll(dir)
	}
}

// Run runs m with the scratch directories of a -short run in memory
// (ShortScratch) and exits with its status.
func Run(m *testing.M) {
	remove := ShortScratch()
	code := m.Run()
	remove()
	os.Exit(code)
}

// Waiting runs m with twice as many tests at once as there are CPUs,
// unless -parallel says otherwise, and its scratch directories in memory
// with -short (ShortScratch), and exits with its status: for a package
// whose tests mostly wait (on connections, deadlines, servers stopping)
// rather than compute.
func Waiting(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", fmt.Sprint(2*runtime.GOMAXPROCS(0)))
	}
	Run(m)
}
