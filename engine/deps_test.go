package engine

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/docketdb/docket/internal/index"
)

func mustEnqueue(t *testing.T, q Queue, task Task) uint64 {
	t.Helper()
	res, err := q.Enqueue(ctx, task)
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return res.ID
}

// complete claims the tasks of q that are ready and completes those in
// ids, failing if any of ids is not among them.
func completeIDs(t *testing.T, q Queue, ids ...uint64) {
	t.Helper()
	ls, err := q.Claim(ctx, "w", time.Minute, MaxBatch)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		i := slices.IndexFunc(ls, func(l Lease) bool { return l.ID == id })
		if i < 0 {
			t.Fatalf("task %d is not claimable (claimed %v)", id, leaseIDs(ls))
		}
		if _, err := q.Complete(ctx, ls[i], Done{}); err != nil {
			t.Fatalf("complete %d: %v", id, err)
		}
	}
	for _, l := range ls {
		if !slices.Contains(ids, l.ID) {
			if err := q.Snooze(ctx, l, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func leaseIDs(ls []Lease) []uint64 {
	out := make([]uint64, len(ls))
	for i, l := range ls {
		out[i] = l.ID
	}
	return out
}

func wantState(t *testing.T, q Queue, id uint64, st State, waitingOn ...uint64) TaskInfo {
	t.Helper()
	info, err := q.Get(ctx, id)
	if err != nil {
		t.Fatalf("get %d: %v", id, err)
	}
	if info.State != st || !slices.Equal(info.WaitingOn, waitingOn) {
		t.Fatalf("task %d is %s waiting on %v, want %s waiting on %v", id, info.State, info.WaitingOn, st, waitingOn)
	}
	return info
}

func wantGone(t *testing.T, q Queue, id uint64) {
	t.Helper()
	if _, err := q.Get(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("task %d: %v, want it gone", id, err)
	}
}

// TestDependsOnWaitsForEveryParent: a task waiting on tasks of two other
// queues is Waiting (in Get, Counts, List and Queues) until the last of
// them completes, then ready and claimable; the parents list it as their
// dependent until then.
func TestDependsOnWaitsForEveryParent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	qa, qb, qc := e.q("a"), e.q("b"), e.q("c")
	a, b := mustEnqueue(t, qa, Task{}), mustEnqueue(t, qb, Task{})
	c := mustEnqueue(t, qc, Task{DependsOn: []uint64{b, a, b}, Payload: []byte(`{"sink":1}`)})
	wantState(t, qc, c, Waiting, a, b)
	if info := e.get(qa, a); !slices.Equal(info.Dependents, []uint64{c}) {
		t.Fatalf("dependents of %d: %v", a, info.Dependents)
	}
	if n, _ := qc.Counts(ctx); n != (Counts{Waiting: 1}) {
		t.Fatalf("counts %+v", n)
	}
	page, err := qc.List(ctx, ListOptions{State: Waiting})
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].ID != c || !slices.Equal(page.Tasks[0].WaitingOn, []uint64{a, b}) {
		t.Fatalf("list waiting: %+v %v", page, err)
	}
	if ls := e.claim(qc, 10); len(ls) != 0 {
		t.Fatalf("claimed a waiting task: %v", leaseIDs(ls))
	}
	qs, _ := e.db.Queues(ctx)
	if len(qs) != 3 || qs[2].Name != "c" || qs[2].Counts.Waiting != 1 {
		t.Fatalf("queues %+v", qs)
	}
	completeIDs(t, qb, b)
	wantState(t, qc, c, Waiting, a)
	completeIDs(t, qa, a)
	info := wantState(t, qc, c, Ready)
	if !info.NotBefore.Equal(e.clock.Now()) || len(info.Dependents) != 0 {
		t.Fatalf("released task %+v", info)
	}
	if ls := e.claim(qc, 10); len(ls) != 1 || ls[0].ID != c || string(ls[0].Payload) != `{"sink":1}` {
		t.Fatalf("claim after release: %+v", ls)
	}
}

// TestDependsOnWithDelay: a delayed dependent released before its time is
// scheduled for it (the delay counts from the enqueue); released after
// it, ready at once.
func TestDependsOnWithDelay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	p1, p2 := mustEnqueue(t, q, Task{}), mustEnqueue(t, q, Task{})
	early := mustEnqueue(t, q, Task{DependsOn: []uint64{p1}, Delay: time.Hour})
	late := mustEnqueue(t, q, Task{DependsOn: []uint64{p2}, At: t0.Add(time.Minute)})
	e.clock.Advance(10 * time.Second)
	completeIDs(t, q, p1)
	if info := wantState(t, q, early, Scheduled); !info.NotBefore.Equal(t0.Add(time.Hour)) {
		t.Fatalf("scheduled for %v", info.NotBefore)
	}
	e.clock.Advance(time.Minute)
	completeIDs(t, q, p2)
	wantState(t, q, late, Ready)
	e.clock.Advance(time.Hour)
	completeIDs(t, q, early, late)
}

