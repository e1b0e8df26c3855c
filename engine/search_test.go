package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// fillRandom gives queue q (and a neighbour, whose tasks no search of q
// may return) tasks in every state, with kinds, partitions, headers and
// errors drawn from r. It returns the ids of q's tasks.
func fillRandom(t *testing.T, e *env, r *rand.Rand, n int) {
	t.Helper()
	q, other := e.q("q"), e.q("other")
	kinds := []string{"", "mail", "sms"}
	parts := []string{"", "p1", "p2"}
	for i := range n {
		tk := Task{Kind: kinds[r.IntN(3)], Partition: parts[r.IntN(3)], MaxAttempts: 1 + r.IntN(3)}
		if r.IntN(2) == 0 {
			tk.Headers = map[string]string{"tenant": fmt.Sprint("t", r.IntN(3))}
		}
		if r.IntN(5) == 0 {
			tk.Delay = time.Duration(1+r.IntN(100)) * time.Second
		}
		target := q
		if r.IntN(6) == 0 {
			target = other
		}
		if i > 0 && r.IntN(10) == 0 {
			tk.DependsOn = []uint64{uint64(1 + r.IntN(i))}
			tk.OnParentFailure = WaitOnFailure
			if _, err := target.Enqueue(ctx, tk); err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrConflict) {
				t.Fatal(err)
			}
			continue
		}
		e.enqueue(target, tk)
		if r.IntN(8) == 0 {
			e.clock.Advance(time.Second)
		}
	}
	// Lease some, then end them every way.
	for _, qq := range []Queue{q, other} {
		ls, err := qq.Claim(ctx, "w", 10*time.Second, n/2)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			switch r.IntN(5) {
			case 0:
				if _, err := qq.Complete(ctx, l, Done{}); err != nil {
					t.Fatal(err)
				}
			case 1:
				if err := qq.Fail(ctx, l, Failure{Err: fmt.Sprintf("Timeout talking to host-%d", r.IntN(4))}); err != nil {
					t.Fatal(err)
				}
			case 2:
				if err := qq.Fail(ctx, l, Failure{Err: "bad input", Permanent: true}); err != nil {
					t.Fatal(err)
				}
			}
			// Others stay in flight; some of those leases expire below.
		}
		if _, err := qq.Claim(ctx, "w2", time.Hour, n/8); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(time.Duration(r.IntN(20)) * time.Second)
}

// everyTask lists every task of q through List, state by state.
func everyTask(t *testing.T, q Queue) []TaskInfo {
	t.Helper()
	var all []TaskInfo
	for _, st := range []State{Ready, Scheduled, InFlight, Dead, Completed, Waiting} {
		cur := ""
		for {
			p, err := q.List(ctx, ListOptions{State: st, Limit: MaxBatch, Cursor: cur})
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, p.Tasks...)
			if cur = p.Next; cur == "" {
				break
			}
		}
	}
	slices.SortFunc(all, func(a, b TaskInfo) int { return int(a.ID) - int(b.ID) })
	return all
}

// matches is Filter's meaning, written over TaskInfo.
func matches(f Filter, ti TaskInfo) bool {
	retrying := ti.State == Scheduled && ti.Attempts > 0 && ti.LastError != ""
	v, has := ti.Headers[f.HeaderKey]
	return (len(f.States) == 0 || slices.Contains(f.States, ti.State)) &&
		(f.Retrying != OnlyRetrying || retrying) && (f.Retrying != NotRetrying || !retrying) &&
		(f.Kind == "" || ti.Kind == f.Kind) && (f.Partition == "" || ti.Partition == f.Partition) &&
		(f.Error == "" || strings.Contains(strings.ToLower(ti.LastError), strings.ToLower(f.Error))) &&
		(f.HeaderKey == "" || has && (f.HeaderValue == "" || v == f.HeaderValue)) &&
		ti.ID >= f.MinID && (f.MaxID == 0 || ti.ID <= f.MaxID) &&
		(f.EnqueuedSince.IsZero() || !ti.CreatedAt.Before(f.EnqueuedSince)) &&
		(f.EnqueuedBefore.IsZero() || ti.CreatedAt.Before(f.EnqueuedBefore))
}

