package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/wal"
)

// appendLogged writes batches straight to the log of a closed directory,
// as a replicated log would hold them: committed before anyone knew
// whether they apply.
func appendLogged(t *testing.T, dir string, batches ...*index.Batch) {
	t.Helper()
	log, err := wal.Open(filepath.Join(dir, "wal"), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	enc := index.NewEncoder()
	seq := log.LastSeq()
	for _, b := range batches {
		seq++
		if b.Seq == 0 {
			b.Seq = seq
		}
		data, err := enc.Batch(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := log.Append(seq, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Sync(seq); err != nil {
		t.Fatal(err)
	}
}

// TestReplayContinuesPastRefusal: a logged batch whose assertion does not
// hold is refused, applies nothing, and replay goes on; Open and Check agree
// and the next commit follows the refused batch's sequence number.
func TestReplayContinuesPastRefusal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.SnapshotBytes = -1 })
	q := e.q("q")
	e.enqueue(q, Task{})
	e.crash()
	ins := idxNS(ns)
	appendLogged(t, e.dir,
		&index.Batch{Now: t0.UnixMicro(), Assertions: []index.Assertion{{Kind: index.AssertKVExists, NS: ins, Key: "missing"}},
			Mutations: []index.Mutation{{Kind: index.MutSetKV, KV: index.KV{Namespace: ins, Key: "refused", Value: []byte("x")}}}},
		&index.Batch{Now: t0.UnixMicro(), Mutations: []index.Mutation{{Kind: index.MutSetKV, KV: index.KV{Namespace: ins, Key: "applied", Value: []byte("y")}}}},
	)
	rep, err := Check(e.dir)
	if err != nil || rep.Refused != 1 || rep.Seq != 3 {
		t.Fatalf("check: refused %d seq %d: %v", rep.Refused, rep.Seq, err)
	}
	e.open()
	kv := e.db.KV(ns)
	if _, err := kv.Get(ctx, "refused"); err == nil {
		t.Fatal("a refused batch applied")
	}
	if got, err := kv.Get(ctx, "applied"); err != nil || got.Version != 3 {
		t.Fatalf("the batch after a refusal: %+v %v", got, err)
	}
	res, err := kv.Commit(ctx, Set("next", nil))
	if err != nil || res.Version != 4 {
		t.Fatalf("the next commit must follow the refused batch: %+v %v", res, err)
	}
	e.reopen()
}

// TestCheckAgreesWithOpenOnSequence: a log record holding a batch with
// another sequence number is damage for Check exactly as for Open (they
// share one replay).
func TestCheckAgreesWithOpenOnSequence(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.SnapshotBytes = -1 })
	e.enqueue(e.q("q"), Task{})
	e.crash()
	appendLogged(t, e.dir, &index.Batch{Seq: 7, Now: t0.UnixMicro(), Mutations: []index.Mutation{
		{Kind: index.MutSetKV, KV: index.KV{Namespace: idxNS(ns), Key: "k", Value: []byte("v")}}}})
	_, err := Check(e.dir)
	wantErr(t, err, ErrCorrupt)
	_, err = Open(e.dir, e.opts)
	wantErr(t, err, ErrCorrupt)
}

// TestReplicaRestore: a replica restored from a DB's encoded state has the
// same hash and follows the DB's next batches.
func TestReplicaRestore(t *testing.T) {
	t.Parallel()
	var r *replica
	e := newEnv(t, true, func(o *Options) {
		o.tap = func(seq uint64, data []byte) {
			if r != nil {
				if _, err := r.Apply(seq, data); err != nil {
					t.Error(err)
				}
			}
		}
	})
	q := e.q("q")
	e.enqueue(q, Task{Headers: map[string]string{"b": "1", "a": "2"}})
	e.claim(q, 1)
	var buf bytes.Buffer
	if err := e.db.EncodeState(&buf); err != nil {
		t.Fatal(err)
	}
	r = newReplica()
	if err := r.RestoreState(&buf); err != nil {
		t.Fatal(err)
	}
	e.enqueue(q, Task{})
	lh, _ := e.db.StateHash()
	if fh, _ := r.StateHash(); fh != lh || r.Seq() != 3 {
		t.Fatalf("restored replica diverged at seq %d", r.Seq())
	}
	// Damage is refused, and a failed replica refuses batches.
	bad := newReplica()
	wantErr(t, bad.RestoreState(bytes.NewReader([]byte{3, 1, 2, 3})), ErrCorrupt)
	_, err := bad.Apply(1, []byte{0xc1})
	wantErr(t, err, ErrCorrupt)
	wantErr(t, newReplica().RestoreState(bytes.NewReader(nil)), ErrCorrupt)
	// A batch that does not follow the replica's state is damage.
	var logged []byte
	e.db.c.opts.tap = func(_ uint64, data []byte) { logged = bytes.Clone(data) }
	e.enqueue(q, Task{})
	gap := newReplica()
	_, err = gap.Apply(4, logged)
	wantErr(t, err, ErrCorrupt)
	// State is for the program that opened the DB, not for a caller.
	wantErr(t, errOnly(e.db.As(Caller{ID: "c"}).StateHash()), ErrPermission)
	wantErr(t, e.db.As(Caller{ID: "c"}).EncodeState(&buf), ErrPermission)
}