// TestDependsOnResolvedAtEnqueue: how each kind of id is resolved when the
// dependent is enqueued; a refused enqueue writes nothing.
func TestDependsOnResolvedAtEnqueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, func(o *Options) { o.RetainCompleted = time.Hour })
	q, other := e.q("q"), e.db.Queue(NS("acme", "other"), "q")
	done := mustEnqueue(t, q, Task{})
	completeIDs(t, q, done) // retained as completed
	gone := mustEnqueue(t, q, Task{})
	if err := q.Cancel(ctx, gone); err != nil {
		t.Fatal(err)
	}
	foreign := mustEnqueue(t, other, Task{}) // pending, in another namespace
	dead := mustEnqueue(t, q, Task{MaxAttempts: 1})
	ls := e.claim(q, 1)
	if err := q.Fail(ctx, ls[0], Failure{Err: "x"}); err != nil {
		t.Fatal(err)
	}
	expired := mustEnqueue(t, q, Task{MaxAttempts: 1}) // dead by time alone
	if ls := e.claim(q, 1); len(ls) != 1 || ls[0].ID != expired {
		t.Fatalf("claimed %v", leaseIDs(ls))
	}
	e.clock.Advance(time.Minute)
	pending := mustEnqueue(t, q, Task{Delay: time.Minute})

	// Satisfied at once: the task is enqueued as if it had no dependencies.
	for name, id := range map[string]uint64{"retained completion": done, "cancelled": gone, "another namespace's": foreign} {
		got := mustEnqueue(t, q, Task{DependsOn: []uint64{id}})
		if info := wantState(t, q, got, Ready); info.OnParentFailure != CancelOnFailure {
			t.Fatalf("%s: %+v", name, info)
		}
	}
	wantState(t, q, mustEnqueue(t, q, Task{DependsOn: []uint64{pending}}), Waiting, pending)
	// Dead parents follow the policy.
	for _, id := range []uint64{dead, expired} {
		before := e.db.Stats().Seq
		_, err := q.Enqueue(ctx, Task{DependsOn: []uint64{pending, id}})
		wantErr(t, err, ErrConflict)
		if e.db.Stats().Seq != before {
			t.Fatal("a refused enqueue committed")
		}
		wantState(t, q, mustEnqueue(t, q, Task{DependsOn: []uint64{id}, OnParentFailure: WaitOnFailure}), Waiting, id)
		info := wantState(t, q, mustEnqueue(t, q, Task{DependsOn: []uint64{id}, OnParentFailure: RunOnFailure}), Ready)
		if info.OnParentFailure != RunOnFailure {
			t.Fatalf("policy %v", info.OnParentFailure)
		}
	}
	// Invalid: nothing is written.
	before := e.db.Stats().Seq
	next := e.db.c.store.NextID()
	for name, task := range map[string]Task{
		"never handed out": {DependsOn: []uint64{next}},
		"far future":       {DependsOn: []uint64{1 << 50}},
		"zero":             {DependsOn: []uint64{0, pending}},
		"sibling of none":  {DependsOnSibling: []int{0}},
		"negative sibling": {DependsOnSibling: []int{-1}},
		"policy":           {DependsOn: []uint64{pending}, OnParentFailure: 3},
		"too many":         {DependsOn: make([]uint64, MaxDependencies+1)},
	} {
		if _, err := q.Enqueue(ctx, task); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if e.db.Stats().Seq != before {
		t.Fatal("an invalid enqueue committed")
	}
	if err := e.db.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestDependsOnSiblings: a task can depend on tasks enqueued before it by
// the same call, in every call that enqueues, by position in the call's
// results; a later or unknown position is ErrInvalid before anything is
// planned, and a deduplicated sibling stands for the task it names.
func TestDependsOnSiblings(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q, r := e.q("q"), e.q("r")
	res, err := q.EnqueueBatch(ctx, []Task{{}, {DependsOnSibling: []int{0}}, {DependsOnSibling: []int{0, 1}}},
		Enqueue("r", Task{DependsOnSibling: []int{2}}))
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := res[0].ID, res[1].ID, res[2].ID
	d := c + 1 // the Enqueue op's task
	wantState(t, q, b, Waiting, a)
	wantState(t, q, c, Waiting, a, b)
	wantState(t, r, d, Waiting, c)

	// Enqueue: the task is position 0, its ops follow.
	top, err := q.Enqueue(ctx, Task{IdempotencyKey: "top"}, Enqueue("r", Task{DependsOnSibling: []int{0}}))
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, r, top.ID+1, Waiting, top.ID)
	// A deduplicated sibling is the task its key names.
	tx, err := e.db.KV(ns).Commit(ctx, Enqueue("q", Task{IdempotencyKey: "top"}), Enqueue("r", Task{DependsOnSibling: []int{0}}))
	if err != nil || !tx.Enqueued[0].Deduplicated || tx.Enqueued[0].ID != top.ID {
		t.Fatalf("commit %+v %v", tx, err)
	}
	wantState(t, r, tx.Enqueued[1].ID, Waiting, top.ID)

	// Complete: the Enqueue ops of Done.Ops, then the follow-ups; a
	// follow-up may depend on the task being completed (satisfied).
	ls := e.claim(q, 10)
	if len(ls) != 2 {
		t.Fatalf("claimed %v", leaseIDs(ls))
	}
	i := slices.IndexFunc(ls, func(l Lease) bool { return l.ID == a })
	done, err := q.Complete(ctx, ls[i], Done{Ops: []Op{Enqueue("r", Task{})},
		FollowUps: []FollowUp{{Queue: "r", Task: Task{DependsOnSibling: []int{0}, DependsOn: []uint64{a}}}}})
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, r, done.Enqueued[1].ID, Waiting, done.Enqueued[0].ID)
	wantState(t, q, b, Ready)

	before := e.db.Stats().Seq
	bad := []error{
		errOnly(q.EnqueueBatch(ctx, []Task{{DependsOnSibling: []int{1}}, {}})),
		errOnly(q.EnqueueBatch(ctx, []Task{{DependsOnSibling: []int{0}}})),
		errOnly(q.Enqueue(ctx, Task{}, Enqueue("r", Task{DependsOnSibling: []int{1}}))),
		errOnly(e.db.KV(ns).Commit(ctx, Enqueue("r", Task{DependsOnSibling: []int{0}}))),
		errOnly(q.Complete(ctx, ls[1-i], Done{FollowUps: []FollowUp{{Queue: "r", Task: Task{DependsOnSibling: []int{0}}}}})),
	}
	for n, err := range bad {
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("bad sibling %d: %v, want ErrInvalid", n, err)
		}
	}
	if e.db.Stats().Seq != before {
		t.Fatal("an invalid sibling reference committed")
	}
}

