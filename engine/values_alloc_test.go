package engine

import (
	"bytes"
	"testing"
	"time"
)

// TestValuesCommitAllocs bounds what a commit of the task path allocates
// on a DB whose payloads are in the value log: every byte a standing
// backlog's claims, completions and enqueues allocate is garbage the
// collector must chase through the whole state, so with a large backlog
// (a large live heap) it is what sets the collections' share of the CPU.
// A command planned through an interface escaped to the heap (over a
// kilobyte per commit), and a large payload copied its task record.
func TestValuesCommitAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes what allocates")
	}
	db, err := Open(t.TempDir(), Options{Durability: SyncNever, SnapshotBytes: -1, ValueThreshold: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := db.Queue(ns, "q")
	payload := []byte(`"` + string(bytes.Repeat([]byte("x"), 600)) + `"`)
	batch := make([]Task, 500)
	for i := range batch {
		batch[i].Payload = payload
	}
	for range 4 {
		if _, err := q.EnqueueBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	// A claim of one task allocates the slice of its lease, the task's
	// new record and run record, the list of its values and the buffer of
	// its payload; a completion deletes; an enqueue allocates its record
	// and its answer (the value log copies the payload, so the enqueue
	// does not).
	var leases []Lease
	run := make([]RunEnqueue, 8)
	cases := []struct {
		name string
		f    func()
		max  float64
	}{
		{"claim", func() {
			ls, err := q.Claim(ctx, "w", time.Minute, 1)
			if err != nil || len(ls) != 1 {
				t.Fatal(err, len(ls))
			}
			leases = append(leases, ls[0])
		}, 5},
		{"complete", func() {
			if _, err := q.Complete(ctx, leases[0], Done{}); err != nil {
				t.Fatal(err)
			}
			leases = leases[1:]
		}, 1},
		{"enqueue", func() {
			if _, err := q.Enqueue(ctx, Task{Payload: payload}); err != nil {
				t.Fatal(err)
			}
		}, 2},
		{"run of 8 enqueues", func() {
			for i := range run {
				run[i] = RunEnqueue{Namespace: ns, Queue: "q", Task: Task{Payload: payload}}
			}
			db.EnqueueRun(ctx, run)
			if run[7].Err != nil {
				t.Fatal(run[7].Err)
			}
		}, runAllocs},
	}
	leases = make([]Lease, 0, 1000)
	for _, c := range cases {
		if n := testing.AllocsPerRun(200, c.f); n > c.max {
			t.Errorf("%s: %.1f allocations, want at most %.0f", c.name, n, c.max)
		} else {
			t.Logf("%s: %.1f allocations", c.name, n)
		}
	}
}

// runAllocs bounds what a run of 8 enqueues allocates: a record per task
// and one more, no arguments (a run gives them back to their pool once it
// is over: 17 without).
const runAllocs = 9

// TestValuesEnqueueKeepsNoCallerBytes: an enqueue plans a payload bound
// for the value log as the caller's bytes, without a copy of its own; the
// caller's buffer, changed once the call returns, changes no task, in the
// value log or in memory, enqueued alone or in a batch.
func TestValuesEnqueueKeepsNoCallerBytes(t *testing.T) {
	db, err := Open(t.TempDir(), Options{Durability: SyncNever, SnapshotBytes: -1, ValueThreshold: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := db.Queue(ns, "q")
	want := map[uint64][]byte{}
	for _, size := range []int{100, 600} {
		buf := []byte(`"` + string(bytes.Repeat([]byte("a"), size)) + `"`)
		orig := bytes.Clone(buf)
		e, err := q.Enqueue(ctx, Task{Payload: buf})
		if err != nil {
			t.Fatal(err)
		}
		es, err := q.EnqueueBatch(ctx, []Task{{Payload: buf}, {Payload: buf}})
		if err != nil {
			t.Fatal(err)
		}
		copy(buf[1:], bytes.Repeat([]byte("b"), size))
		for _, id := range []uint64{e.ID, es[0].ID, es[1].ID} {
			want[id] = orig
		}
	}
	for id, p := range want {
		if info, err := q.Get(ctx, id); err != nil || !bytes.Equal(info.Payload, p) {
			t.Fatalf("task %d: %v, payload %.20q..., want %.20q...", id, err, info.Payload, p)
		}
	}
	ls, err := q.Claim(ctx, "w", time.Minute, len(want))
	if err != nil || len(ls) != len(want) {
		t.Fatalf("claim: %d, %v", len(ls), err)
	}
	for _, l := range ls {
		if !bytes.Equal(l.Payload, want[l.ID]) {
			t.Fatalf("lease of task %d: payload %.20q..., want %.20q...", l.ID, l.Payload, want[l.ID])
		}
	}
}
