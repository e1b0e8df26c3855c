package engine

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMassPromotionKeepsPriority: 70,000 timers come due at once with
// priorities rising by id (more than any bound on what one claim may
// move), and three leases of higher priority expire at the same moment.
// The first claim must serve the highest priority due, and a drain in
// claims of 1,000 must never serve a task while one of higher priority is
// due. Each claim stays small: its logged batch holds only what it leased.
func TestMassPromotionKeepsPriority(t *testing.T) {
	t.Parallel()
	var logged []int
	e := newEnv(t, true, func(o *Options) {
		o.tap = func(_ uint64, data []byte) { logged = append(logged, len(data)) }
	})
	q := e.q("q")
	var top []uint64
	for p := 200_000; p < 200_003; p++ {
		top = append(top, e.enqueue(q, Task{Priority: p}))
	}
	if ls := e.claim(q, 3); len(ls) != 3 { // leased for 30 s
		t.Fatalf("claimed %d", len(ls))
	}
	const n = 70_000
	batch := make([]Task, 0, MaxBatch)
	for i := range n {
		batch = append(batch, Task{Priority: i, Delay: time.Minute})
		if len(batch) == MaxBatch || i == n-1 {
			if _, err := q.EnqueueBatch(ctx, batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	e.clock.Advance(time.Minute) // every timer due, every lease expired
	logged = logged[:0]
	first := e.claim(q, 1)
	if len(first) != 1 || first[0].ID != top[2] || first[0].Attempt != 2 {
		t.Fatalf("first claim: %+v, want the expired lease of priority 200,002", first)
	}
	if len(logged) != 1 || logged[0] > 512 {
		t.Fatalf("the first claim logged %v bytes: it moved more than it leased", logged)
	}
	next := e.claim(q, 3)
	if got := []int{next[0].Priority, next[1].Priority, next[2].Priority}; !slices.Equal(got, []int{200_001, 200_000, n - 1}) {
		t.Fatalf("then %v", got)
	}
	prev := n - 1
	served := 1
	for {
		ls, err := q.Claim(ctx, "w", time.Hour, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) == 0 {
			break
		}
		for _, l := range ls {
			if l.Priority >= prev {
				t.Fatalf("served priority %d after %d", l.Priority, prev)
			}
			prev = l.Priority
			served++
		}
	}
	if served != n || prev != 0 {
		t.Fatalf("served %d timers, last of priority %d", served, prev)
	}
	if c, _ := q.Counts(ctx); c != (Counts{InFlight: n + 3}) {
		t.Fatalf("counts %+v", c)
	}
	if err := e.db.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestReadsSeeTimePass: Get, Counts, List and Queues report the state as
// of the clock's now, without a commit: a due timer is ready, an expired
// lease ready again (dead on its last attempt, with "lease expired" in its
// history), a retained completion past its retention gone. A claim then
// stores what the reads showed.
func TestReadsSeeTimePass(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.RetainCompleted = time.Hour })
	q := e.q("q")
	timer := e.enqueue(q, Task{Delay: 10 * time.Minute, Priority: 1})
	retry := e.enqueue(q, Task{MaxAttempts: 3, Priority: 3})
	last := e.enqueue(q, Task{MaxAttempts: 1, Priority: 2})
	done := e.enqueue(q, Task{Priority: 4})
	ls := e.claim(q, 3) // done, retry, last: 30 s leases
	if !slices.Equal(ids(ls), []uint64{done, retry, last}) {
		t.Fatalf("claimed %v", ids(ls))
	}
	if _, err := q.Complete(ctx, ls[0], Done{Result: []byte(`1`)}); err != nil {
		t.Fatal(err)
	}
	deadline := ls[1].Deadline
	e.clock.Advance(time.Hour)
	before := e.db.Stats()

	if c, err := q.Counts(ctx); err != nil || c != (Counts{Ready: 2, Dead: 1}) {
		t.Fatalf("counts %+v %v", c, err)
	}
	if info := e.get(q, timer); info.State != Ready {
		t.Fatalf("due timer: %+v", info)
	}
	info := e.get(q, retry)
	want := []AttemptError{{Attempt: 1, At: deadline, Error: "lease expired"}}
	if info.State != Ready || info.Owner != "" || !info.LeaseUntil.IsZero() || info.LastError != "lease expired" ||
		!info.NotBefore.Equal(deadline) || !info.UpdatedAt.Equal(deadline) || !slices.Equal(info.Errors, want) {
		t.Fatalf("expired lease: %+v", info)
	}
	dead := e.get(q, last)
	want[0].Error = "lease expired; attempts exhausted"
	if dead.State != Dead || dead.Owner != "" || dead.LastError != want[0].Error || !slices.Equal(dead.Errors, want) {
		t.Fatalf("expired last lease: %+v", dead)
	}
	wantErr(t, errOnly(q.Get(ctx, done)), ErrNotFound)
	list := func(s State) []uint64 {
		t.Helper()
		p, err := q.List(ctx, ListOptions{State: s})
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, ti := range p.Tasks {
			if ti.State != s {
				t.Fatalf("list %s holds a %s task", s, ti.State)
			}
			out = append(out, ti.ID)
		}
		return out
	}
	for s, want := range map[State][]uint64{Ready: {retry, timer}, Scheduled: nil, InFlight: nil, Dead: {last}, Completed: nil} {
		if got := list(s); !slices.Equal(got, want) {
			t.Errorf("list %s: %v, want %v", s, got, want)
		}
	}
	qs, err := e.db.Queues(ctx)
	if err != nil || len(qs) != 1 || qs[0].Counts != (Counts{Ready: 2, Dead: 1}) || !qs[0].OldestReady.Equal(deadline) {
		t.Fatalf("queues %+v %v", qs, err)
	}
	if after := e.db.Stats(); after.Seq != before.Seq || after.Commits != before.Commits {
		t.Fatalf("reads committed: seq %d -> %d", before.Seq, after.Seq)
	}
	// The holder of the expired lease has lost it, as the reads said.
	wantErr(t, q.Heartbeat(ctx, &ls[1], time.Minute, nil), ErrLeaseLost)
	wantErr(t, errOnly(q.Complete(ctx, ls[2], Done{})), ErrLeaseLost)

	// A claim of one takes the expired lease (priority 3), dead-letters the
	// spent one exactly as read, and leaves the timer as it was read.
	timerBefore, deadBefore := e.get(q, timer), e.get(q, last)
	got := e.claim(q, 1)
	if len(got) != 1 || got[0].ID != retry || got[0].Attempt != 2 {
		t.Fatalf("claim: %+v", got)
	}
	if info := e.get(q, timer); !equalInfo(info, timerBefore) {
		t.Fatalf("the timer changed: %+v, was %+v", info, timerBefore)
	}
	if info := e.get(q, last); !equalInfo(info, deadBefore) {
		t.Fatalf("dead-lettering changed what reads showed: %+v, was %+v", info, deadBefore)
	}
	if info := e.get(q, retry); !slices.Equal(info.Errors, []AttemptError{{Attempt: 1, At: deadline, Error: "lease expired"}}) {
		t.Fatalf("the re-leased task's history: %+v", info.Errors)
	}
	e.reopen()
	if c, _ := q.Counts(ctx); c != (Counts{Ready: 1, InFlight: 1, Dead: 1}) {
		t.Fatalf("counts after reopen %+v", c)
	}
}

func equalInfo(a, b TaskInfo) bool {
	return a.State == b.State && a.NotBefore.Equal(b.NotBefore) && a.UpdatedAt.Equal(b.UpdatedAt) &&
		a.Owner == b.Owner && a.Token == b.Token && a.Attempts == b.Attempts && a.LastError == b.LastError &&
		slices.Equal(a.Errors, b.Errors) && a.LeaseUntil.Equal(b.LeaseUntil)
}

// TestListPagesThroughDerivedStates: the ready listing interleaves stored
// ready tasks, due timers and expired leases in serving order, page by
// page; scheduled and in-flight listings leave out what time has moved,
// and dead includes expired last leases in id order.
func TestListPagesThroughDerivedStates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	want := map[int]uint64{}
	for _, p := range []int{1, 3, 5} {
		want[p] = e.enqueue(q, Task{Priority: p})
	}
	for _, p := range []int{7, 0} { // two leases of priority 100 (keyed 7 and 0 here), to expire
		want[p] = e.enqueue(q, Task{Priority: 100})
	}
	ls, err := q.Claim(ctx, "w", 30*time.Second, 2)
	if err != nil || len(ls) != 2 {
		t.Fatal(ls, err)
	}
	for _, p := range []int{2, 4, 6} {
		want[p] = e.enqueue(q, Task{Priority: p, Delay: 10 * time.Second})
	}
	late := e.enqueue(q, Task{Priority: 9, Delay: time.Hour})
	var deadIDs []uint64
	for range 3 {
		id := e.enqueue(q, Task{Priority: 50, MaxAttempts: 1})
		if l := e.claim(q, 1); len(l) != 1 || l[0].ID != id {
			t.Fatal(l)
		}
		deadIDs = append(deadIDs, id)
	}
	e.clock.Advance(30 * time.Second) // timers due, leases expired: nothing stored moved
	page := func(s State, limit int) []uint64 {
		t.Helper()
		var out []uint64
		cursor := ""
		for {
			p, err := q.List(ctx, ListOptions{State: s, Limit: limit, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, ti := range p.Tasks {
				out = append(out, ti.ID)
			}
			if p.Next == "" {
				return out
			}
			cursor = p.Next
		}
	}
	// Ready: the expired leases (priority 100, by id), then 6, 5, 4, 3, 2, 1
	// interleaving timers and stored ready tasks.
	wantReady := []uint64{want[7], want[0], want[6], want[5], want[4], want[3], want[2], want[1]}
	for _, limit := range []int{1, 2, 3, 100} {
		if got := page(Ready, limit); !slices.Equal(got, wantReady) {
			t.Fatalf("ready in pages of %d: %v, want %v", limit, got, wantReady)
		}
		if got := page(Dead, limit); !slices.Equal(got, deadIDs) {
			t.Fatalf("dead in pages of %d: %v, want %v", limit, got, deadIDs)
		}
		if got := page(Scheduled, limit); !slices.Equal(got, []uint64{late}) {
			t.Fatalf("scheduled in pages of %d: %v", limit, got)
		}
		if got := page(InFlight, limit); len(got) != 0 {
			t.Fatalf("in flight in pages of %d: %v", limit, got)
		}
	}
	if c, _ := q.Counts(ctx); c != (Counts{Ready: 8, Scheduled: 1, Dead: 3}) {
		t.Fatalf("counts %+v", c)
	}
	// The expired leases outrank everything: the older is taken.
	if l, err := q.Claim(ctx, "w", time.Hour, 1); err != nil || len(l) != 1 || l[0].ID != want[7] {
		t.Fatalf("claim %v %v", l, err)
	}
	if got := page(Ready, 2); !slices.Equal(got, wantReady[1:]) {
		t.Fatalf("ready after the claim: %v", got)
	}
	// Redrive and RunNow act on the state at now.
	if n, err := q.RedriveAll(ctx); err != nil || n != 3 {
		t.Fatalf("redrive all: %d %v", n, err)
	}
	if err := q.RunNow(ctx, want[2]); err != nil {
		t.Fatalf("run now of a due timer: %v", err)
	}
	if err := q.RunNow(ctx, want[7]); !errors.Is(err, ErrInvalid) {
		t.Fatalf("run now of a task in flight: %v", err)
	}
	if err := e.db.Verify(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkReadsWithManyDue measures Counts, a page of List(Ready) and a
// claim of one on a queue where 100,000 of 200,000 timers and 1,000 leases
// came due without a write: each costs a few tree descents, not a walk
// over what time moved.
func BenchmarkReadsWithManyDue(b *testing.B) {
	clock := NewManualClock(t0)
	db, err := OpenInMemory(Options{Clock: clock})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	q := db.Queue(ns, "q")
	batch := make([]Task, 0, MaxBatch)
	for i := range 1000 {
		batch = append(batch, Task{Priority: i})
	}
	if _, err := q.EnqueueBatch(ctx, batch); err != nil {
		b.Fatal(err)
	}
	if _, err := q.Claim(ctx, "w", time.Second, 1000); err != nil {
		b.Fatal(err)
	}
	for i := range 200_000 / MaxBatch {
		batch = batch[:0]
		for j := range MaxBatch {
			batch = append(batch, Task{Priority: (i*MaxBatch + j) % 977, Delay: time.Duration(1+j%2) * time.Hour})
		}
		if _, err := q.EnqueueBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	clock.Advance(time.Hour)
	b.Run("Counts", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if c, err := q.Counts(ctx); err != nil || c.Ready != 101_000 {
				b.Fatal(c, err)
			}
		}
	})
	b.Run("ListReady100", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if p, err := q.List(ctx, ListOptions{State: Ready, Limit: 100}); err != nil || len(p.Tasks) != 100 {
				b.Fatal(err)
			}
		}
	})
	b.Run("ClaimOne", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ls, err := q.Claim(ctx, "w", time.Hour, 1); err != nil || len(ls) != 1 {
				b.Fatal(ls, err)
			}
		}
	})
}

