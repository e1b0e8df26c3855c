package wal

import (
	"sync"
	"testing"
	"time"
)

// TestOnSyncReportsGroups checks that OnSync sees every fsync with the
// number of records it made durable, so group sizes add up to the records.
func TestOnSyncReportsGroups(t *testing.T) {
	var mu sync.Mutex
	var calls, records int
	l := openLog(t, t.TempDir(), Options{OnSync: func(d time.Duration, n int) {
		mu.Lock()
		defer mu.Unlock()
		if d <= 0 || n <= 0 {
			t.Errorf("OnSync(%v, %d)", d, n)
		}
		calls++
		records += n
	}})
	for seq := uint64(1); seq <= 10; seq++ {
		if err := l.Append(seq, []byte("x")); err != nil {
			t.Fatal(err)
		}
		if seq%5 == 0 {
			if err := l.Sync(seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 2 || records != 10 {
		t.Fatalf("OnSync saw %d fsyncs covering %d records, want 2 covering 10", calls, records)
	}
}