// TestOpensVersion1Directory opens a directory written by the previous
// format (version 1 snapshot records and log batches: no time, no seed, no
// lease secrets, headers in map order), committed as a fixture: everything
// reads, leases taken before keep working (their secret is 0), and new
// writes use the current format on top.
func TestOpensVersion1Directory(t *testing.T) {
	t.Parallel()
	dir, _ := fixture(t, "v1dir")
	rep, err := Check(dir)
	if err != nil || rep.Seq != 6 || rep.Tasks != 3 {
		t.Fatalf("check: %+v %v", rep, err)
	}
	clock := NewManualClock(t0.Add(2 * time.Minute))
	db, err := Open(dir, Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	q := db.Queue(ns, "q")
	info, err := q.Get(ctx, 1)
	if err != nil || info.State != InFlight || info.Headers["m"] != "3" || info.Kind != "job" || info.IdempotencyKey != "one" {
		t.Fatalf("task 1: %+v %v", info, err)
	}
	if e, err := db.KV(ns).Get(ctx, "k"); err != nil || string(e.Value) != "v" {
		t.Fatalf("kv: %+v %v", e, err)
	}
	// The lease of task 2 was taken before the snapshot, task 1's after it.
	for _, id := range []uint64{2, 1} {
		if _, err := q.Complete(ctx, Lease{ID: id, Namespace: ns, Queue: "q", Token: 1}, Done{}); err != nil {
			t.Fatalf("complete version 1 lease of task %d: %v", id, err)
		}
	}
	ls, err := q.Claim(ctx, "w", time.Minute, 1)
	if err != nil || len(ls) != 1 || ls[0].ID != 3 || ls[0].Secret == 0 {
		t.Fatalf("claim after upgrade: %+v %v", ls, err)
	}
	db = reopenSame(t, db, dir, Options{Clock: clock})
}

// TestOpensVersion2Directory opens a directory written in format version 2
// (before attempt histories, follow-up links and queue totals were
// recorded), committed as a fixture with the leases it handed out: every
// task reads as it was written, the leases keep working, and the upgraded
// directory reopens to the same state.
func TestOpensVersion2Directory(t *testing.T) {
	t.Parallel()
	dir, leases := fixture(t, "v2dir")
	rep, err := Check(dir)
	if err != nil || rep.Seq != 18 || rep.Tasks != 7 {
		t.Fatalf("check: %+v %v", rep, err)
	}
	clock := NewManualClock(t0.Add(5 * time.Second))
	opts := Options{Clock: clock, RetainCompleted: 1000 * time.Hour}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	q := db.Queue(ns, "q")
	want := []struct {
		id      uint64
		state   State
		attempt int
		lastErr string
	}{
		{1, Completed, 1, ""}, {2, InFlight, 2, "boom 1"}, {3, Dead, 1, "fatal"}, {4, Scheduled, 0, ""},
		{5, Ready, 0, ""}, {6, InFlight, 1, ""}, {7, Completed, 1, ""},
	}
	for _, w := range want {
		info, err := q.Get(ctx, w.id)
		if err != nil || info.State != w.state || info.Attempts != w.attempt || info.LastError != w.lastErr {
			t.Fatalf("task %d: %+v %v", w.id, info, err)
		}
	}
	if info, _ := q.Get(ctx, 1); string(info.Result) != `"ok"` || info.Headers["a"] != "2" || info.IdempotencyKey != "one" {
		t.Fatalf("task 1: %+v", info)
	}
	if e, err := db.KV(ns).Get(ctx, "k"); err != nil || string(e.Value) != "v" {
		t.Fatalf("kv: %+v %v", e, err)
	}
	// The lease of task 2 was taken before the snapshot, task 6's after it.
	for _, id := range []string{"2", "6"} {
		if _, err := q.Complete(ctx, leases[id], Done{}); err != nil {
			t.Fatalf("complete version 2 lease of task %s: %v", id, err)
		}
	}
	db = reopenSame(t, db, dir, opts)
}

// TestOpensVersion3Directory opens a directory written in format version 3
// (before queue settings and unique-by-content keys were recorded),
// committed as a fixture with the leases it handed out: every task, key
// and total reads as it was written, the leases keep working, the queues
// have default settings, a new task can wait on the old ones, and the
// upgraded directory reopens to the same state.
func TestOpensVersion3Directory(t *testing.T) {
	t.Parallel()
	dir, leases := fixture(t, "v3dir")
	rep, err := Check(dir)
	if err != nil || rep.Seq != 14 || rep.Tasks != 6 {
		t.Fatalf("check: %+v %v", rep, err)
	}
	clock := NewManualClock(t0.Add(5 * time.Second))
	opts := Options{Clock: clock, RetainCompleted: 1000 * time.Hour}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	q := db.Queue(ns, "q")
	want := []struct {
		id      uint64
		state   State
		attempt int
		lastErr string
	}{
		{1, Completed, 1, ""}, {2, InFlight, 2, "boom 1"}, {3, Dead, 1, "fatal"}, {4, Scheduled, 0, ""},
		{6, Ready, 0, ""}, {7, InFlight, 1, ""},
	}
	for _, w := range want {
		info, err := q.Get(ctx, w.id)
		if err != nil || info.State != w.state || info.Attempts != w.attempt || info.LastError != w.lastErr {
			t.Fatalf("task %d: %+v %v", w.id, info, err)
		}
	}
	if info, _ := q.Get(ctx, 1); string(info.Result) != `"ok"` || info.Headers["a"] != "2" || info.IdempotencyKey != "one" ||
		!slices.Equal(info.FollowUps, []uint64{6}) {
		t.Fatalf("task 1: %+v", info)
	}
	if info, _ := q.Get(ctx, 6); info.Parent != 1 {
		t.Fatalf("task 6: %+v", info)
	}
	if e, err := db.KV(ns).Get(ctx, "k"); err != nil || string(e.Value) != "v" {
		t.Fatalf("kv: %+v %v", e, err)
	}
	// The keys of the completed task (ended) and the dead one (live) still
	// deduplicate.
	for key, id := range map[string]uint64{"one": 1, "three": 3} {
		if e, err := q.Enqueue(ctx, Task{IdempotencyKey: key}); err != nil || e.ID != id || !e.Deduplicated {
			t.Fatalf("key %q: %+v %v", key, e, err)
		}
	}
	qs, err := db.Queues(ctx)
	if err != nil || len(qs) != 1 || qs[0].Name != "q" || qs[0].Paused || qs[0].Limits != (Limits{}) ||
		qs[0].Totals.Enqueued != 6 || qs[0].Totals.Claimed != 5 || qs[0].Totals.Completed != 1 {
		t.Fatalf("queues: %+v %v", qs, err)
	}
	if s, err := q.Settings(ctx); err != nil || s != (QueueSettings{}) {
		t.Fatalf("settings: %+v %v", s, err)
	}
	// A new task waits on the old ones: the completed one (1) and the one
	// no longer stored (5) are satisfied, the dead one (3) waits for a
	// redrive, the tasks in flight for their completion.
	c, err := q.Enqueue(ctx, Task{DependsOn: []uint64{1, 2, 3, 5, 7}, OnParentFailure: WaitOnFailure})
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := q.Get(ctx, c.ID); info.State != Waiting || !slices.Equal(info.WaitingOn, []uint64{2, 3, 7}) {
		t.Fatalf("waiting task: %+v", info)
	}
	// The lease of task 2 was taken after the snapshot, as was task 7's.
	for _, id := range []string{"2", "x"} {
		if _, err := q.Complete(ctx, leases[id], Done{}); err != nil {
			t.Fatalf("complete version 3 lease %s: %v", id, err)
		}
	}
	// New state on the old directory: a setting and a unique key.
	if err := q.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, Task{Kind: "u", Payload: []byte(`{"b":1,"a":2}`), Unique: &Unique{Window: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	db = reopenSame(t, db, dir, opts)
	if s, err := db.Queue(ns, "q").Settings(ctx); err != nil || !s.Paused {
		t.Fatalf("settings after reopen: %+v %v", s, err)
	}
	if info, _ := db.Queue(ns, "q").Get(ctx, c.ID); info.State != Waiting || !slices.Equal(info.WaitingOn, []uint64{3}) {
		t.Fatalf("waiting task after reopen: %+v", info)
	}
}

// TestOpensVersion4Directory opens a directory written in format version 4
// (queue settings and unique-by-content keys, before dependencies),
// committed as a fixture with the leases it handed out: every task, key,
// setting and the rate limiter's bucket reads as it was written (a paused
// queue stays paused, a queue with settings and no task is listed, the
// bucket is as empty as it was left), the leases keep working, new tasks
// wait on the old ones, also on a paused queue, and the upgraded
// directory reopens to the same state.
func TestOpensVersion4Directory(t *testing.T) {
	t.Parallel()
	dir, leases := fixture(t, "v4dir")
	rep, err := Check(dir)
	if err != nil || rep.Seq != 19 || rep.Tasks != 8 {
		t.Fatalf("check: %+v %v", rep, err)
	}
	clock := NewManualClock(t0.Add(33 * time.Second)) // the time of the last batch
	opts := Options{Clock: clock, RetainCompleted: 1000 * time.Hour}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	q, paused, limited := db.Queue(ns, "q"), db.Queue(ns, "paused"), db.Queue(ns, "limited")
	want := []struct {
		q       Queue
		id      uint64
		state   State
		attempt int
		lastErr string
	}{
		{q, 1, Completed, 1, ""}, {q, 2, InFlight, 2, "boom 1"}, {q, 3, Dead, 1, "fatal"}, {q, 4, InFlight, 1, ""},
		{q, 5, Scheduled, 0, ""}, {q, 6, Ready, 0, ""}, {paused, 7, Ready, 0, ""}, {q, 8, Ready, 0, ""},
	}
	for _, w := range want {
		info, err := w.q.Get(ctx, w.id)
		if err != nil || info.State != w.state || info.Attempts != w.attempt || info.LastError != w.lastErr ||
			len(info.WaitingOn) != 0 || len(info.Dependents) != 0 || info.OnParentFailure != CancelOnFailure {
			t.Fatalf("task %d: %+v %v", w.id, info, err)
		}
	}
	if info, _ := q.Get(ctx, 1); string(info.Result) != `"ok"` || info.Headers["a"] != "2" || info.IdempotencyKey != "one" ||
		!slices.Equal(info.FollowUps, []uint64{6}) {
		t.Fatalf("task 1: %+v", info)
	}
	if e, err := db.KV(ns).Get(ctx, "k"); err != nil || string(e.Value) != "v" {
		t.Fatalf("kv: %+v %v", e, err)
	}
	// Settings, from the snapshot and from the log after it.
	for _, w := range []struct {
		q    Queue
		want QueueSettings
	}{
		{q, QueueSettings{Limits: Limits{MaxInFlight: 4, Rate: 5, Per: time.Minute, Burst: 3}}},
		{paused, QueueSettings{Paused: true, Limits: Limits{Rate: 2, Per: time.Second, Burst: 2}}},
		{limited, QueueSettings{Paused: true, Limits: Limits{MaxInFlight: 1}}},
	} {
		if s, err := w.q.Settings(ctx); err != nil || s != w.want {
			t.Fatalf("settings of %s: %+v %v, want %+v", w.q.Name(), s, err, w.want)
		}
	}
	if qs, err := db.Queues(ctx); err != nil || len(qs) != 3 || qs[0].Name != "limited" || !qs[0].Paused {
		t.Fatalf("queues: %+v %v", qs, err)
	}
	// The keys: a caller's (ended with its completed task, and live with
	// the dead one) and unique by content (in flight, and ready).
	for _, w := range []struct {
		task Task
		id   uint64
	}{
		{Task{IdempotencyKey: "one"}, 1}, {Task{IdempotencyKey: "three"}, 3},
		{Task{Kind: "u", Payload: []byte(`{ "a": 2, "b": 1 }`), Unique: &Unique{Window: time.Hour}}, 4},
		{Task{Kind: "u", Payload: []byte(`{"c":3}`), Unique: &Unique{Window: time.Hour}}, 8},
	} {
		if e, err := q.Enqueue(ctx, w.task); err != nil || e.ID != w.id || !e.Deduplicated {
			t.Fatalf("duplicate of %d: %+v %v", w.id, e, err)
		}
	}
	// The bucket holds what the last claim left (three quarters of a
	// token): nothing now, one task a twelfth of a minute later, though the
	// in-flight bound would allow two.
	if ls, err := q.Claim(ctx, "w", time.Hour, 10); err != nil || len(ls) != 0 {
		t.Fatalf("claim with an empty bucket: %+v %v", ls, err)
	}
	if ls, err := paused.Claim(ctx, "w", time.Hour, 10); err != nil || len(ls) != 0 {
		t.Fatalf("claim of a paused queue: %+v %v", ls, err)
	}
	clock.Advance(12 * time.Second)
	if ls, err := q.Claim(ctx, "w", time.Hour, 10); err != nil || len(ls) != 1 || ls[0].ID != 6 {
		t.Fatalf("claim after a token: %+v %v", ls, err)
	}

	// New tasks wait on the old ones: the completed one is satisfied, the
	// dead one waits for a redrive (WaitOnFailure).
	c, err := q.Enqueue(ctx, Task{DependsOn: []uint64{1, 3, 5, 8}, OnParentFailure: WaitOnFailure})
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := q.Get(ctx, c.ID); info.State != Waiting || !slices.Equal(info.WaitingOn, []uint64{3, 5, 8}) {
		t.Fatalf("waiting task: %+v", info)
	}
	// One on the paused queue, released by the completion of a lease of
	// the fixture, stays unclaimed until Resume.
	d, err := paused.Enqueue(ctx, Task{DependsOn: []uint64{4}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"2", "x"} {
		if _, err := q.Complete(ctx, leases[id], Done{}); err != nil {
			t.Fatalf("complete version 4 lease %s: %v", id, err)
		}
	}
	if info, _ := paused.Get(ctx, d.ID); info.State != Ready {
		t.Fatalf("released task: %+v", info)
	}
	if ls, err := paused.Claim(ctx, "w", time.Hour, 10); err != nil || len(ls) != 0 {
		t.Fatalf("claim of a paused queue after a release: %+v %v", ls, err)
	}
	db = reopenSame(t, db, dir, opts)
	q, paused = db.Queue(ns, "q"), db.Queue(ns, "paused")
	if info, _ := q.Get(ctx, c.ID); info.State != Waiting || !slices.Equal(info.WaitingOn, []uint64{3, 5, 8}) {
		t.Fatalf("waiting task after reopen: %+v", info)
	}
	if err := paused.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if ls, err := paused.Claim(ctx, "w", time.Hour, 10); err != nil || len(ls) != 2 || ls[0].ID != 7 || ls[1].ID != d.ID {
		t.Fatalf("claim after resume: %+v %v", ls, err)
	}
}

// TestOpensVersion5Directory opens a directory written in format version 5
// (dependencies, before partitions), committed as a fixture with the
// leases it handed out. It was written by the engine of that format: a
// snapshot after tasks in every state (a retained completion, a lease, a
// dead task, a timer, a ready task of priority 3, a task waiting on the
// lease's), queue limits, then a log tail (a key, a task, a lease of the
// limited queue, a pause). Every record reads as it was written, the old
// leases keep working, the old tasks form the default partition when
// partitioned tasks join them, and the upgraded directory reopens to the
// same state.
func TestOpensVersion5Directory(t *testing.T) {
	t.Parallel()
	dir, leases := fixture(t, "v5dir")
	rep, err := Check(dir)
	if err != nil || rep.Tasks != 8 {
		t.Fatalf("check: %+v %v", rep, err)
	}
	clock := NewManualClock(t0)
	opts := Options{Clock: clock, RetainCompleted: 1000 * time.Hour}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	q, limited := db.Queue(ns, "q"), db.Queue(ns, "limited")
	for _, w := range []struct {
		q     Queue
		id    uint64
		state State
	}{
		{q, 1, Completed}, {q, 2, InFlight}, {q, 3, Dead}, {q, 4, Scheduled}, {q, 5, Ready}, {q, 6, Waiting},
		{limited, 7, InFlight}, {q, 8, Ready},
	} {
		info, err := w.q.Get(ctx, w.id)
		if err != nil || info.State != w.state || info.Partition != "" {
			t.Fatalf("task %d: %+v %v, want %v", w.id, info, err, w.state)
		}
	}
	if info, _ := q.Get(ctx, 1); string(info.Result) != `"ok"` || info.Headers["h"] != "1" || info.IdempotencyKey != "one" {
		t.Fatalf("task 1: %+v", info)
	}
	if info, _ := q.Get(ctx, 6); !slices.Equal(info.WaitingOn, []uint64{2}) || info.OnParentFailure != WaitOnFailure {
		t.Fatalf("task 6: %+v", info)
	}
	if e, err := db.KV(ns).Get(ctx, "k"); err != nil || string(e.Value) != "v" {
		t.Fatalf("kv: %+v %v", e, err)
	}
	if s := settings(t, limited); s != (QueueSettings{Limits: Limits{MaxInFlight: 2, Rate: 4, Per: time.Minute, Burst: 4}}) {
		t.Fatalf("settings of limited: %+v", s)
	}
	if s := settings(t, q); !s.Paused {
		t.Fatalf("settings of q: %+v", s)
	}
	// The old lease completes and releases its dependent.
	if _, err := q.Complete(ctx, leases["b"], Done{}); err != nil {
		t.Fatalf("complete version 5 lease: %v", err)
	}
	if info, _ := q.Get(ctx, 6); info.State != Ready {
		t.Fatalf("released task: %+v", info)
	}
	// Partitioned tasks join the old ones, which are the default
	// partition: a claim takes turns, priority within each.
	for _, p := range []string{"t1", "t1", "t2"} {
		if _, err := q.Enqueue(ctx, Task{Partition: p}); err != nil {
			t.Fatal(err)
		}
	}
	mustDo(t, q.Resume(ctx))
	mustDo(t, limited.SetLimits(ctx, Limits{MaxInFlight: 2, Rate: 4, Per: time.Minute, PartitionMaxInFlight: 1}))
	ls, err := q.Claim(ctx, "w", time.Minute, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := byPart(ls); !mapsEqual(got, map[string]int{"": 1, "t1": 1, "t2": 1}) {
		t.Fatalf("claimed %v", got)
	}
	for _, l := range ls {
		if l.Partition == "" && l.ID != 5 {
			t.Fatalf("the default partition gave %d, not its priority 3 task 5", l.ID)
		}
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	db = reopenSame(t, db, dir, opts)
	if s := settings(t, db.Queue(ns, "limited")); s.Limits.PartitionMaxInFlight != 1 {
		t.Fatalf("partition bound after reopen: %+v", s)
	}
}

// fixture copies the fixture directory testdata/name (a directory an
// engine of an older format wrote) into a temporary directory and returns
// it with the leases that engine handed out, from its leases.json (nil
// when it has none).
func fixture(t *testing.T, name string) (string, map[string]Lease) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", name))); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "leases.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return dir, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var leases map[string]Lease
	if err := json.Unmarshal(raw, &leases); err != nil {
		t.Fatal(err)
	}
	return dir, leases
}

// reopenSame closes db, opens dir again with opts and fails the test
// unless the reopened DB holds the same state (its hash and every
// record); it returns the reopened DB.
func reopenSame(t *testing.T, db *DB, dir string, opts Options) *DB {
	t.Helper()
	before := dump(db)
	h, _ := db.StateHash()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if h2, _ := db.StateHash(); h2 != h || dump(db) != before {
		t.Fatal("state changed across a reopen of the upgraded directory")
	}
	return db
}
