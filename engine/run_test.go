package engine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docketdb/docket/internal/vfs"
)

// TestEnqueueRunMatchesCalls is a model test of EnqueueRun: random runs of
// enqueues (duplicate idempotency keys, unique contents, invalid items,
// KV ops and assertions, dependencies, several namespaces, a memory
// budget and a quota that refuse some, large payloads kept on disk) on
// one DB give every item the outcome the same enqueues called one by one
// give on a second DB, and leave the same state (but for the number of
// log records).
func TestEnqueueRunMatchesCalls(t *testing.T) {
	t.Parallel()
	seeds := 24
	if testing.Short() {
		seeds = 8
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			mem := seed%3 == 2
			tweak := func(o *Options) {
				o.MaxMemory = -1
				if seed%4 == 1 {
					o.MaxMemory = 60_000
				}
				if seed%3 == 1 {
					o.ValueThreshold = 1000 // the big payloads are kept on disk
				}
				o.IdempotencyTTL = 30 * time.Second
				o.SnapshotBytes = 64 << 10
				o.Logger = quietLogger()
			}
			a, b := newEnv(t, mem, tweak), newEnv(t, mem, tweak)
			nss := []Namespace{ns, NS("acme", "quota"), NS("other", "x")}
			if seed%2 == 0 {
				for _, e := range []*env{a, b} {
					if err := e.db.SetQuota(ctx, nss[1], Quota{MaxTasks: 25, MaxBytes: 12_000}); err != nil {
						t.Fatal(err)
					}
				}
			}
			var ids []uint64
			for round := range 14 {
				run := randomRun(rng, nss, ids)
				want := make([]RunEnqueue, len(run))
				for i, r := range run {
					want[i] = r
					want[i].Enqueued, want[i].Err = b.db.Queue(r.Namespace, r.Queue).Enqueue(ctx, r.Task, r.Ops...)
				}
				a.db.EnqueueRun(ctx, run)
				for i := range run {
					g, w := &run[i], &want[i]
					if g.Enqueued != w.Enqueued || fmt.Sprint(g.Err) != fmt.Sprint(w.Err) {
						t.Fatalf("round %d item %d (%s/%s %+v): run gave %+v %v, calls %+v %v",
							round, i, g.Namespace, g.Queue, g.Task, g.Enqueued, g.Err, w.Enqueued, w.Err)
					}
					if g.Err == nil {
						ids = append(ids, g.Enqueued.ID)
					}
				}
				if da, db := stateOf(a.db), stateOf(b.db); da != db {
					t.Fatalf("round %d: states differ:\nrun:\n%s\ncalls:\n%s", round, da, db)
				}
				// Time passes (windows and keys expire); some tasks end.
				d := time.Duration(rng.IntN(20)) * time.Second
				a.clock.Advance(d)
				b.clock.Advance(d)
				if rng.IntN(2) == 0 {
					n := nss[rng.IntN(len(nss))]
					for _, e := range []*env{a, b} {
						q := e.db.Queue(n, "a")
						ls, err := q.Claim(ctx, "w", time.Minute, 3)
						if err != nil {
							t.Fatal(err)
						}
						for _, l := range ls {
							if _, err := q.Complete(ctx, l, Done{}); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
			}
			if err := a.db.Verify(); err != nil {
				t.Fatal(err)
			}
			if !mem {
				a.reopen()
			}
		})
	}
}

// stateOf is dump without the sequence numbers a run's fewer log records
// change: the last batch's, and the KV entries' versions (the batch that
// wrote each).
func stateOf(db *DB) string {
	lines := strings.Split(dump(db), "\n")
	_, lines[0], _ = strings.Cut(lines[0], " ")
	for i, l := range lines {
		if strings.HasPrefix(l, "kv ") {
			lines[i] = l[:strings.LastIndex(l, " v")]
		}
	}
	return strings.Join(lines, "\n")
}

// randomRun makes a run of up to 60 enqueues; ids are tasks that exist
// (or did) for dependencies.
func randomRun(rng *rand.Rand, nss []Namespace, ids []uint64) []RunEnqueue {
	n := 1 + rng.IntN(60)
	run := make([]RunEnqueue, n)
	for i := range run {
		r := &run[i]
		r.Namespace = nss[rng.IntN(len(nss))]
		r.Queue = []string{"a", "a", "b"}[rng.IntN(3)]
		if rng.IntN(30) == 0 {
			r.Queue = "" // invalid
		}
		t := &r.Task
		t.Payload = fmt.Appendf(nil, `{"n":%d}`, rng.IntN(8))
		switch rng.IntN(20) {
		case 0:
			t.Payload = []byte(`{`) // invalid
		case 1:
			t.Payload = fmt.Appendf(nil, `{"big":%q}`, strings.Repeat("x", 1500))
		}
		switch rng.IntN(6) {
		case 0, 1:
			t.IdempotencyKey = fmt.Sprintf("k%d", rng.IntN(5))
		case 2:
			t.Unique = &Unique{Window: time.Duration(5+rng.IntN(20)) * time.Second}
			if rng.IntN(2) == 0 {
				t.Unique.States = []State{Ready, Scheduled, InFlight}
			}
		}
		if rng.IntN(5) == 0 {
			t.Delay = time.Duration(rng.IntN(10)) * time.Second
		}
		if rng.IntN(12) == 0 {
			if len(ids) > 0 && rng.IntN(3) > 0 {
				t.DependsOn = []uint64{ids[rng.IntN(len(ids))]}
			} else {
				t.DependsOn = []uint64{1 << 40} // no such task
			}
		}
		if rng.IntN(10) == 0 {
			key := fmt.Sprintf("kv%d", rng.IntN(4))
			r.Ops = []Op{Set(key, []byte(`1`))}
			if rng.IntN(2) == 0 {
				r.Ops = append(r.Ops, IfAbsent(key)) // a conflict once set
			}
		}
		if rng.IntN(15) == 0 {
			r.Ops = append(r.Ops, Enqueue("b", Task{Payload: []byte(`2`)}))
		}
	}
	return run
}

// TestEnqueueRunOneStep: a run of plain enqueues is one engine step (one
// log record, one commit) for up to MaxRunStep of them, the next ones a
// step each, with one wait for the log for the run; a duplicate key is
// deduplicated in the step, an item with ops is a step of its own.
func TestEnqueueRunOneStep(t *testing.T) {
	t.Parallel()
	obs := &eventLog{}
	e := newEnv(t, false, func(o *Options) { o.SnapshotBytes = -1; o.Observer = obs })
	steps := func(run []RunEnqueue) uint64 {
		t.Helper()
		before := e.db.Stats()
		e.db.EnqueueRun(ctx, run)
		for i := range run {
			if run[i].Err != nil {
				t.Fatalf("item %d: %v", i, run[i].Err)
			}
		}
		after := e.db.Stats()
		if after.LogSyncs-before.LogSyncs > 1 {
			t.Fatalf("%d syncs of the log for one run", after.LogSyncs-before.LogSyncs)
		}
		return after.Commits - before.Commits
	}
	plain := func(n int) []RunEnqueue {
		run := make([]RunEnqueue, n)
		for i := range run {
			run[i] = RunEnqueue{Namespace: ns, Queue: "q", Task: Task{Payload: []byte(`1`)}}
		}
		return run
	}
	if n := steps(plain(100)); n != 1 {
		t.Fatalf("a run of 100 enqueues took %d steps, want 1", n)
	}
	if n := steps(plain(MaxRunStep + 1)); n != 2 {
		t.Fatalf("a run of %d enqueues took %d steps, want 2", MaxRunStep+1, n)
	}
	run := plain(10)
	run[4].Task.IdempotencyKey, run[6].Task.IdempotencyKey = "k", "k"
	if n := steps(run); n != 1 || !run[6].Enqueued.Deduplicated || run[6].Enqueued.ID != run[4].Enqueued.ID {
		t.Fatalf("a duplicate key: %d steps, item 6 %+v; want 1, deduplicated into %d", n, run[6].Enqueued, run[4].Enqueued.ID)
	}
	run = plain(10)
	run[3].Ops = []Op{Set("k", nil)}
	if n := steps(run); n != 3 {
		t.Fatalf("an item with ops: %d steps, want 3", n)
	}
	const enqueued = 100 + MaxRunStep + 1 + 10 + 10 - 1
	if c, _ := e.q("q").Counts(ctx); c.Ready != enqueued {
		t.Fatalf("counts %+v", c)
	}
	if n := obs.len(); n != enqueued {
		t.Fatalf("the Observer heard of %d events, want %d enqueues", n, enqueued)
	}
	e.reopen()
}

// TestEnqueueRunRefusalsChangeNothing: an invalid item and one the memory
// budget refuses get their errors; the others are enqueued, in two steps:
// the item that does not fit with the batch before it counted is admitted,
// or refused, on the state with that batch applied.
func TestEnqueueRunRefusalsChangeNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, func(o *Options) { o.MaxMemory = 8 << 10; o.Logger = quietLogger() })
	run := make([]RunEnqueue, 12)
	for i := range run {
		run[i] = RunEnqueue{Namespace: ns, Queue: "q", Task: Task{Payload: []byte(`1`)}}
	}
	run[2].Task.Payload = []byte(`{`)
	run[5].Task.Payload = fmt.Appendf(nil, `{"x":%q}`, strings.Repeat("x", 9<<10))
	commits := e.db.Stats().Commits
	e.db.EnqueueRun(ctx, run)
	for i, r := range run {
		switch i {
		case 2:
			wantErr(t, r.Err, ErrInvalid)
		case 5:
			wantErr(t, r.Err, ErrFull)
		default:
			if r.Err != nil || r.Enqueued.ID == 0 {
				t.Fatalf("item %d: %+v %v", i, r.Enqueued, r.Err)
			}
		}
	}
	if n := e.db.Stats().Commits - commits; n != 2 {
		t.Fatalf("%d steps, want 2", n)
	}
	if c, _ := e.q("q").Counts(ctx); c.Ready != 10 {
		t.Fatalf("counts %+v, want 10 ready", c)
	}
}

