package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// parkClaims starts n ClaimWait calls of max tasks on q; each sends its
// result to the channel returned.
func parkClaims(q Queue, ctx context.Context, n, max int) chan claimResult {
	ch := make(chan claimResult, n)
	for range n {
		go func() {
			ls, err := q.ClaimWait(ctx, "waiter", time.Minute, max)
			ch <- claimResult{ls, err}
		}()
	}
	return ch
}

// parks returns DB.Parks.
func parks(t *testing.T, e *env) uint64 {
	t.Helper()
	n, err := e.db.Parks()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// takeResults receives n claim results, each one task, and returns the
// task ids they leased.
func takeResults(t *testing.T, ch chan claimResult, n int) map[uint64]bool {
	t.Helper()
	got := map[uint64]bool{}
	for len(got) < n {
		select {
		case r := <-ch:
			if r.err != nil || len(r.ls) != 1 || got[r.ls[0].ID] {
				t.Fatalf("claim returned %+v", r)
			}
			got[r.ls[0].ID] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d claims returned", len(got), n)
		}
	}
	return got
}

// TestClaimWaitWakesOnlyAsManyAsNeeded: one enqueue wakes one of ten
// parked claims, a batch of three wakes three; the rest are not woken (no
// claim of theirs runs). The first lease to exist wakes one more claim,
// once, to watch its expiry with a timer.
func TestClaimWaitWakesOnlyAsManyAsNeeded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	chans := parkClaims(q, cctx, 10, 1)
	waitParked(t, e, q, 10)
	if n := parks(t, e); n != 10 {
		t.Fatalf("Parks = %d", n)
	}
	id := e.enqueue(q, Task{})
	got := takeResults(t, chans, 1)
	if !got[id] {
		t.Fatalf("leased %v, want task %d", got, id)
	}
	waitParked(t, e, q, 9)
	if n := parks(t, e); n != 11 {
		t.Fatalf("Parks = %d, want 11: one claim woken to watch the new lease", n)
	}

	before := parkedOn(e, q)
	if _, err := q.EnqueueBatch(ctx, []Task{{}, {}, {}}); err != nil {
		t.Fatal(err)
	}
	got = takeResults(t, chans, 3)
	if len(got) != 3 {
		t.Fatalf("leased %v", got)
	}
	waitParked(t, e, q, 6)
	if n := parks(t, e); n != 11 {
		t.Fatalf("Parks = %d, want 11: no claim beyond the three was woken", n)
	}
	awake := 0
	for _, pc := range before {
		if pc.awake() {
			awake++
		}
	}
	if awake != 3 || len(parkedOn(e, q)) != 6 {
		t.Fatalf("%d of the parked claims woken, %d still parked; want 3 and 6", awake, len(parkedOn(e, q)))
	}
	select {
	case r := <-chans:
		t.Fatalf("a claim returned %+v", r)
	default:
	}
}

