package engine

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReopenAfterEveryOperation closes and reopens after each kind of
// operation, in each durability mode and with snapshots every few records,
// and checks the state is unchanged and the indexes verify.
func TestReopenAfterEveryOperation(t *testing.T) {
	t.Parallel()
	for _, mode := range []Durability{SyncAlways, SyncInterval, SyncNever} {
		for _, snapBytes := range []int64{-1, 1} {
			t.Run(mode.String()+map[bool]string{true: "/snapshots", false: "/log-only"}[snapBytes > 0], func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, false, func(o *Options) {
					o.Durability, o.SnapshotBytes, o.RetainCompleted = mode, snapBytes, time.Hour
				})
				q := e.q("q")
				steps := []func(){
					func() {
						e.enqueue(q, Task{Payload: []byte(`{"n":1}`), IdempotencyKey: "a", Headers: map[string]string{"h": "v"}})
					},
					func() { e.enqueue(q, Task{Delay: time.Minute, Priority: 3, Kind: "timer"}) },
					func() { q.EnqueueBatch(ctx, []Task{{}, {Priority: 2}, {MaxAttempts: 1}, {}, {}, {}}) },
					func() { e.db.KV(ns).Commit(ctx, Set("k", []byte("v")), Set("j", []byte("w"))) },
					func() { e.db.KV(ns).Commit(ctx, Delete("j")) },
					func() { e.claim(q, 2) },
					func() {
						l := e.claim(q, 1)[0]
						hb(ctx, q, l, time.Hour, []byte(`{"p":1}`))
					},
					func() {
						l := e.claim(q, 1)[0]
						q.Fail(ctx, l, Failure{Err: "boom"})
					},
					func() {
						l := e.claim(q, 1)[0]
						q.Fail(ctx, l, Failure{Err: "fatal", Permanent: true})
					},
					func() {
						e.clock.Advance(2 * time.Minute) // timer due, first leases expire
						l := e.claim(q, 1)[0]
						q.Complete(ctx, l, Done{Result: []byte(`1`), Ops: []Op{Set("done", nil)},
							FollowUps: []FollowUp{{Queue: "next", Task: Task{IdempotencyKey: "f"}}}})
					},
					func() {
						page, _ := q.List(ctx, ListOptions{State: Dead})
						q.Redrive(ctx, page.Tasks[0].ID)
					},
					func() {
						l := e.claim(q, 1)[0]
						q.Snooze(ctx, l, time.Second)
					},
					func() {
						page, _ := q.List(ctx, ListOptions{State: Ready})
						q.Cancel(ctx, page.Tasks[0].ID)
					},
					func() { e.db.Checkpoint(ctx) },
					func() { e.clock.Advance(2 * time.Hour); e.enqueue(q, Task{}) }, // retention pruning
				}
				for _, step := range steps {
					step()
					if err := e.db.Verify(); err != nil {
						t.Fatal(err)
					}
					e.reopen()
				}
				if e.db.Stats().Tasks == 0 {
					t.Fatal("nothing left to compare")
				}
			})
		}
	}
}

func TestSecondOpenRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	_, err := Open(e.dir, Options{})
	wantErr(t, err, ErrLocked)
	e.db.Close()
	e.open()
}

func walSegments(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "wal"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if !strings.Contains(e.Name(), ".") {
			out = append(out, filepath.Join(dir, "wal", e.Name()))
		}
	}
	sort.Strings(out)
	return out
}

// crash abandons the DB without Close (no final snapshot) and releases the
// directory lock, as a killed process would.
func (e *env) crash() {
	c := e.db.c
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	close(c.stopBg)
	c.bg.Wait()
	d := c.st.(*diskStorage)
	d.log.Close()
	d.lock.Close()
}

func TestTornTailCutOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.SnapshotBytes = -1 })
	q := e.q("q")
	for range 10 {
		e.enqueue(q, Task{Payload: []byte(`{"x":"0123456789"}`)})
	}
	want := dump(e.db)
	e.enqueue(q, Task{Payload: []byte(`{"x":"torn"}`)})
	e.crash()
	segs := walSegments(t, e.dir)
	last := segs[len(segs)-1]
	st, _ := os.Stat(last)
	if err := os.Truncate(last, st.Size()-3); err != nil {
		t.Fatal(err)
	}
	e.open()
	if got := dump(e.db); got != want {
		t.Fatalf("after a torn tail:\n%s\nwant\n%s", got, want)
	}
	if err := e.db.Verify(); err != nil {
		t.Fatal(err)
	}
	// The repaired log takes new appends.
	e.enqueue(q, Task{})
	e.reopen()
}

func TestCorruptMiddleRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.SnapshotBytes = -1 })
	q := e.q("q")
	for range 20 {
		e.enqueue(q, Task{Payload: []byte(`{"x":"0123456789"}`)})
	}
	e.crash()
	segs := walSegments(t, e.dir)
	data, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x10
	if err := os.WriteFile(segs[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(e.dir, e.opts)
	wantErr(t, err, ErrCorrupt)
	if !strings.Contains(err.Error(), filepath.Base(segs[0])) || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("error does not name the file and offset: %v", err)
	}
}

func TestCorruptNewestSnapshotFallsBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.SnapshotBytes = -1 })
	q := e.q("q")
	e.enqueue(q, Task{Payload: []byte(`1`)})
	if err := e.db.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	e.enqueue(q, Task{Payload: []byte(`2`)})
	if err := e.db.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	e.enqueue(q, Task{Payload: []byte(`3`)})
	want := dump(e.db)
	e.crash()
	snaps, _ := filepath.Glob(filepath.Join(e.dir, "snap", "*.snap"))
	sort.Strings(snaps)
	if len(snaps) != 2 {
		t.Fatalf("want two snapshots kept, have %v", snaps)
	}
	newest := snaps[len(snaps)-1]
	data, _ := os.ReadFile(newest)
	data[len(data)/2] ^= 0xff
	os.WriteFile(newest, data, 0o644)
	e.open()
	if got := dump(e.db); got != want {
		t.Fatalf("fallback state:\n%s\nwant\n%s", got, want)
	}
	if err := e.db.Verify(); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotTruncatesLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.SnapshotBytes = 4096; o.SegmentBytes = 4096 })
	q := e.q("q")
	// 2000 rounds write some 380 KB of log, 94 segments untruncated; the
	// 400 of -short some 19, still more than twice the 8 allowed.
	n := 2000
	if testing.Short() {
		n = 400
	}
	for i := range n {
		e.enqueue(q, Task{Payload: []byte(`{"pad":"0123456789012345678901234567890123456789"}`)})
		if i%3 == 0 {
			for _, l := range e.claim(q, 1) {
				q.Complete(ctx, l, Done{})
			}
		}
	}
	e.db.c.bg.Wait()
	st := e.db.Stats()
	if st.Snapshots == 0 {
		t.Fatal("no automatic snapshot taken")
	}
	// A commit that passes the threshold while a snapshot is being written
	// starts none (one at a time): on a loaded machine the last commits
	// may all have. The next commit starts the one they are owed.
	e.enqueue(q, Task{})
	e.db.c.bg.Wait()
	if segs := walSegments(t, e.dir); len(segs) > 8 {
		t.Fatalf("log not truncated after snapshots: %d segments", len(segs))
	}
	e.reopen()
}