// TestLeaseLostSaysWhy: every refusal of a fenced call says why the lease
// is lost, including a lease past its deadline that nobody took over.
func TestLeaseLostSaysWhy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	e.enqueue(q, Task{MaxAttempts: 3})
	l := e.claim(q, 1)[0]
	stale := l
	forged := l
	forged.Secret++
	unknown := l
	unknown.ID = 999
	wantWhy := func(err error, why string) {
		t.Helper()
		wantErr(t, err, ErrLeaseLost)
		if !strings.Contains(err.Error(), why) {
			t.Fatalf("%v does not say %q", err, why)
		}
	}
	wantWhy(errOnly(q.Complete(ctx, forged, Done{})), "wrong lease secret")
	wantWhy(errOnly(q.Complete(ctx, unknown, Done{})), "no such task")
	e.clock.Advance(30 * time.Second) // the deadline
	wantWhy(q.Heartbeat(ctx, &l, time.Minute, nil), "the lease expired at "+l.Deadline.Format(time.RFC3339Nano))
	again := e.claim(q, 1)[0]
	wantWhy(q.Snooze(ctx, stale, 0), fmt.Sprintf("stale token (the task was claimed again, token %d)", again.Token))
	if err := q.Fail(ctx, again, Failure{Err: "x", Permanent: true}); err != nil {
		t.Fatal(err)
	}
	wantWhy(q.Fail(ctx, again, Failure{}), "the task is dead, not in flight")
}

// BenchmarkBytesPerTask reports the heap a waiting task costs, ready and
// scheduled (the due tree and the ready-since order are part of it).
func BenchmarkBytesPerTask(b *testing.B) {
	for _, c := range []struct {
		name  string
		delay time.Duration
	}{{"Ready", 0}, {"Scheduled", time.Hour}} {
		b.Run(c.name, func(b *testing.B) {
			const n = 100_000
			batch := make([]Task, MaxBatch)
			for i := range batch {
				batch[i] = Task{Delay: c.delay, Priority: i % 7}
			}
			var per float64
			for b.Loop() {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				db, err := OpenInMemory(Options{Clock: NewManualClock(t0)})
				if err != nil {
					b.Fatal(err)
				}
				q := db.Queue(ns, "q")
				for range n / MaxBatch {
					if _, err := q.EnqueueBatch(ctx, batch); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				per = float64(after.HeapInuse-before.HeapInuse) / n
				db.Close()
			}
			b.ReportMetric(per, "bytes/task")
		})
	}
}
