package engine

import (
	"testing"
	"time"
)

// TestCompactValuesLocksPerBatch: a compaction asks which records of a
// file are live under the engine lock once for each batch of records, not
// once a record, so that it does not take the lock from the commits of a
// busy DB hundreds of thousands of times per file; what it moves still
// reads back.
func TestCompactValuesLocksPerBatch(t *testing.T) {
	opts := Options{Durability: SyncNever, ValueThreshold: 256, valueFileSize: 128 << 10, SnapshotBytes: -1,
		Logger: quietLogger(), Clock: NewManualClock(t0)}
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := db.Queue(ns, "q")
	const n = 1500 // about 250 records of 500 bytes a file: six files
	want := map[uint64][]byte{}
	batch := make([]Task, 100)
	for i := 0; i < n; i += len(batch) {
		for j := range batch {
			batch[j].Payload = bigJSON(i+j, 500)
		}
		enqs, err := q.EnqueueBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		for j, e := range enqs {
			want[e.ID] = batch[j].Payload
		}
	}
	ls, err := q.Claim(ctx, "w", time.Minute, n)
	if err != nil || len(ls) != n {
		t.Fatalf("claim: %d, %v", len(ls), err)
	}
	left := map[uint64][]byte{}
	for i, l := range ls {
		if i%3 == 0 {
			left[l.ID] = want[l.ID]
			if err := q.Snooze(ctx, l, 0); err != nil {
				t.Fatal(err)
			}
		} else if _, err := q.Complete(ctx, l, Done{}); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := db.CompactValues(ctx)
	if err != nil || removed < 4 {
		t.Fatalf("compaction removed %d files, %v", removed, err)
	}
	c := db.c
	c.mu.Lock()
	checks := c.liveChecks
	c.mu.Unlock()
	// Each file's records fit in one or two batches.
	if checks > 2*removed {
		t.Errorf("compacting %d files took the engine lock %d times to check liveness, want at most %d", removed, checks, 2*removed)
	}
	checkPayloads(t, db, left)
}