// TestParentFailurePolicies: what a dependent does when its parent is
// dead-lettered (a permanent failure, attempts spent, or a last lease that
// expires with nobody claiming its queue again) or cancelled, per policy,
// cascading to the dependents' own dependents.
func TestParentFailurePolicies(t *testing.T) {
	t.Parallel()
	ends := []struct {
		name string
		dies bool
		end  func(e *env, q Queue, id uint64)
	}{
		{"fail permanent", true, func(e *env, q Queue, id uint64) {
			ls := e.claim(q, 1)
			if err := q.Fail(ctx, ls[0], Failure{Err: "no", Permanent: true}); err != nil {
				e.t.Fatal(err)
			}
		}},
		{"attempts spent", true, func(e *env, q Queue, id uint64) {
			ls := e.claim(q, 1)
			if err := q.Fail(ctx, ls[0], Failure{Err: "no"}); err != nil {
				e.t.Fatal(err)
			}
		}},
		{"last lease expires", true, func(e *env, q Queue, id uint64) {
			e.claim(q, 1)
			e.clock.Advance(time.Minute)
			// A commit anywhere stores the death first.
			if _, err := e.db.KV(ns).Commit(ctx, Set("tick", nil)); err != nil {
				e.t.Fatal(err)
			}
		}},
		{"cancel", false, func(e *env, q Queue, id uint64) {
			if err := q.Cancel(ctx, id); err != nil {
				e.t.Fatal(err)
			}
		}},
	}
	for _, end := range ends {
		t.Run(end.name, func(t *testing.T) {
			e := newEnv(t, true)
			q, dq := e.q("parent"), e.q("deps")
			p := mustEnqueue(t, q, Task{MaxAttempts: 1, IdempotencyKey: "p"})
			other := mustEnqueue(t, q, Task{Delay: time.Hour})
			cancel := mustEnqueue(t, dq, Task{DependsOn: []uint64{p, other}, IdempotencyKey: "c"})
			grandchild := mustEnqueue(t, dq, Task{DependsOn: []uint64{cancel}})
			runner := mustEnqueue(t, dq, Task{DependsOn: []uint64{cancel}, OnParentFailure: RunOnFailure})
			wait := mustEnqueue(t, dq, Task{DependsOn: []uint64{p}, OnParentFailure: WaitOnFailure})
			run := mustEnqueue(t, dq, Task{DependsOn: []uint64{p}, OnParentFailure: RunOnFailure})

			end.end(e, q, p)
			if err := e.db.Verify(); err != nil {
				t.Fatal(err)
			}
			// Cancelled, with what waits for it by its own policy; its
			// dependency on the other parent is gone too.
			wantGone(t, dq, cancel)
			wantGone(t, dq, grandchild)
			wantState(t, dq, runner, Ready)
			if info := e.get(q, other); len(info.Dependents) != 0 {
				t.Fatalf("the other parent still has dependents %v", info.Dependents)
			}
			// Its idempotency key ended with it: remembered for the TTL.
			if e, ok := e.db.c.store.Idem(index.QueueKey{Namespace: idxNS(ns), Name: "deps"}, "c"); !ok || e.ID != cancel || e.Expires == 0 {
				t.Fatalf("key of a cancelled dependent: %+v %v", e, ok)
			}
			wantState(t, dq, run, Ready)
			if !end.dies {
				wantGone(t, dq, wait) // a cancelled parent never comes back
				return
			}
			wantState(t, dq, wait, Waiting, p)
			wantState(t, q, p, Dead)
			if err := q.Redrive(ctx, p); err != nil {
				t.Fatal(err)
			}
			wantState(t, dq, wait, Waiting, p)
			completeIDs(t, q, p)
			wantState(t, dq, wait, Ready)
			if n, _ := dq.Counts(ctx); n != (Counts{Ready: 3}) {
				t.Fatalf("counts %+v", n)
			}
		})
	}
}

