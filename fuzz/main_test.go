package fuzz

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/docketdb/docket/internal/testrun"
)

// TestMain collects garbage a fifth as often as by default (GOGC=400)
// unless GOGC says otherwise or the race detector runs: with the default
// the collector took about a third of the package's CPU time with -short
// (9.7 s of user time, 6.2 s with 200), and 400 takes another second off
// 7 s of CPU time (user and system), for a peak RSS of 330-400 MB
// instead of 210 MB.
// With -short the scratch directories are in memory (testrun.ShortScratch).
func TestMain(m *testing.M) {
	if _, set := os.LookupEnv("GOGC"); !set && !raceEnabled {
		debug.SetGCPercent(400)
	}
	remove := testrun.ShortScratch()
	code := m.Run()
	remove()
	os.Exit(code)
}
