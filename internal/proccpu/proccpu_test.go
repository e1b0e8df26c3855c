package proccpu

import (
	"runtime"
	"testing"
	"time"
)

// TestUsedGrowsWithWork: the CPU time the process used grows by at least
// the work done in between (where the platform says it at all).
func TestUsedGrowsWithWork(t *testing.T) {
	before := Used()
	if before == 0 {
		if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
			t.Skip("the platform does not say")
		}
		t.Fatal("no CPU time used by a running test process")
	}
	deadline := time.Now().Add(20 * time.Millisecond)
	n := 0
	for time.Now().Before(deadline) {
		n++
	}
	if after := Used(); after < before+10*time.Millisecond {
		t.Fatalf("CPU used %v -> %v across 20 ms of spinning (%d turns)", before, after, n)
	}
}