// TestCancelWaitingTask: cancelling a waiting task removes its
// dependencies, so its parents complete as if it had never waited.
func TestCancelWaitingTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	p := mustEnqueue(t, q, Task{})
	c := mustEnqueue(t, q, Task{DependsOn: []uint64{p}})
	d := mustEnqueue(t, q, Task{DependsOn: []uint64{c}, OnParentFailure: RunOnFailure})
	if err := q.Cancel(ctx, c); err != nil {
		t.Fatal(err)
	}
	wantState(t, q, d, Ready)
	if info := e.get(q, p); len(info.Dependents) != 0 {
		t.Fatalf("dependents %v", info.Dependents)
	}
	completeIDs(t, q, p, d)
	if err := e.db.Verify(); err != nil {
		t.Fatal(err)
	}
	if e.db.c.store.NumDeps() != 0 {
		t.Fatalf("%d dependencies left", e.db.c.store.NumDeps())
	}
}

// TestExpiredParentsHousekeptInBounds: more dead parents than one
// housekeeping batch takes are all stored dead, batch after batch.
func TestExpiredParentsHousekeptInBounds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	n := housekeepBatch + 10
	tasks := make([]Task, n)
	for i := range tasks {
		tasks[i] = Task{MaxAttempts: 1}
	}
	res, err := q.EnqueueBatch(ctx, tasks)
	if err != nil {
		t.Fatal(err)
	}
	deps := make([]Task, n)
	for i := range deps {
		deps[i] = Task{DependsOn: []uint64{res[i].ID}}
	}
	if _, err := e.q("d").EnqueueBatch(ctx, deps); err != nil {
		t.Fatal(err)
	}
	if ls := e.claim(q, n); len(ls) != n {
		t.Fatalf("claimed %d", len(ls))
	}
	e.clock.Advance(time.Minute)
	e.db.KV(ns).Commit(ctx, Set("a", nil))
	if c, _ := e.q("d").Counts(ctx); c.Waiting != 10 {
		t.Fatalf("after one commit: %+v", c)
	}
	e.db.KV(ns).Commit(ctx, Set("b", nil))
	if c, _ := e.q("d").Counts(ctx); c != (Counts{}) {
		t.Fatalf("after two commits: %+v", c)
	}
	if c, _ := q.Counts(ctx); c != (Counts{Dead: n}) {
		t.Fatalf("parents: %+v", c)
	}
}

