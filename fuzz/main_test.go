package fuzz

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestMain collects garbage half as often as by default (GOGC=200) unless
// GOGC says otherwise or the race detector runs: with the default the
// collector took about a third of the package's CPU time with -short (9.7 s
// of user time, 6.2 s with 200), for a peak of 280 MB instead of 150 MB.
func TestMain(m *testing.M) {
	if _, set := os.LookupEnv("GOGC"); !set && !raceEnabled {
		debug.SetGCPercent(200)
	}
	os.Exit(m.Run())
}