func randomFilter(r *rand.Rand, maxID uint64) Filter {
	var f Filter
	for _, st := range []State{Ready, Scheduled, InFlight, Dead, Completed, Waiting} {
		if r.IntN(5) == 0 {
			f.States = append(f.States, st)
		}
	}
	if r.IntN(4) == 0 {
		f.Retrying = Retrying(1 + r.IntN(2))
	}
	if r.IntN(3) == 0 {
		f.Kind = []string{"mail", "sms", "none"}[r.IntN(3)]
	}
	if r.IntN(3) == 0 {
		f.Error = []string{"TIMEOUT", "host-2", "bad", "lease expired"}[r.IntN(4)]
	}
	if r.IntN(4) == 0 {
		f.Partition = []string{"p1", "p2"}[r.IntN(2)]
	}
	if r.IntN(4) == 0 {
		f.HeaderKey = "tenant"
		if r.IntN(2) == 0 {
			f.HeaderValue = fmt.Sprint("t", r.IntN(3))
		}
	}
	if r.IntN(4) == 0 {
		f.MinID = 1 + r.Uint64N(maxID)
		if r.IntN(2) == 0 {
			f.MaxID = f.MinID + r.Uint64N(maxID)
		}
	}
	if r.IntN(4) == 0 {
		f.EnqueuedBefore = t0.Add(time.Duration(r.IntN(60)) * time.Second)
	}
	if r.IntN(4) == 0 {
		f.EnqueuedSince = t0.Add(time.Duration(r.IntN(30)) * time.Second)
		if !f.EnqueuedBefore.IsZero() && !f.EnqueuedSince.Before(f.EnqueuedBefore) {
			f.EnqueuedSince = time.Time{}
		}
	}
	return f
}

func taskIDs(ts []TaskInfo) []uint64 {
	out := make([]uint64, len(ts))
	for i, ti := range ts {
		out[i] = ti.ID
	}
	return out
}

// searchAll pages through a search of q.
func searchAll(t *testing.T, q Queue, f Filter, newest bool, limit int) []TaskInfo {
	t.Helper()
	var out []TaskInfo
	cur := ""
	for range 10_000 {
		p, err := q.Search(ctx, SearchOptions{Filter: f, Newest: newest, Limit: limit, Cursor: cur})
		if err != nil {
			t.Fatalf("search %+v: %v", f, err)
		}
		out = append(out, p.Tasks...)
		if cur = p.Next; cur == "" {
			return out
		}
	}
	t.Fatal("search does not end")
	return nil
}

// TestSearchMatchesBruteForce: over random queues and filters, Search
// returns exactly the tasks a filter over every listed task keeps, oldest
// first or newest first, through its pages, and counts them.
func TestSearchMatchesBruteForce(t *testing.T) {
	t.Parallel()
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 27))
			e := newEnv(t, true, func(o *Options) { o.RetainCompleted = time.Hour })
			fillRandom(t, e, r, 300)
			q := e.q("q")
			all := everyTask(t, q)
			for range 60 {
				f := randomFilter(r, 400)
				var want []TaskInfo
				for _, ti := range all {
					if matches(f, ti) {
						want = append(want, ti)
					}
				}
				limit := 1 + r.IntN(40)
				got := searchAll(t, q, f, false, limit)
				if !slices.Equal(taskIDs(got), taskIDs(want)) {
					t.Fatalf("filter %+v: got %v, want %v", f, taskIDs(got), taskIDs(want))
				}
				for i := range got {
					if got[i].State != want[i].State || got[i].LastError != want[i].LastError {
						t.Fatalf("task %d: search shows %v %q, list %v %q", got[i].ID, got[i].State, got[i].LastError, want[i].State, want[i].LastError)
					}
				}
				rev := searchAll(t, q, f, true, limit)
				slices.Reverse(rev)
				if !slices.Equal(taskIDs(rev), taskIDs(want)) {
					t.Fatalf("filter %+v newest first: got %v, want %v reversed", f, taskIDs(rev), taskIDs(want))
				}
				p, err := q.Search(ctx, SearchOptions{Filter: f, Limit: 1, Count: true})
				if err != nil {
					t.Fatal(err)
				}
				var maxID uint64
				if len(want) > 0 {
					maxID = want[len(want)-1].ID
				}
				if p.Count != len(want) || p.MaxID != maxID {
					t.Fatalf("filter %+v: count %d max id %d, want %d and %d", f, p.Count, p.MaxID, len(want), maxID)
				}
			}
		})
	}
}