// fanOut enqueues a root, n tasks that depend on it (queue "work") and a
// sink that depends on all of them (queue "sink"); it returns their ids.
func fanOut(t *testing.T, db *DB, n int) (root uint64, work []uint64, sink uint64) {
	t.Helper()
	root = mustEnqueue(t, db.Queue(ns, "root"), Task{Payload: []byte(`"root"`)})
	work = make([]uint64, 0, n)
	for len(work) < n {
		k := min(MaxBatch, n-len(work))
		tasks := make([]Task, k)
		for i := range tasks {
			tasks[i] = Task{DependsOn: []uint64{root}, Payload: []byte(fmt.Sprint(len(work) + i))}
		}
		res, err := db.Queue(ns, "work").EnqueueBatch(ctx, tasks)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			work = append(work, r.ID)
		}
	}
	sink = mustEnqueue(t, db.Queue(ns, "sink"), Task{DependsOn: work})
	return root, work, sink
}

// batchTap counts the mutations of each logged batch by kind.
type batchTap struct {
	dec  *index.Decoder
	last map[index.MutKind]int
}

func (b *batchTap) tap(o *Options) {
	b.dec = index.NewDecoder(index.NewStore())
	o.tap = func(_ uint64, data []byte) {
		var batch index.Batch
		if err := b.dec.Batch(data, &batch); err != nil {
			panic(err)
		}
		b.last = map[index.MutKind]int{}
		for _, m := range batch.Mutations {
			b.last[m.Kind]++
		}
	}
}