// TestClaimWaitTimerWakesAsManyAsDue: with four claims parked, two timers
// coming due wake two claims, not four: one timer watches the queue, its
// claim takes one task and its commit wakes one more claim for the other.
func TestClaimWaitTimerWakesAsManyAsDue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	chans := parkClaims(q, cctx, 4, 1)
	waitParked(t, e, q, 4)
	// Nothing was due: a new due time wakes one claim to arm a timer.
	if _, err := q.EnqueueBatch(ctx, []Task{{Delay: time.Minute}, {Delay: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	waitParked(t, e, q, 4)
	if n := parks(t, e); n != 5 {
		t.Fatalf("Parks = %d, want 5", n)
	}
	timers := 0
	for _, pc := range parkedOn(e, q) {
		if pc.t != nil {
			timers++
		}
	}
	if timers != 1 {
		t.Fatalf("%d parked claims hold a timer, want 1", timers)
	}
	e.clock.Advance(time.Minute)
	got := takeResults(t, chans, 2)
	if len(got) != 2 {
		t.Fatalf("leased %v", got)
	}
	waitParked(t, e, q, 2)
	if n := parks(t, e); n != 6 {
		t.Fatalf("Parks = %d, want 6: one more woken to watch the leases", n)
	}
}

// TestClaimWaitHandsOnWakeUp: a woken claim that gives up without claiming
// (its context ended) passes its wake-up to a sleeping claim, which takes
// the task: no task is left while a claim sleeps.
func TestClaimWaitHandsOnWakeUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	qk := q.(*queue).key()
	c := e.db.c
	ch := parkClaims(q, ctx, 1, 1)
	waitParked(t, e, q, 1)
	before := parkedOn(e, q)
	// A claim parked last, so woken first, standing in for a ClaimWait
	// about to give up.
	c.mu.Lock()
	quitter := c.park(qk, 0)
	c.mu.Unlock()
	id := e.enqueue(q, Task{})
	select {
	case <-quitter.ch:
	default:
		t.Fatal("the last parked claim was not woken")
	}
	stillParked(t, e, q, before, ch)
	c.leave(quitter)
	expectClaim(t, ch, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waiters) != 0 {
		t.Fatalf("%d queues keep parked claims after all left", len(c.waiters))
	}
}

// TestClaimWaitNoTaskStranded: claims that give up at random moments (a
// deadline that may end the wait just as a commit wakes them) while tasks
// arrive never leave a task unclaimed while other claims sleep: once the
// quitting claims are gone, the steady ones claim every task.
func TestClaimWaitNoTaskStranded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, func(o *Options) { o.Clock = nil })
	q := e.q("q")
	total, quitters, rounds := 2000, 8, 200
	if testing.Short() {
		total, rounds = 500, 60
	}
	var done atomic.Int64
	all := make(chan struct{})
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	work := func(cctx context.Context, max int) bool {
		ls, err := q.ClaimWait(cctx, "w", time.Minute, max)
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				errs <- err
			}
			return false
		}
		for _, l := range ls {
			if _, err := q.Complete(ctx, l, Done{}); err != nil {
				errs <- err
			}
			if done.Add(1) == int64(total) {
				close(all)
			}
		}
		return true
	}
	for i := range quitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 1))
			for range rounds {
				cctx, stop := context.WithTimeout(stop, time.Duration(r.IntN(200))*time.Microsecond)
				work(cctx, 1+r.IntN(3))
				stop()
			}
		}()
	}
	var steady sync.WaitGroup
	for range 4 {
		steady.Add(1)
		go func() {
			defer steady.Done()
			for stop.Err() == nil {
				work(stop, 1)
			}
		}()
	}
	go func() {
		r := rand.New(rand.NewPCG(99, 2))
		for n := 0; n < total; {
			k := min(1+r.IntN(5), total-n)
			tasks := make([]Task, k)
			if _, err := q.EnqueueBatch(ctx, tasks); err != nil {
				errs <- err
				return
			}
			n += k
		}
	}()
	wg.Wait() // the quitters are gone
	select {
	case <-all:
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		c, _ := q.Counts(ctx)
		t.Fatalf("%d of %d tasks completed; the queue holds %+v while claims sleep", done.Load(), total, c)
	}
	cancel()
	steady.Wait()
	if n := done.Load(); n != int64(total) {
		t.Fatalf("%d tasks completed, want %d", n, total)
	}
}

