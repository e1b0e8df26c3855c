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
	var want [GroupBuckets]uint64
	want[GroupBucket(5)] = 2
	if got := l.Stats().Groups; got != want {
		t.Fatalf("Stats().Groups = %v, want two groups of 5: %v", got, want)
	}
}

// TestGroupBuckets checks that the buckets of Stats.Groups cover every
// group size once, in order, exactly up to 16.
func TestGroupBuckets(t *testing.T) {
	next := 1
	for i := range GroupBuckets {
		lo, hi := GroupRange(i)
		if lo != next {
			t.Fatalf("bucket %d starts at %d, want %d", i, lo, next)
		}
		if i < 16 && hi != lo {
			t.Fatalf("bucket %d is %d-%d, want %d alone", i, lo, hi, lo)
		}
		if (hi == 0) != (i == GroupBuckets-1) {
			t.Fatalf("bucket %d is %d-%d: only the last is open-ended", i, lo, hi)
		}
		last := hi
		if hi == 0 {
			last = lo + 1000
		}
		for n := lo; n <= last; n++ {
			if b := GroupBucket(n); b != i {
				t.Fatalf("GroupBucket(%d) = %d, want %d (%d-%d)", n, b, i, lo, hi)
			}
		}
		next = hi + 1
	}
	if b := GroupBucket(1 << 40); b != GroupBuckets-1 {
		t.Fatalf("GroupBucket(2^40) = %d, want the last bucket", b)
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
