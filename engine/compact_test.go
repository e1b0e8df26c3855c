package engine

import (
	"bytes"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/internal/vfs/errorfs"
)

// compactEnv opens a DB on fsys whose values of 256 bytes or more go to a
// value log cut every 4 KiB, and enqueues n tasks with payloads of 500
// bytes; it returns the payloads by task id.
func compactEnv(t *testing.T, fsys vfs.FS, dir string, n int) (*DB, Options, map[uint64][]byte) {
	t.Helper()
	opts := Options{Durability: SyncAlways, ValueThreshold: 256, valueFileSize: 4 << 10, SnapshotBytes: -1,
		Logger: quietLogger(), fs: fsys, Clock: NewManualClock(t0)}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	q := db.Queue(ns, "q")
	want := map[uint64][]byte{}
	for i := range n {
		p := bigJSON(i, 500)
		enq, err := q.Enqueue(ctx, Task{Payload: p})
		if err != nil {
			t.Fatal(err)
		}
		want[enq.ID] = p
	}
	return db, opts, want
}

// finishMost completes every task but one in keep: their values become
// dead bytes. It returns the payloads of the tasks left.
func finishMost(t *testing.T, db *DB, want map[uint64][]byte, keep int) map[uint64][]byte {
	t.Helper()
	q := db.Queue(ns, "q")
	ls, err := q.Claim(ctx, "w", time.Minute, len(want))
	if err != nil || len(ls) != len(want) {
		t.Fatalf("claim: %d, %v", len(ls), err)
	}
	left := map[uint64][]byte{}
	for i, l := range ls {
		if i%keep == 0 {
			left[l.ID] = want[l.ID]
			if err := q.Snooze(ctx, l, 0); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := q.Complete(ctx, l, Done{}); err != nil {
			t.Fatal(err)
		}
	}
	return left
}

// checkPayloads reads every task of want through Get and a claim.
func checkPayloads(t *testing.T, db *DB, want map[uint64][]byte) {
	t.Helper()
	q := db.Queue(ns, "q")
	for id, p := range want {
		info, err := q.Get(ctx, id)
		if err != nil || !bytes.Equal(info.Payload, p) {
			t.Fatalf("task %d: %v, payload of %d bytes, want %d", id, err, len(info.Payload), len(p))
		}
	}
}

// TestCompactValues: a pass removes the files whose values all ended and
// moves the few live values out of mostly dead ones, so the value log
// shrinks to about its live bytes; every value reads back as it was,
// before and after a reopen, and a second pass finds nothing to do.
//
// Not parallel: the background pass (every compactEvery of real time) must
// not find the dead files first, which a test slowed by others lets it do.
func TestCompactValues(t *testing.T) {
	mem := newMemFS(t)
	db, opts, want := compactEnv(t, mem, "/data/db", 120)
	left := finishMost(t, db, want, 10)
	before := db.Stats()
	removed, err := db.CompactValues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after := db.Stats()
	if removed == 0 || after.ValueLogBytes >= before.ValueLogBytes/2 {
		t.Fatalf("compaction removed %d files: %d bytes on disk before, %d after (live %d)", removed,
			before.ValueLogBytes, after.ValueLogBytes, after.ValueLiveBytes)
	}
	// What is left: the live values, their record headers, and the file
	// appends go to.
	if limit := 3*after.ValueLiveBytes/2 + 2*(4<<10); after.ValueLogBytes > limit {
		t.Fatalf("after compaction %d bytes on disk for %d live", after.ValueLogBytes, after.ValueLiveBytes)
	}
	checkPayloads(t, db, left)
	if n, err := db.CompactValues(ctx); err != nil || n != 0 {
		t.Fatalf("a second pass removed %d files: %v", n, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	opts.fs = mem.CrashClone()
	db, err = Open("/data/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	checkPayloads(t, db, left)
}

// TestCompactValuesOnline: reads and writes go on while a pass runs, and
// every read returns the value as it was (run with -race).
func TestCompactValuesOnline(t *testing.T) {
	t.Parallel()
	db, _, want := compactEnv(t, newMemFS(t), "/data/db", 120)
	defer db.Close()
	left := finishMost(t, db, want, 6)
	q := db.Queue(ns, "q")
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load() && i < 2000; i++ {
			for id, p := range left {
				info, err := q.Get(ctx, id)
				if err != nil || !bytes.Equal(info.Payload, p) {
					errs <- "a read during compaction differs"
					return
				}
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load() && i < 200; i++ {
			if _, err := q.Enqueue(ctx, Task{Payload: bigJSON(1000+i, 400)}); err != nil {
				errs <- err.Error()
				return
			}
		}
	}()
	for range 3 {
		if _, err := db.CompactValues(ctx); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	checkPayloads(t, db, left)
}

// TestCompactValuesCrash fails each file operation of a compaction pass in
// turn, then loses power: every task keeps its value, and a pass after
// the restart leaves the value log as small as an undisturbed pass does.
func TestCompactValuesCrash(t *testing.T) {
	t.Parallel()
	under := func(op errorfs.Op) bool {
		return strings.Contains(op.Path, "/vlog") || strings.Contains(op.Path, "/wal")
	}
	// Count the operations of an undisturbed pass.
	count := errorfs.NewOnIndex(0, under)
	var armed atomic.Bool
	gate := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if armed.Load() {
			return count.MaybeError(op)
		}
		return nil
	})
	mem := newMemFS(t)
	db, _, want := compactEnv(t, errorfs.Wrap(mem, gate), "/data/db", 60)
	left := finishMost(t, db, want, 5)
	armed.Store(true)
	if _, err := db.CompactValues(ctx); err != nil {
		t.Fatal(err)
	}
	armed.Store(false)
	clean := db.Stats().ValueLogBytes
	db.Close()
	points := count.Count()
	if points < 5 {
		t.Fatalf("a compaction pass made %d file operations", points)
	}
	step := 1
	if testing.Short() {
		step = max(1, points/8)
	}
	for n := 1; n <= points; n += step {
		mem := newMemFS(t)
		inj := errorfs.NewOnIndex(n, under)
		var armed atomic.Bool
		gate := errorfs.InjectorFunc(func(op errorfs.Op) error {
			if armed.Load() {
				return inj.MaybeError(op)
			}
			return nil
		})
		db, opts, want := compactEnv(t, errorfs.Wrap(mem, gate), "/data/db", 60)
		left := finishMost(t, db, want, 5)
		armed.Store(true)
		db.CompactValues(ctx) // fails at operation n, or the engine fails after it
		db.Close()
		o := opts
		o.fs = mem.CrashClone()
		db2, err := Open("/data/db", o)
		if err != nil {
			t.Fatalf("operation %d failed: open after a power loss: %v", n, err)
		}
		checkPayloads(t, db2, left)
		if _, err := db2.CompactValues(ctx); err != nil {
			t.Fatalf("operation %d failed: the next pass: %v", n, err)
		}
		if got := db2.Stats().ValueLogBytes; got > clean+4<<10 {
			t.Fatalf("operation %d failed: after the next pass %d bytes on disk, %d after an undisturbed one", n, got, clean)
		}
		checkPayloads(t, db2, left)
		db2.Close()
	}
	_ = left
}
