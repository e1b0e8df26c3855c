package engine

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/docketdb/docket/internal/testrun"
)

// TestMain collects garbage half as often as by default (GOGC=200) unless
// GOGC says otherwise or the race detector runs: the collector took a
// sixth of the package's CPU time with -short; 200 takes about 0.8 s off
// 5 s of CPU time (user and system), for a peak RSS of 210-490 MB instead
// of 180-290 MB. The tests that measure the heap collect before reading it.
// With -short the scratch directories are in memory (testrun.ShortScratch).
func TestMain(m *testing.M) {
	if _, set := os.LookupEnv("GOGC"); !set && !raceEnabled {
		debug.SetGCPercent(200)
	}
	remove := testrun.ShortScratch()
	code := m.Run()
	if damageTemplate.dir != "" {
		os.RemoveAll(damageTemplate.dir)
	}
	remove()
	os.Exit(code)
}