func TestConcurrentClaimCompleteExactlyOnce(t *testing.T) {
	t.Parallel()
	const n, workers = 20000, 16
	e := newEnv(t, false, func(o *Options) { o.Clock = nil; o.Durability = SyncNever })
	q := e.q("q")
	batch := make([]Task, 1000)
	for i := 0; i < n; i += len(batch) {
		if _, err := q.EnqueueBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	holder := map[uint64]string{}
	done := map[uint64]int{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		owner := "w" + string(rune('A'+w))
		go func() {
			defer wg.Done()
			for {
				ls, err := q.Claim(ctx, owner, time.Minute, 1+w%4)
				if err != nil {
					errs <- err
					return
				}
				if len(ls) == 0 {
					return
				}
				for _, l := range ls {
					mu.Lock()
					if h, ok := holder[l.ID]; ok {
						mu.Unlock()
						errs <- errors.New("task leased to " + h + " and " + owner)
						return
					}
					holder[l.ID] = owner
					mu.Unlock()
					// The task stays held until its completion commits: a
					// second lease meanwhile would find it in holder.
					if _, err := q.Complete(ctx, l, Done{}); err != nil {
						errs <- err
						return
					}
					mu.Lock()
					delete(holder, l.ID)
					done[l.ID]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(done) != n {
		t.Fatalf("%d tasks completed, want %d", len(done), n)
	}
	for id, c := range done {
		if c != 1 {
			t.Fatalf("task %d completed %d times", id, c)
		}
	}
	if st := e.db.Stats(); st.Completed != n || st.Tasks != 0 {
		t.Fatalf("stats %+v", st)
	}
	e.reopen()
}

func TestFsyncFailureStopsTheEngine(t *testing.T) {
	t.Parallel()
	var fail sync.Map
	e := newEnv(t, false, func(o *Options) {
		o.failpoint = func(name string) error {
			if _, ok := fail.Load(name); ok {
				return errors.New("injected " + name + " failure")
			}
			return nil
		}
	})
	q := e.q("q")
	e.enqueue(q, Task{Payload: []byte(`"kept"`)})
	want := dump(e.db)
	fail.Store("sync", true)
	_, err := q.Enqueue(ctx, Task{})
	wantErr(t, err, ErrFailed)
	fail.Delete("sync")
	_, err = q.Enqueue(ctx, Task{})
	wantErr(t, err, ErrFailed)
	_, err = q.Counts(ctx)
	wantErr(t, err, ErrFailed)
	e.db.Close()
	e.open()
	got := dump(e.db)
	// The unacknowledged enqueue may or may not have reached the disk; the
	// acknowledged one must be there. (The queue's totals count either.)
	tasks := func(s string) string {
		var keep []string
		for _, l := range strings.Split(s, "\n")[1:] {
			if !strings.HasPrefix(l, "totals ") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	if !strings.HasPrefix(tasks(got), tasks(want)) {
		t.Fatalf("acknowledged state lost:\n%s\nwant prefix\n%s", got, want)
	}
}

func TestOnlySnapshotUnreadableReplaysWholeLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.SnapshotBytes = -1 })
	q := e.q("q")
	e.enqueue(q, Task{Payload: []byte(`1`)})
	if err := e.db.Checkpoint(ctx); err != nil { // one snapshot: the log is kept whole
		t.Fatal(err)
	}
	e.enqueue(q, Task{Payload: []byte(`2`)})
	want := dump(e.db)
	e.crash()
	snaps, _ := filepath.Glob(filepath.Join(e.dir, "snap", "*.snap"))
	if len(snaps) != 1 {
		t.Fatalf("snapshots %v", snaps)
	}
	data, _ := os.ReadFile(snaps[0])
	data[len(data)/2] ^= 0xff
	os.WriteFile(snaps[0], data, 0o644)
	e.open()
	if got := dump(e.db); got != want {
		t.Fatalf("recovered from the log alone:\n%s\nwant\n%s", got, want)
	}
	// Once the log no longer reaches back to the first batch, unreadable
	// snapshots are refused rather than recovered short.
	for range 2 {
		e.enqueue(q, Task{})
		if err := e.db.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
	}
	e.crash()
	snaps, _ = filepath.Glob(filepath.Join(e.dir, "snap", "*.snap"))
	for _, p := range snaps {
		data, _ := os.ReadFile(p)
		data[len(data)/2] ^= 0xff
		os.WriteFile(p, data, 0o644)
	}
	_, err := Open(e.dir, e.opts)
	wantErr(t, err, ErrCorrupt)
}

// TestBackgroundSyncsDoNotGather: the syncs no commit waits for, a
// snapshot's and the interval loop's, do not wait for committers, even
// after an fsync that covered several commits (which a commit's sync
// would expect to come back).
func TestBackgroundSyncsDoNotGather(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) {
		o.Durability, o.SyncEvery, o.SnapshotBytes = SyncInterval, time.Hour, -1
	})
	q := e.q("q")
	for round := range 3 {
		for range 5 {
			e.enqueue(q, Task{})
		}
		if round%2 == 0 {
			e.db.c.syncInterval()
		} else if err := e.db.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
	}
	st := e.db.c.st.(*diskStorage).log.Stats()
	if st.Syncs < 3 || st.Gathers != 0 {
		t.Fatalf("%d fsyncs, %d of them after waiting for committers; want at least 3, none waiting", st.Syncs, st.Gathers)
	}
}

// TestStatsCountGathers: a commit's sync whose leader expects the
// committers the fsync before covered, and finds fewer, waits for them
// (LogGathers) and, when they do not come, counts a miss; a round that
// finds them all waits for nothing.
func TestStatsCountGathers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	q := e.q("q")
	// Three commits logged together and made durable by one fsync, whose
	// leader (a Deferred's Wait) waits for no one.
	before := e.db.Stats().LogSyncs
	dctx, d := DeferDurable(ctx)
	for range 3 {
		if _, err := q.Enqueue(dctx, Task{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Wait(); err != nil {
		t.Fatal(err)
	}
	if s := e.db.Stats(); s.LogSyncs != before+1 || s.LogGathers != 0 {
		t.Fatalf("%d fsyncs, %d gathers; want 1 fsync and no gather", s.LogSyncs-before, s.LogGathers)
	}
	// A lone commit: its leader waits for the other two, who never come.
	e.enqueue(q, Task{})
	if s := e.db.Stats(); s.LogGathers != 1 || s.LogGatherMisses != 1 {
		t.Fatalf("gathers %d, missed %d; want 1 and 1", s.LogGathers, s.LogGatherMisses)
	}
}

// TestIntervalSyncFailureStopsTheEngine: in SyncInterval, where commits
// return before the fsync, a failed fsync of the interval loop stops the
// engine as a commit's would: at once (DB.Err), and every later call gets
// ErrFailed.
func TestIntervalSyncFailureStopsTheEngine(t *testing.T) {
	t.Parallel()
	var failing atomic.Bool
	e := newEnv(t, false, func(o *Options) {
		o.Durability, o.SyncEvery = SyncInterval, time.Hour
		o.failpoint = func(name string) error {
			if name == "sync" && failing.Load() {
				return errors.New("injected sync failure")
			}
			return nil
		}
	})
	q := e.q("q")
	e.enqueue(q, Task{}) // answered once written, before any fsync
	failing.Store(true)
	e.db.c.syncInterval()
	// Failed at once, as /readyz sees it, not only at the next commit.
	wantErr(t, e.db.Err(), ErrFailed)
	_, err := q.Enqueue(ctx, Task{})
	wantErr(t, err, ErrFailed)
	_, err = q.Counts(ctx)
	wantErr(t, err, ErrFailed)
}