// TestClaimWaitWakesWithinControls: the claims a commit wakes are as many
// as the queue's controls let lease, not as many as it holds ready: work
// arriving on a paused queue wakes none, its Resume wakes one per ready
// task; at an in-flight bound, raising the bound wakes one per freed slot
// and a completion one; with a rate limit, each token that comes wakes one
// claim (the one whose timer watches the bucket), and its commit one more
// to watch the next.
func TestClaimWaitWakesWithinControls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	cctx, stop := context.WithCancel(ctx)
	defer stop()

	mustDo(t, q.Pause(ctx))
	chans := parkClaims(q, cctx, 5, 1)
	waitParked(t, e, q, 5)
	p0 := parks(t, e)
	e.enqueue(q, Task{})
	e.enqueue(q, Task{})
	if n := parks(t, e); n != p0 || len(parkedOn(e, q)) != 5 {
		t.Fatalf("work on a paused queue woke %d claims", n-p0)
	}
	mustDo(t, q.Resume(ctx))
	takeResults(t, chans, 2)
	waitParked(t, e, q, 3)
	if n := parks(t, e); n != p0+1 {
		t.Fatalf("Parks rose by %d after Resume, want 1: two claims took the two tasks, one more watches their leases", n-p0)
	}
	stop()
	for range 3 {
		if r := <-chans; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("a cancelled claim: %+v", r)
		}
	}

	// Two tasks in flight at a bound of 2, four ready.
	e2 := newEnv(t, true)
	q = e2.q("q")
	cctx, stop = context.WithCancel(ctx)
	defer stop()
	for range 6 {
		e2.enqueue(q, Task{})
	}
	mustDo(t, q.SetLimits(ctx, Limits{MaxInFlight: 2}))
	held := e2.claim(q, 2)
	chans = parkClaims(q, cctx, 4, 1)
	waitParked(t, e2, q, 4)
	p0 = parks(t, e2)
	mustDo(t, q.SetLimits(ctx, Limits{MaxInFlight: 3}))
	takeResults(t, chans, 1)
	waitParked(t, e2, q, 3)
	if n := parks(t, e2); n != p0 {
		t.Fatalf("raising the bound by one woke %d claims beyond the one", n-p0)
	}
	if _, err := q.Complete(ctx, held[0], Done{}); err != nil {
		t.Fatal(err)
	}
	takeResults(t, chans, 1)
	waitParked(t, e2, q, 2)
	if n := parks(t, e2); n != p0 {
		t.Fatalf("a completion at the bound woke %d claims beyond the one", n-p0)
	}
	// A completion that claims the freed slot itself wakes nobody.
	if _, ls, err := q.CompleteAndClaim(ctx, held[1], Done{}, "w", time.Minute, 1); err != nil || len(ls) != 1 {
		t.Fatalf("complete and claim at the bound: %v %v", ids(ls), err)
	}
	if n := parks(t, e2); n != p0 || len(parkedOn(e2, q)) != 2 {
		t.Fatalf("a completion whose claim took its slot woke %d claims", n-p0)
	}
	stop()

	// A rate limit of one task a second, its bucket empty, three ready.
	e3 := newEnv(t, true)
	q = e3.q("q")
	cctx, stop = context.WithCancel(ctx)
	defer stop()
	for range 4 {
		e3.enqueue(q, Task{})
	}
	mustDo(t, q.SetLimits(ctx, Limits{Rate: 1, Per: time.Second, Burst: 1}))
	if ls := e3.claim(q, 5); len(ls) != 1 {
		t.Fatalf("a bucket of one gave %d", len(ls))
	}
	chans = parkClaims(q, cctx, 3, 1)
	waitParked(t, e3, q, 3)
	p0 = parks(t, e3)
	timers := 0
	for _, pc := range parkedOn(e3, q) {
		if pc.t != nil {
			timers++
		}
	}
	if timers != 1 {
		t.Fatalf("%d parked claims hold a timer, want the one that watches the bucket", timers)
	}
	for i := range 3 {
		e3.clock.Advance(time.Second)
		takeResults(t, chans, 1)
		left := 2 - i
		if left == 0 {
			break
		}
		waitParked(t, e3, q, left)
		if n := parks(t, e3); n != p0+uint64(i)+1 {
			t.Fatalf("token %d: Parks rose by %d, want %d (one claim woken to watch the bucket per token)", i, n-p0, i+1)
		}
	}
	if c := counts(t, q); c.InFlight != 4 {
		t.Fatalf("counts %+v", c)
	}
}