// TestFanOutFanIn: a root with 10,000 dependents (2,000 with -short), and
// a sink that depends on all of them. Completing the root releases them
// all in one batch of one delete and one update per dependent (nothing
// else of the queues is touched); each completion of a dependent deletes
// one dependency record and nothing of the sink, until the last one
// releases it.
func TestFanOutFanIn(t *testing.T) {
	t.Parallel()
	var bt batchTap
	e := newEnv(t, true, bt.tap)
	n := 10_000
	if testing.Short() {
		n = 2_000 // the same batches, a fifth as large
	}
	root, work, sink := fanOut(t, e.db, n)
	rq, wq, sq := e.q("root"), e.q("work"), e.q("sink")
	if info := wantState(t, sq, sink, Waiting, work...); len(info.WaitingOn) != n {
		t.Fatalf("sink waits on %d", len(info.WaitingOn))
	}
	if info := e.get(rq, root); len(info.Dependents) != n {
		t.Fatalf("root has %d dependents", len(info.Dependents))
	}
	completeIDs(t, rq, root)
	want := map[index.MutKind]int{index.MutDeleteTask: 1, index.MutDeleteDep: n, index.MutUpdateTask: n}
	if fmt.Sprint(bt.last) != fmt.Sprint(want) {
		t.Fatalf("root's completion batch: %v, want %v", bt.last, want)
	}
	if c, _ := wq.Counts(ctx); c != (Counts{Ready: n}) {
		t.Fatalf("work: %+v", c)
	}
	ls, err := wq.Claim(ctx, "w", time.Hour, MaxBatch)
	if err != nil || len(ls) != n {
		t.Fatalf("claimed %d: %v", len(ls), err)
	}
	for i, l := range ls[:n-1] {
		if _, err := wq.Complete(ctx, l, Done{}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			want := map[index.MutKind]int{index.MutDeleteTask: 1, index.MutDeleteDep: 1}
			if fmt.Sprint(bt.last) != fmt.Sprint(want) {
				t.Fatalf("a dependent's completion batch: %v, want %v", bt.last, want)
			}
		}
	}
	wantState(t, sq, sink, Waiting, ls[n-1].ID)
	if errs, err := wq.CompleteBatch(ctx, ls[n-1:]); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	wantState(t, sq, sink, Ready)
	completeIDs(t, sq, sink)
	if e.db.Stats().Tasks != 0 || e.db.c.store.NumDeps() != 0 {
		t.Fatalf("left: %+v, %d dependencies", e.db.Stats(), e.db.c.store.NumDeps())
	}
}

