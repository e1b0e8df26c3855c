package engine

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestQuotaRefusesOnlyItsNamespace: a namespace at its task quota is
// refused enqueues, batches and follow-ups past the reserve with ErrFull
// naming it, changing nothing; another namespace keeps enqueueing; what
// frees state works; its workers stay visible; and raising the quota lets
// it enqueue again.
func TestQuotaRefusesOnlyItsNamespace(t *testing.T) {
	t.Parallel()
	for _, mem := range []bool{true, false} {
		t.Run(map[bool]string{true: "memory", false: "disk"}[mem], func(t *testing.T) {
			e := newEnv(t, mem)
			if err := e.db.SetQuota(ctx, ns, Quota{MaxTasks: 16}); err != nil {
				t.Fatal(err)
			}
			q := e.q("q")
			for range 16 {
				e.enqueue(q, Task{Payload: payloadOf(100)})
			}
			before := dump(e.db)
			_, err := q.Enqueue(ctx, Task{Payload: payloadOf(100)})
			if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "acme/prod") || !strings.Contains(err.Error(), "16 tasks of its quota of 16") {
				t.Fatalf("enqueue past the quota: %v", err)
			}
			if _, err := q.EnqueueBatch(ctx, []Task{{Payload: payloadOf(10)}}); !errors.Is(err, ErrFull) {
				t.Fatalf("batch past the quota: %v", err)
			}
			if _, err := e.db.KV(ns).Commit(ctx, Enqueue("q", Task{Payload: payloadOf(10)})); !errors.Is(err, ErrFull) {
				t.Fatalf("KV enqueue past the quota: %v", err)
			}
			if after := dump(e.db); after != before {
				t.Fatalf("refused writes changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
			}

			// Another tenant does not notice.
			other := e.db.Queue(NS("acme", "dev"), "q")
			for range 40 {
				e.enqueue(other, Task{Payload: payloadOf(100)})
			}

			// Presence and completions with follow-ups use the reserve.
			if err := e.db.ReportWorker(ctx, ns, WorkerPresence{ID: "w1"}, time.Minute); err != nil {
				t.Fatalf("a worker's presence at a full quota: %v", err)
			}
			ls := e.claim(q, 16)
			follow := func(l Lease) error {
				_, err := q.Complete(ctx, l, Done{FollowUps: []FollowUp{
					{Queue: "next", Task: Task{Payload: payloadOf(10)}}, {Queue: "next", Task: Task{Payload: payloadOf(10)}}}})
				return err
			}
			if err := follow(ls[0]); err != nil {
				t.Fatalf("a completion with follow-ups at a full quota: %v", err)
			}
			if err := follow(ls[1]); !errors.Is(err, ErrFull) {
				t.Fatalf("a completion past the reserve: %v", err)
			}
			if info := e.get(q, ls[1].ID); info.State != InFlight {
				t.Fatalf("a refused completion left its task %s", info.State)
			}
			// Freeing works.
			for _, l := range ls[1:4] {
				if _, err := q.Complete(ctx, l, Done{}); err != nil {
					t.Fatalf("a plain completion at a full quota: %v", err)
				}
			}
			if err := q.Cancel(ctx, ls[4].ID); err != nil {
				t.Fatalf("cancel at a full quota: %v", err)
			}
			e.enqueue(q, Task{Payload: payloadOf(100)})

			// Lower than what it holds: nothing is removed, adds are refused.
			if err := e.db.SetQuota(ctx, ns, Quota{MaxTasks: 2}); err != nil {
				t.Fatal(err)
			}
			if _, err := q.Enqueue(ctx, Task{}); !errors.Is(err, ErrFull) {
				t.Fatalf("enqueue over a lowered quota: %v", err)
			}
			if err := e.db.SetQuota(ctx, ns, Quota{}); err != nil {
				t.Fatal(err)
			}
			e.enqueue(q, Task{Payload: payloadOf(100)})
			qt, u, err := e.db.Quota(ctx, ns)
			if err != nil || qt != (Quota{}) || u.Tasks != 15 || u.Namespace != ns {
				t.Fatalf("quota %+v, usage %+v, %v", qt, u, err)
			}
		})
	}
}

