package admit

import (
	"testing"
	"time"
)

// TestMemoProbe: a figure is read once, kept while fresh, and read again
// once it is not (or when the clock went back).
func TestMemoProbe(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	reads := int64(0)
	p := memoProbe{
		read:  func() int64 { reads++; return reads * 100 },
		now:   func() time.Time { return now },
		fresh: time.Second,
	}
	step := func(d time.Duration, want, wantReads int64) {
		t.Helper()
		now = now.Add(d)
		if got := p.get(); got != want || reads != wantReads {
			t.Errorf("at +%v: %d after %d reads, want %d after %d", d, got, reads, want, wantReads)
		}
	}
	step(0, 100, 1)
	step(time.Millisecond, 100, 1)
	step(998*time.Millisecond, 100, 1) // 999 ms old
	step(time.Millisecond, 200, 2)     // a second old: read again
	step(time.Hour, 300, 3)
	step(-time.Minute, 400, 4) // the clock went back
	step(0, 400, 4)
}

// TestAvailableMemoryIsKept: Opens in a row read the machine's memory
// once, and an Open a second later reads it again.
func TestAvailableMemoryIsKept(t *testing.T) {
	// Not parallel: it swaps the package's probe's reader and clock.
	now := time.Unix(1000, 0)
	reads := 0
	available.mu.Lock()
	read, clock, at := available.read, available.now, available.at
	available.read = func() int64 { reads++; return 1 << 30 }
	available.now = func() time.Time { return now }
	available.at = time.Time{}
	available.mu.Unlock()
	t.Cleanup(func() {
		available.mu.Lock()
		available.read, available.now, available.at = read, clock, at
		available.mu.Unlock()
	})
	for range 3 {
		if got := BudgetOf(0); got != (1<<30)/DefaultMemoryShare || reads != 1 {
			t.Fatalf("BudgetOf(0) = %d after %d reads, want %d after 1", got, reads, (1<<30)/DefaultMemoryShare)
		}
	}
	now = now.Add(memoryFresh)
	if AvailableMemory(); reads != 2 {
		t.Errorf("%d reads once the figure is %v old, want 2", reads, memoryFresh)
	}
}