// TestEnqueueRunCrash: a power loss in the middle of a run (its first
// step logged, not synced) recovers a state that verifies, with each step
// all there or not at all; one once the run has returned loses none of
// the enqueues it acknowledged, payloads kept out of line included.
func TestEnqueueRunCrash(t *testing.T) {
	t.Parallel()
	mem := vfs.NewMem()
	const dir = "/data/db"
	opts := Options{Durability: SyncAlways, ValueThreshold: 64, SnapshotBytes: -1, Logger: quietLogger(), fs: mem}
	var mid *vfs.MemFS
	records := 0
	opts.tap = func(uint64, []byte) {
		records++
		if records == 2 {
			mid = mem.CrashClone() // the second step's record is appended
		}
	}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	run := make([]RunEnqueue, MaxRunStep+40)
	for i := range run {
		run[i] = RunEnqueue{Namespace: ns, Queue: "q", Task: Task{Payload: fmt.Appendf(nil, `{"i":%d}`, i)}}
		if i%7 == 0 {
			run[i].Task.Payload = fmt.Appendf(nil, `{"i":%d,"pad":%q}`, i, strings.Repeat("p", 100))
		}
	}
	run[9].Task.Payload = []byte(`nope`)
	dctx, d := DeferDurable(ctx)
	db.EnqueueRun(dctx, run)
	if err := d.Wait(); err != nil {
		t.Fatal(err)
	}
	after := mem.CrashClone()
	if mid == nil {
		t.Fatal("the run did not log two records")
	}
	check := func(fs *vfs.MemFS, all bool) {
		t.Helper()
		o := opts
		o.fs, o.tap = fs, nil
		got, err := Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		defer got.Close()
		if err := got.Verify(); err != nil {
			t.Fatal(err)
		}
		q := got.Queue(ns, "q")
		c, _ := q.Counts(ctx)
		if all && c.Ready != len(run)-1 || !all && c.Ready != 0 && c.Ready != MaxRunStep-1 && c.Ready != len(run)-1 {
			t.Fatalf("after a crash (run returned %v): %d ready of %d", all, c.Ready, len(run)-1)
		}
		if !all {
			return
		}
		for i, r := range run {
			if r.Err != nil {
				continue
			}
			info, err := q.Get(ctx, r.Enqueued.ID)
			if err != nil || string(info.Payload) != string(run[i].Task.Payload) {
				t.Fatalf("item %d lost: %v %q", i, err, info.Payload)
			}
		}
	}
	check(mid, false)
	check(after, true)
}