// TestQuotaBytes: the byte quota refuses a KV write and an enqueue past
// it, naming the sizes; deletes work at a full quota.
func TestQuotaBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	if err := e.db.SetQuota(ctx, ns, Quota{MaxBytes: 8 << 10}); err != nil {
		t.Fatal(err)
	}
	kv := e.db.KV(ns)
	if _, err := kv.Commit(ctx, Set("a", payloadOf(4096))); err != nil {
		t.Fatal(err)
	}
	_, err := kv.Commit(ctx, Set("b", payloadOf(4096)))
	if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "quota of 8.0 KiB") {
		t.Fatalf("KV set past the byte quota: %v", err)
	}
	if _, err := e.q("q").Enqueue(ctx, Task{Payload: payloadOf(4096)}); !errors.Is(err, ErrFull) {
		t.Fatalf("enqueue past the byte quota: %v", err)
	}
	if _, err := e.db.KV(NS("acme", "dev")).Commit(ctx, Set("b", payloadOf(8192))); err != nil {
		t.Fatalf("another namespace: %v", err)
	}
	if _, err := kv.Commit(ctx, Delete("a")); err != nil {
		t.Fatalf("delete at a full quota: %v", err)
	}
	if _, err := kv.Commit(ctx, Set("b", payloadOf(4096))); err != nil {
		t.Fatalf("after a delete: %v", err)
	}
	_, u, err := e.db.Quota(ctx, ns)
	if err != nil || u.Bytes > 8<<10 || u.Bytes < 4096 {
		t.Fatalf("usage %+v, %v", u, err)
	}
}

// TestQuotaClaims: leases count against their namespace's byte quota
// (each adds its owner's name): past the quota and its reserve a claim
// leases one task at a time, in that namespace only.
func TestQuotaClaims(t *testing.T) {
	e := newEnv(t, true)
	const quota = 16 << 10
	if err := e.db.SetQuota(ctx, ns, Quota{MaxBytes: quota}); err != nil {
		t.Fatal(err)
	}
	q, other := e.q("q"), e.db.Queue(NS("acme", "dev"), "q")
	for i := 0; i < 40; i++ {
		if _, err := q.Enqueue(ctx, Task{Payload: []byte(`1`)}); err != nil {
			t.Fatal(err)
		}
		if _, err := other.Enqueue(ctx, Task{Payload: []byte(`1`)}); err != nil {
			t.Fatal(err)
		}
	}
	owner := strings.Repeat("o", MaxNameBytes)
	held, ones := 0, 0
	for held < 40 {
		ls, err := q.Claim(ctx, owner, time.Minute, 4)
		if err != nil || len(ls) == 0 {
			t.Fatalf("claim with %d held: %d leases, %v", held, len(ls), err)
		}
		_, u, err := e.db.Quota(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) == 1 && held+1 < 40 {
			ones++
		}
		held += len(ls)
		if over := u.Bytes - (quota + quota/memoryReserveShare); over > int64(ones*len(owner)) {
			t.Fatalf("claims passed the quota's reserve by %d bytes with %d leases past it", over, ones)
		}
	}
	if ones == 0 {
		t.Fatal("no claim was cut to one task by the quota")
	}
	if ls, err := other.Claim(ctx, owner, time.Minute, 40); err != nil || len(ls) != 40 {
		t.Fatalf("another namespace: %d leases, %v", len(ls), err)
	}
}