// TestSearchReachesPastAnyWindow: a match after many thousand tasks that
// do not match is found and counted, and the walk takes several chunks.
func TestSearchReachesPastAnyWindow(t *testing.T) {
	// Not parallel: it sets a hook of the package.
	e := newEnv(t, true)
	q := e.q("q")
	batch := make([]Task, 1000)
	for range 12 { // 12,000 records: three chunks a walk
		if _, err := q.EnqueueBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	id := e.enqueue(q, Task{Kind: "needle"})
	chunks := 0
	afterChunk = func() { chunks++ }
	t.Cleanup(func() { afterChunk = nil })
	p, err := q.Search(ctx, SearchOptions{Filter: Filter{Kind: "needle"}, Count: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Tasks) != 1 || p.Tasks[0].ID != id || p.Count != 1 || p.Next != "" {
		t.Fatalf("got %v count %d next %q, want task %d counted once", taskIDs(p.Tasks), p.Count, p.Next, id)
	}
	if chunks < 4 {
		t.Fatalf("the walks took %d breaks between chunks, want at least 4", chunks)
	}
}

// TestSearchReleasesLockBetweenChunks: commits run between the chunks of
// one search (here: from the hook, which would deadlock if the lock were
// held), and the walk sees them: a task cancelled ahead of it is not
// counted, one enqueued behind the walk's end is.
func TestSearchReleasesLockBetweenChunks(t *testing.T) {
	// Not parallel: it sets a hook of the package.
	e := newEnv(t, true)
	q := e.q("q")
	tasks := make([]Task, 9000) // three chunks
	for i := range tasks {
		tasks[i].Kind = "k"
	}
	res, err := q.EnqueueBatch(ctx, tasks)
	if err != nil {
		t.Fatal(err)
	}
	last := res[len(res)-1].ID
	var added uint64
	afterChunk = func() {
		afterChunk = nil
		if err := q.Cancel(ctx, last); err != nil {
			t.Error(err)
		}
		added = e.enqueue(q, Task{Kind: "k"})
	}
	t.Cleanup(func() { afterChunk = nil })
	p, err := q.Search(ctx, SearchOptions{Filter: Filter{Kind: "k"}, Limit: 1, Count: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.Count != len(tasks) || p.MaxID != added {
		t.Fatalf("count %d through %d, want %d through %d (one cancelled, one added during the walk)", p.Count, p.MaxID, len(tasks), added)
	}
}

// TestSearchRefusesBadInput: a bad filter, limit or cursor is ErrInvalid,
// and so is a bad bulk action; nothing changes.
func TestSearchRefusesBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	e.enqueue(q, Task{Kind: "k"})
	before, _ := e.db.StateHash()
	bad := []Filter{
		{States: []State{9}},
		{Retrying: 3},
		{MinID: 5, MaxID: 4},
		{HeaderValue: "v"},
		{Error: strings.Repeat("x", MaxFilterBytes+1)},
		{Kind: strings.Repeat("k", MaxNameBytes+1)},
		{Partition: "\xff"},
		{EnqueuedSince: t0, EnqueuedBefore: t0},
	}
	for _, f := range bad {
		if _, err := q.Search(ctx, SearchOptions{Filter: f}); !errors.Is(err, ErrInvalid) {
			t.Errorf("search %+v: %v, want ErrInvalid", f, err)
		}
		if _, err := q.Bulk(ctx, f, BulkCancel); !errors.Is(err, ErrInvalid) {
			t.Errorf("bulk %+v: %v, want ErrInvalid", f, err)
		}
	}
	for _, o := range []SearchOptions{{Limit: -1}, {Limit: MaxBatch + 1}, {Cursor: "x"}, {Cursor: "0"}} {
		if _, err := q.Search(ctx, o); !errors.Is(err, ErrInvalid) {
			t.Errorf("search %+v: %v, want ErrInvalid", o, err)
		}
	}
	for _, a := range []BulkAction{0, BulkDelete + 1} {
		if _, err := q.Bulk(ctx, Filter{}, a); !errors.Is(err, ErrInvalid) {
			t.Errorf("bulk action %d: %v, want ErrInvalid", a, err)
		}
	}
	if _, err := ParseBulkAction("explode"); !errors.Is(err, ErrInvalid) {
		t.Errorf("parse: %v", err)
	}
	if after, _ := e.db.StateHash(); after != before {
		t.Fatal("a refused call changed the state")
	}
}

// bulkOutcome is what the table in Bulk's doc says a to do to ti.
func bulkOutcome(a BulkAction, ti TaskInfo) (next State, gone bool, skip string) {
	switch {
	case a == BulkRetry && ti.State == Dead:
		return Ready, false, ""
	case (a == BulkRetry || a == BulkRunNow) && ti.State == Scheduled:
		return Ready, false, ""
	case a == BulkCancel && ti.State != Completed,
		a == BulkDelete && (ti.State == Dead || ti.State == Completed):
		return 0, true, ""
	case a == BulkDelete && ti.State == InFlight:
		return ti.State, false, skipNames[skipInFlight]
	case a == BulkDelete:
		return ti.State, false, skipNames[skipPending]
	}
	return ti.State, false, map[State]string{Ready: skipNames[skipReady], InFlight: skipNames[skipInFlight],
		Waiting: skipNames[skipWaiting], Dead: skipNames[skipDead], Completed: skipNames[skipCompleted]}[ti.State]
}

// TestBulkMatchesModel: each action over random filters acts on exactly
// the tasks the filter selects, as its table says, skips the others it
// selects with their reason, and touches nothing else.
func TestBulkMatchesModel(t *testing.T) {
	t.Parallel()
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 2727))
			e := newEnv(t, true, func(o *Options) { o.RetainCompleted = time.Hour })
			fillRandom(t, e, r, 200)
			q := e.q("q")
			for range 4 {
				all := everyTask(t, q)
				others := everyTask(t, e.q("other"))
				f := randomFilter(r, 250)
				f.Retrying = AnyRetrying // keep the model's states simple
				a := BulkAction(1 + r.IntN(4))
				wantDone, wantSkip := 0, map[string]int{}
				want := map[uint64]State{}
				for _, ti := range all {
					want[ti.ID] = ti.State
					if !matches(f, ti) {
						continue
					}
					next, gone, skip := bulkOutcome(a, ti)
					switch {
					case skip != "":
						wantSkip[skip]++
					case gone:
						wantDone++
						delete(want, ti.ID)
					default:
						wantDone++
						want[ti.ID] = next
					}
				}
				res, err := q.Bulk(ctx, f, a)
				if err != nil {
					t.Fatal(err)
				}
				gotSkip := map[string]int{}
				for _, s := range res.Skipped {
					gotSkip[s.Reason] = s.Count
				}
				if res.Done != wantDone || fmt.Sprint(gotSkip) != fmt.Sprint(wantSkip) {
					t.Fatalf("%s %+v: done %d skipped %v, want %d and %v", a, f, res.Done, gotSkip, wantDone, wantSkip)
				}
				after := everyTask(t, q)
				got := map[uint64]State{}
				for _, ti := range after {
					got[ti.ID] = ti.State
				}
				// Cancelling a parent cancels tasks waiting on it (their
				// policy): the model leaves dependents alone, so compare
				// only the tasks nothing depends on.
				for id, st := range want {
					if g, ok := got[id]; !ok || g != st {
						if ti := findTask(all, id); ti.State == Waiting && (a == BulkCancel || a == BulkDelete) {
							continue
						}
						t.Fatalf("%s %+v: task %d is %v (present %v), want %v", a, f, id, g, ok, st)
					}
				}
				for id := range got {
					if _, ok := want[id]; !ok {
						t.Fatalf("%s %+v: task %d should be gone", a, f, id)
					}
				}
				// (A task of the other queue may wait for one of q's.)
				notWaiting := func(ts []TaskInfo) []TaskInfo {
					return slices.DeleteFunc(ts, func(ti TaskInfo) bool { return ti.State == Waiting })
				}
				if !slices.EqualFunc(notWaiting(others), notWaiting(everyTask(t, e.q("other"))), func(a, b TaskInfo) bool { return a.ID == b.ID && a.State == b.State }) {
					t.Fatalf("%s %+v changed another queue", a, f)
				}
				if err := e.db.Verify(); err != nil {
					t.Fatal(err)
				}
				e.clock.Advance(time.Second)
			}
		})
	}
}

