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

func TestFlushToSharesWrites(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	for seq := uint64(1); seq <= 3; seq++ {
		if err := l.Append(seq, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.FlushTo(1); err != nil {
		t.Fatal(err)
	}
	before := l.Stats().Flushes
	for seq := uint64(1); seq <= 3; seq++ {
		if err := l.FlushTo(seq); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.Stats().Flushes; got != before {
		t.Fatalf("FlushTo of written records wrote again: %d flushes, want %d", got, before)
	}
	if err := l.Append(4, []byte("y")); err != nil {
		t.Fatal(err)
	}
	if err := l.FlushTo(4); err != nil || l.Stats().Flushes != before+1 {
		t.Fatalf("FlushTo(4): %v, flushes %d", err, l.Stats().Flushes)
	}
	var n int
	if err := l.Replay(1, func(uint64, []byte) error { n++; return nil }); err != nil || n != 4 {
		t.Fatalf("replay %d %v", n, err)
	}
}