// TestQuotaCompletionsWithResultsDrain: a quota lowered far below what a
// namespace holds still lets its workers complete their tasks with
// results (retained), which frees them; a completion with a follow-up is
// refused past the reserve.
func TestQuotaCompletionsWithResultsDrain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, func(o *Options) { o.RetainCompleted = time.Hour })
	q := e.q("q")
	for range 8 {
		e.enqueue(q, Task{})
	}
	ls := e.claim(q, 8)
	if err := e.db.SetQuota(ctx, ns, Quota{MaxTasks: 1, MaxBytes: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := q.Complete(ctx, ls[0], Done{FollowUps: []FollowUp{{Queue: "next", Task: Task{}}}})
	if !errors.Is(err, ErrFull) {
		t.Fatalf("a follow-up far past the quota: %v", err)
	}
	for _, l := range ls {
		if _, err := q.Complete(ctx, l, Done{Result: payloadOf(1000)}); err != nil {
			t.Fatalf("a completion with a result past the quota: %v", err)
		}
	}
}

// TestQuotaSurvivesReopen: the quota is state, kept across a restart.
func TestQuotaSurvivesReopen(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	want := Quota{MaxTasks: 1, MaxBytes: 1 << 20}
	if err := e.db.SetQuota(ctx, ns, want); err != nil {
		t.Fatal(err)
	}
	e.enqueue(e.q("q"), Task{})
	e.reopen()
	got, u, err := e.db.Quota(ctx, ns)
	if err != nil || got != want || u.Tasks != 1 {
		t.Fatalf("after reopen: %+v %+v %v", got, u, err)
	}
	if _, err := e.q("q").Enqueue(ctx, Task{}); !errors.Is(err, ErrFull) {
		t.Fatalf("enqueue past the quota after reopen: %v", err)
	}
}

// TestQuotaBadInput: negative limits and bad namespaces are ErrInvalid,
// setting needs PermAdmin and reading PermRead, and none changes
// anything.
func TestQuotaBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	before := dump(e.db)
	for _, q := range []Quota{{MaxTasks: -1}, {MaxBytes: -1}} {
		if err := e.db.SetQuota(ctx, ns, q); !errors.Is(err, ErrInvalid) {
			t.Errorf("SetQuota(%+v): %v", q, err)
		}
	}
	if err := e.db.SetQuota(ctx, Namespace{}, Quota{MaxTasks: 1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetQuota on no namespace: %v", err)
	}
	if _, _, err := e.db.Quota(ctx, Namespace{Project: "a"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Quota on a bad namespace: %v", err)
	}
	db, err := OpenInMemory(Options{Authorizer: Policy{"reader": {{Project: "acme", Scope: "*", Perms: PermRead}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reader := db.As(Caller{ID: "reader"})
	if err := reader.SetQuota(ctx, ns, Quota{MaxTasks: 1}); !errors.Is(err, ErrPermission) {
		t.Errorf("a reader sets a quota: %v", err)
	}
	if _, _, err := reader.Quota(ctx, ns); err != nil {
		t.Errorf("a reader reads the quota: %v", err)
	}
	if _, _, err := reader.Quota(ctx, NS("other", "prod")); !errors.Is(err, ErrPermission) {
		t.Errorf("a reader elsewhere: %v", err)
	}
	// The record is the system's: a user's KV handle cannot write it.
	if _, err := e.db.KV(ns).Commit(ctx, Set(QuotaKey, []byte(`{"max_tasks":1}`))); err == nil {
		t.Error("a user's KV write to the quota record was taken")
	}
	if after := dump(e.db); after != before {
		t.Fatalf("bad input changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestQuotaOnAReplicatedLog: the quota is in the log like any write; the
// submitting node refuses past it before the log, and every member holds
// the same quota.
func TestQuotaOnAReplicatedLog(t *testing.T) {
	t.Parallel()
	clock := NewManualClock(t0)
	l := newLocalLog(t, 2, func(int) Options { return Options{Clock: clock} })
	if err := l.members[0].db.SetQuota(ctx, ns, Quota{MaxTasks: 3}); err != nil {
		t.Fatal(err)
	}
	q := l.members[0].db.Queue(ns, "q")
	for range 3 {
		if _, err := q.Enqueue(ctx, Task{}); err != nil {
			t.Fatal(err)
		}
	}
	entries := l.len()
	if _, err := q.Enqueue(ctx, Task{}); !errors.Is(err, ErrFull) {
		t.Fatalf("enqueue past the quota: %v", err)
	}
	if l.len() != entries {
		t.Fatal("a refused command reached the log")
	}
	l.sameState(t, l.members[0].db, "full")
	// The other member, leading, reads and enforces the same quota.
	l.setLeader(1)
	if got, u, err := l.members[1].db.Quota(ctx, ns); err != nil || got.MaxTasks != 3 || u.Tasks != 3 {
		t.Fatalf("the other member's quota: %+v %+v %v", got, u, err)
	}
	if _, err := l.members[1].db.Queue(ns, "q").Enqueue(ctx, Task{}); !errors.Is(err, ErrFull) {
		t.Fatalf("enqueue past the quota on the other member: %v", err)
	}
}

// BenchmarkEnqueueWithQuota is BenchmarkEnqueueInMemory on a namespace
// with a quota: what admitting against it costs.
func BenchmarkEnqueueWithQuota(b *testing.B) {
	db := benchDB(b, "", SyncAlways)
	if err := db.SetQuota(ctx, ns, Quota{MaxTasks: 1 << 30, MaxBytes: 1 << 50}); err != nil {
		b.Fatal(err)
	}
	q := db.Queue(ns, "q")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := q.Enqueue(ctx, Task{Payload: benchPayload}); err != nil {
			b.Fatal(err)
		}
	}
}