func findTask(ts []TaskInfo, id uint64) TaskInfo {
	for _, ti := range ts {
		if ti.ID == id {
			return ti
		}
	}
	return TaskInfo{}
}

// TestBulkCommitsInChunksAndSurvivesCrash: a bulk retry of more dead
// tasks than one commit takes commits several times (a claim runs between
// two of them); a crash after the first leaves every task dead or
// redriven, none half, and running the bulk again finishes the rest.
func TestBulkCommitsInChunksAndSurvivesCrash(t *testing.T) {
	// Not parallel: it sets a hook of the package.
	e := newEnv(t, false, func(o *Options) { o.SnapshotBytes = -1 })
	q := e.q("q")
	const n = 2*bulkScan + 100
	tasks := make([]Task, n)
	for i := range tasks {
		tasks[i] = Task{Kind: "k", MaxAttempts: 1}
	}
	if _, err := q.EnqueueBatch(ctx, tasks); err != nil {
		t.Fatal(err)
	}
	// Leased on their last attempt and expired: dead as of now.
	for range 2 {
		if _, err := q.Claim(ctx, "w", time.Minute, MaxBatch); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(2 * time.Minute)
	commits := 0
	var claimed []Lease
	bctx, cancel := contextWithCancel()
	afterBulkCommit = func() {
		commits++
		if commits == 1 {
			// The lock is free between commits: a claim gets a redriven task.
			var err error
			if claimed, err = q.Claim(ctx, "w", time.Minute, 1); err != nil {
				t.Error(err)
			}
			cancel() // and the bulk stops here, as a crash would stop it
		}
	}
	t.Cleanup(func() { afterBulkCommit = nil })
	res, err := q.Bulk(bctx, Filter{States: []State{Dead}}, BulkRetry)
	if !errors.Is(err, errCanceled) || res.Done != bulkScan || len(claimed) != 1 {
		t.Fatalf("bulk: done %d, %v, claimed %d; want %d done and context canceled, one claimed", res.Done, err, len(claimed), bulkScan)
	}
	afterBulkCommit = nil
	e.crash()
	e.open()
	c, err := q.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Ready+c.InFlight != bulkScan || c.Dead != n-bulkScan {
		t.Fatalf("after the crash: %+v, want %d redriven and %d dead", c, bulkScan, n-bulkScan)
	}
	res, err = q.Bulk(ctx, Filter{States: []State{Dead}}, BulkRetry)
	if err != nil || res.Done != n-bulkScan || res.SkippedTotal() != 0 {
		t.Fatalf("bulk again: %+v, %v; want %d done", res, err, n-bulkScan)
	}
	if c, _ = q.Counts(ctx); c.Dead != 0 || c.Ready+c.InFlight != n {
		t.Fatalf("after the second run: %+v", c)
	}
	e.reopen()
}

// TestBulkCancelsDependentsOnce: cancelling a parent and the task waiting
// for it, both selected, removes both once and the state verifies.
func TestBulkCancelsDependentsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	parent := e.enqueue(q, Task{Kind: "k", Delay: time.Hour})
	child := e.enqueue(q, Task{Kind: "k", DependsOn: []uint64{parent}})
	grandchild := e.enqueue(q, Task{Kind: "k", DependsOn: []uint64{child}})
	res, err := q.Bulk(ctx, Filter{Kind: "k"}, BulkCancel)
	if err != nil {
		t.Fatal(err)
	}
	// The parent's cancellation cancels its dependents in the same commit;
	// the walk stops before them and the next commit finds them gone.
	if res.Done != 1 || res.SkippedTotal() != 0 {
		t.Fatalf("got %+v, want the parent cancelled (its dependents with it)", res)
	}
	for _, id := range []uint64{parent, child, grandchild} {
		if _, err := q.Get(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("task %d: %v, want gone", id, err)
		}
	}
	if err := e.db.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestBulkNeedsAdmin: a caller who may only read searches but may not act.
func TestBulkNeedsAdmin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, func(o *Options) {
		o.Authorizer = Policy{"viewer": {{Project: "*", Scope: "*", Perms: PermRead}}}
	})
	e.enqueue(e.q("q"), Task{Kind: "k"})
	q := e.db.As(Caller{ID: "viewer"}).Queue(ns, "q")
	if _, err := q.Search(ctx, SearchOptions{Count: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Bulk(ctx, Filter{}, BulkCancel); !errors.Is(err, ErrPermission) {
		t.Fatalf("bulk as a reader: %v, want ErrPermission", err)
	}
}

var errCanceled = context.Canceled

func contextWithCancel() (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }

// BenchmarkSearchCount counts the matches of a filter over a queue of
// 200,000 tasks (one in a hundred matching), and reports the cost per
// record walked and so per chunk: how long one hold of the lock lasts.
func BenchmarkSearchCount(b *testing.B) {
	db, err := OpenInMemory(Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	q := db.Queue(ns, "q")
	const n = 200_000
	batch := make([]Task, MaxBatch)
	for i := 0; i < n; i += MaxBatch {
		for j := range batch {
			batch[j] = Task{Kind: "filler"}
			if (i+j)%100 == 0 {
				batch[j].Kind = "needle"
			}
		}
		if _, err := q.EnqueueBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		p, err := q.Search(ctx, SearchOptions{Filter: Filter{Kind: "needle"}, Limit: 1, Count: true})
		if err != nil || p.Count != n/100 {
			b.Fatal(p.Count, err)
		}
	}
	perRecord := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / n
	b.ReportMetric(perRecord, "ns/record")
	b.ReportMetric(perRecord*searchChunk/1000, "µs/chunk")
}