// TestFanOutFanInCrash runs the fan-out/fan-in on disk and crashes it
// twice in the middle: once recovering from the log alone, once from a
// snapshot taken mid-way and the log after it. Every task is completed
// exactly once, by a lease handed out after the last crash or before it,
// and the sink is released exactly when the last dependent completes.
func TestFanOutFanInCrash(t *testing.T) {
	t.Parallel()
	n := 10_000
	if testing.Short() {
		n = 2_000
	}
	e := newEnv(t, false, func(o *Options) { o.SnapshotBytes, o.Durability = -1, SyncNever })
	root, work, sink := fanOut(t, e.db, n)
	rq, wq, sq := e.q("root"), e.q("work"), e.q("sink")
	completed := map[uint64]int{}
	completeSome := func(k int) {
		t.Helper()
		ls, err := wq.Claim(ctx, "w", time.Hour, k)
		if err != nil {
			t.Fatal(err)
		}
		for _, chunk := range slices.Collect(slices.Chunk(ls, 500)) {
			errs, err := wq.CompleteBatch(ctx, chunk)
			if err != nil {
				t.Fatal(err)
			}
			for i, l := range chunk {
				if errs[i] != nil {
					t.Fatalf("complete %d: %v", l.ID, errs[i])
				}
				completed[l.ID]++
			}
		}
	}
	crash := func() {
		t.Helper()
		before := dump(e.db)
		e.crash()
		e.open()
		if err := e.db.Verify(); err != nil {
			t.Fatal(err)
		}
		if after := dump(e.db); after != before {
			t.Fatalf("state changed across the crash")
		}
	}
	completeIDs(t, rq, root)
	completeSome(n / 4)
	// Leases taken before a crash are still held after it.
	held, err := wq.Claim(ctx, "w", time.Hour, 100)
	if err != nil {
		t.Fatal(err)
	}
	crash() // from the log
	completeSome(n / 4)
	if err := e.db.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	completeSome(n / 8)
	crash() // from the snapshot and the log after it
	errs, err := wq.CompleteBatch(ctx, held)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range held {
		if errs[i] != nil {
			t.Fatalf("a lease from before the crashes: %v", errs[i])
		}
		completed[l.ID]++
	}
	info := e.get(sq, sink)
	if info.State != Waiting || len(info.WaitingOn) != n-len(completed) {
		t.Fatalf("sink waits on %d, %d completed of %d", len(info.WaitingOn), len(completed), n)
	}
	for len(completed) < n {
		completeSome(MaxBatch)
	}
	for _, id := range work {
		if completed[id] != 1 {
			t.Fatalf("task %d completed %d times", id, completed[id])
		}
	}
	wantState(t, sq, sink, Ready)
	completeIDs(t, sq, sink)
	if e.db.Stats().Tasks != 0 {
		t.Fatalf("%d tasks left", e.db.Stats().Tasks)
	}
	e.reopen()
}

// TestDependenciesFollowerAgrees: a follower applying every logged batch
// holds the leader's state, by hash and byte for byte, through fan-out,
// fan-in, releases and cascading cancels.
func TestDependenciesFollowerAgrees(t *testing.T) {
	t.Parallel()
	f := &follower{t: t, r: newReplica()}
	e := newEnv(t, true, tapInto(f), func(o *Options) { o.RetainCompleted = time.Hour })
	q := e.q("q")
	root, work, sink := fanOut(t, e.db, 50)
	f.same(e.db, "fan out")
	completeIDs(t, e.q("root"), root)
	f.same(e.db, "root completed")
	completeIDs(t, e.q("work"), work[:25]...)
	f.same(e.db, "half the work")
	c := mustEnqueue(t, q, Task{DependsOn: []uint64{sink}})
	mustEnqueue(t, q, Task{DependsOn: []uint64{c}, OnParentFailure: RunOnFailure})
	if err := e.q("sink").Cancel(ctx, sink); err != nil {
		t.Fatal(err)
	}
	f.same(e.db, "cascade")
	completeIDs(t, e.q("work"), work[25:]...)
	f.same(e.db, "the rest")
}

// TestReleaseWakesClaimWait: a ClaimWait parked on the queue of a waiting
// task is not woken by the enqueue of the waiting task, and is woken, with
// the task, by the completion that releases it.
func TestReleaseWakesClaimWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	up, down := e.q("up"), e.q("down")
	p := mustEnqueue(t, up, Task{})
	c := mustEnqueue(t, down, Task{DependsOn: []uint64{p}})
	ch := parkClaim(down, ctx)
	waitParked(t, e, down, 1)
	before := parkedOn(e, down)
	mustEnqueue(t, down, Task{DependsOn: []uint64{p}}) // waits too: nothing to claim
	stillParked(t, e, down, before, ch)
	completeIDs(t, up, p)
	r := recv(t, ch)
	if r.err != nil || len(r.ls) != 2 || r.ls[0].ID != c {
		t.Fatalf("woken with %+v", r)
	}
}