// TestEnqueueRunClosed: a run on a closed DB fails every item, changing
// nothing; a run whose context is done fails likewise.
func TestEnqueueRunClosed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	cctx, cancel := contextWithCancel()
	cancel()
	run := []RunEnqueue{{Namespace: ns, Queue: "q"}, {Namespace: ns, Queue: "q"}}
	e.db.EnqueueRun(cctx, run)
	for _, r := range run {
		if !errors.Is(r.Err, errCanceled) {
			t.Fatalf("with a done context: %v", r.Err)
		}
	}
	e.db.Close()
	e.db.EnqueueRun(ctx, run)
	for _, r := range run {
		wantErr(t, r.Err, ErrClosed)
	}
	if slices.ContainsFunc(run, func(r RunEnqueue) bool { return r.Enqueued != Enqueued{} }) {
		t.Fatal("an outcome with an error")
	}
}

// TestEnqueueRunLogFailure: when the log fails under a run, no item it
// enqueued is acknowledged (each gets ErrFailed), an invalid item keeps
// its own error, and the next run fails at once; the acknowledged state
// before it is what a reopen finds.
func TestEnqueueRunLogFailure(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"sync", "append.write"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			var armed atomic.Bool
			e := newEnv(t, false, func(o *Options) {
				o.Logger = quietLogger()
				o.failpoint = func(name string) error {
					if name == point && armed.Load() {
						return errors.New("injected " + name + " failure")
					}
					return nil
				}
			})
			q := e.q("q")
			e.enqueue(q, Task{Payload: []byte(`"kept"`)})
			armed.Store(true)
			run := make([]RunEnqueue, MaxRunStep+5)
			for i := range run {
				run[i] = RunEnqueue{Namespace: ns, Queue: "q", Task: Task{Payload: []byte(`1`)}}
			}
			run[3].Task.Payload = []byte(`{`)
			e.db.EnqueueRun(ctx, run)
			for i, r := range run {
				if i == 3 {
					wantErr(t, r.Err, ErrInvalid)
					continue
				}
				if !errors.Is(r.Err, ErrFailed) || r.Enqueued != (Enqueued{}) {
					t.Fatalf("item %d: %+v %v, want ErrFailed", i, r.Enqueued, r.Err)
				}
			}
			again := []RunEnqueue{{Namespace: ns, Queue: "q"}}
			e.db.EnqueueRun(ctx, again)
			wantErr(t, again[0].Err, ErrFailed)
			armed.Store(false)
			e.db.Close()
			e.open()
			if c, err := q.Counts(ctx); err != nil || c.Ready < 1 {
				t.Fatalf("after reopening: %+v %v", c, err)
			}
		})
	}
}

// TestEnqueueRunReplicated: a replicated DB makes a run's enqueues one by
// one (each its own entry of the replicated log), with the outcomes of
// calls one by one.
func TestEnqueueRunReplicated(t *testing.T) {
	t.Parallel()
	l := newLocalLog(t, 1, func(int) Options { return Options{} })
	db := l.members[0].db
	run := []RunEnqueue{
		{Namespace: ns, Queue: "q", Task: Task{IdempotencyKey: "k"}},
		{Namespace: ns, Queue: "q", Task: Task{IdempotencyKey: "k"}},
		{Namespace: ns, Queue: "", Task: Task{}},
		{Namespace: ns, Queue: "q", Task: Task{}},
	}
	before := l.len()
	db.EnqueueRun(ctx, run)
	if run[0].Err != nil || run[1].Enqueued != (Enqueued{ID: run[0].Enqueued.ID, Deduplicated: true}) || run[3].Err != nil {
		t.Fatalf("outcomes %+v", run)
	}
	wantErr(t, run[2].Err, ErrInvalid)
	if n := l.len() - before; n != 3 {
		t.Fatalf("%d entries of the replicated log, want 3", n)
	}
}
