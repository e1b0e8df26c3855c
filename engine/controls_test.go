package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func settings(t *testing.T, q Queue) QueueSettings {
	t.Helper()
	s, err := q.Settings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPauseAndResume: a paused queue takes enqueues and its tasks count
// as usual, but claims lease nothing; a ClaimWait parks through any number
// of enqueues without waking (no spinning), and the Resume commit wakes
// it. Pausing twice writes nothing. Queues and Settings show it.
func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	a := e.enqueue(q, Task{})
	mustDo(t, q.Pause(ctx))
	seq := e.db.Stats().Seq
	mustDo(t, q.Pause(ctx))
	if e.db.Stats().Seq != seq {
		t.Fatal("pausing a paused queue wrote a batch")
	}
	if !settings(t, q).Paused {
		t.Fatal("Settings does not show the pause")
	}
	b := e.enqueue(q, Task{})
	if ls := e.claim(q, 10); len(ls) != 0 {
		t.Fatalf("a paused queue leased %v", ids(ls))
	}
	if n, _ := q.Counts(ctx); n.Ready != 2 {
		t.Fatalf("counts of a paused queue: %+v", n)
	}
	if qs, _ := e.db.Queues(ctx); len(qs) != 1 || !qs[0].Paused || qs[0].Counts.Ready != 2 {
		t.Fatalf("queues: %+v", qs)
	}
	// Other queues are not paused.
	other := e.q("other")
	o := e.enqueue(other, Task{})
	if ls := e.claim(other, 1); len(ls) != 1 || ls[0].ID != o {
		t.Fatalf("another queue: %v", ids(ls))
	}

	ch := parkClaim(q, ctx)
	waitParked(t, e, q, 1)
	before := parkedOn(e, q)
	parks, _ := e.db.Parks()
	for range 5 {
		e.enqueue(q, Task{})
	}
	e.clock.Advance(time.Hour)
	stillParked(t, e, q, before, ch)
	if p, _ := e.db.Parks(); p != parks {
		t.Fatalf("the parked claim woke %d times while the queue was paused", p-parks)
	}
	mustDo(t, q.Resume(ctx))
	select {
	case r := <-ch:
		if r.err != nil || len(r.ls) != 5 || r.ls[0].ID != a || r.ls[1].ID != b {
			t.Fatalf("claim after resume: %v %v", ids(r.ls), r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Resume did not wake the parked claim")
	}
	if settings(t, q).Paused {
		t.Fatal("still paused after Resume")
	}
}

// TestPauseNeedsAdmin: Pause, Resume and SetLimits need PermAdmin,
// Settings PermRead; a refused call changes nothing.
func TestPauseNeedsAdmin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, func(o *Options) {
		o.Authorizer = Policy{
			"worker": {{Project: "*", Scope: "*", Perms: PermWork | PermEnqueue}},
			"reader": {{Project: "*", Scope: "*", Perms: PermRead}},
			"admin":  {{Project: "*", Scope: "*", Perms: PermAdmin}},
		}
	})
	qw := e.db.As(Caller{ID: "worker"}).Queue(ns, "q")
	qr := e.db.As(Caller{ID: "reader"}).Queue(ns, "q")
	qa := e.db.As(Caller{ID: "admin"}).Queue(ns, "q")
	before := dump(e.db)
	wantErr(t, qw.Pause(ctx), ErrPermission)
	wantErr(t, qw.Resume(ctx), ErrPermission)
	wantErr(t, qr.SetLimits(ctx, Limits{MaxInFlight: 1}), ErrPermission)
	wantErr(t, errOnly(qw.Settings(ctx)), ErrPermission)
	if dump(e.db) != before {
		t.Fatal("a refused call changed the state")
	}
	mustDo(t, qa.Pause(ctx))
	mustDo(t, qa.SetLimits(ctx, Limits{MaxInFlight: 1}))
	if s := settings(t, qr); !s.Paused || s.Limits.MaxInFlight != 1 {
		t.Fatalf("settings: %+v", s)
	}
}

// TestSettingsOutliveTasks: a queue's settings stay while it holds no
// task, past the day its totals are kept, through a crash and a reopen;
// Queues lists a queue that has settings and no task; restoring every
// default deletes the record.
func TestSettingsOutliveTasks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.SnapshotBytes = -1 })
	q, empty := e.q("q"), e.q("empty")
	mustDo(t, empty.Pause(ctx)) // a queue that never held a task
	l := e.claim(q, 1)
	if len(l) != 0 {
		t.Fatal("claimed from an empty queue")
	}
	e.enqueue(q, Task{})
	mustDo(t, q.SetLimits(ctx, Limits{MaxInFlight: 2, Rate: 10, Per: time.Minute}))
	ls := e.claim(q, 1)
	if _, err := q.Complete(ctx, ls[0], Done{}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(48 * time.Hour)
	e.enqueue(e.q("elsewhere"), Task{}) // a commit: idle totals are forgotten
	e.crash()
	e.open()
	want := Limits{MaxInFlight: 2, Rate: 10, Per: time.Minute, Burst: 10}
	if s := settings(t, q); s.Paused || s.Limits != want {
		t.Fatalf("limits after a crash: %+v", s)
	}
	if !settings(t, empty).Paused {
		t.Fatal("the pause of a queue without tasks was lost")
	}
	qs, err := e.db.Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	type fields Limits // every field, not Limits.String's words
	for _, i := range qs {
		got = append(got, fmt.Sprintf("%s paused=%v limits=%+v counts=%+v", i.Name, i.Paused, fields(i.Limits), i.Counts))
	}
	if s := strings.Join(got, "\n"); s != "elsewhere paused=false limits={MaxInFlight:0 Rate:0 Per:0s Burst:0 PartitionMaxInFlight:0 PartitionRate:0 PartitionPer:0s PartitionBurst:0} counts={Ready:1 Scheduled:0 InFlight:0 Dead:0 Completed:0 Waiting:0}\n"+
		"empty paused=true limits={MaxInFlight:0 Rate:0 Per:0s Burst:0 PartitionMaxInFlight:0 PartitionRate:0 PartitionPer:0s PartitionBurst:0} counts={Ready:0 Scheduled:0 InFlight:0 Dead:0 Completed:0 Waiting:0}\n"+
		"q paused=false limits={MaxInFlight:2 Rate:10 Per:1m0s Burst:10 PartitionMaxInFlight:0 PartitionRate:0 PartitionPer:0s PartitionBurst:0} counts={Ready:0 Scheduled:0 InFlight:0 Dead:0 Completed:0 Waiting:0}" {
		t.Fatalf("queues:\n%s", s)
	}
	e.reopen() // and through a snapshot
	mustDo(t, q.SetLimits(ctx, Limits{}))
	mustDo(t, empty.Resume(ctx))
	if qs, _ := e.db.Queues(ctx); len(qs) != 1 || qs[0].Name != "elsewhere" {
		t.Fatalf("queues once every setting is back to its default: %+v", qs)
	}
	if strings.Contains(dump(e.db), "conf ") {
		t.Fatalf("a settings record outlived its settings:\n%s", dump(e.db))
	}
}

// TestMaxInFlight: a claim leases at most the bound minus the tasks in
// flight, across claimers; a completion, a failure or an expired lease
// frees a slot; a new bound applies at the next claim; a ClaimWait parked
// at the bound wakes when a task leaves flight and when a lease expires.
func TestMaxInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	for range 6 {
		e.enqueue(q, Task{})
	}
	mustDo(t, q.SetLimits(ctx, Limits{MaxInFlight: 2}))
	a := e.claim(q, 5)
	if len(a) != 2 {
		t.Fatalf("claimed %d, want the bound of 2", len(a))
	}
	if ls, _ := q.Claim(ctx, "w2", time.Minute, 5); len(ls) != 0 {
		t.Fatalf("another claimer leased %v past the bound", ids(ls))
	}
	if _, err := q.Complete(ctx, a[0], Done{}); err != nil {
		t.Fatal(err)
	}
	b, _ := q.Claim(ctx, "w2", time.Minute, 5)
	if len(b) != 1 {
		t.Fatalf("after a completion: %v", ids(b))
	}
	mustDo(t, q.Fail(ctx, b[0], Failure{Err: "x", RetryAfter: time.Hour}))
	if ls := e.claim(q, 5); len(ls) != 1 {
		t.Fatalf("after a failure: %v", ids(ls))
	}
	mustDo(t, q.SetLimits(ctx, Limits{MaxInFlight: 3}))
	if ls := e.claim(q, 5); len(ls) != 1 {
		t.Fatalf("after raising the bound to 3: %v", ids(ls))
	}

	// At the bound: a parked claim wakes on a completion...
	held := inFlight(t, e, q)
	if len(held) != 3 {
		t.Fatalf("%d in flight", len(held))
	}
	ch := parkClaim(q, ctx)
	waitParked(t, e, q, 1)
	e.enqueue(q, Task{}) // more work wakes it, but it has no slot: it parks again
	waitParked(t, e, q, 1)
	select {
	case r := <-ch:
		t.Fatalf("claimed past the bound: %v %v", ids(r.ls), r.err)
	default:
	}
	leases := e.claimsOf(held)
	if _, err := q.Complete(ctx, leases[0], Done{}); err != nil {
		t.Fatal(err)
	}
	r := recv(t, ch)
	if r.err != nil || len(r.ls) != 1 {
		t.Fatalf("woken by a completion: %v %v", ids(r.ls), r.err)
	}
	// ... and when a lease expires: its task is ready again, not in flight.
	ch = parkClaim(q, ctx)
	waitParked(t, e, q, 1)
	e.clock.Advance(30 * time.Second) // e.claim leases for 30 s
	r = recv(t, ch)
	if r.err != nil || len(r.ls) != 2 {
		t.Fatalf("woken by expired leases: %v %v", ids(r.ls), r.err)
	}
	if n, _ := q.Counts(ctx); n.InFlight != 3 {
		t.Fatalf("counts: %+v", n)
	}
}

// inFlight lists the ids of q's tasks in flight.
func inFlight(t *testing.T, e *env, q Queue) []uint64 {
	t.Helper()
	p, err := q.List(ctx, ListOptions{State: InFlight})
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, i := range p.Tasks {
		out = append(out, i.ID)
	}
	return out
}

// claimsOf rebuilds the leases of tasks in flight (the engine's own view:
// secrets included), for tests that lost track of them.
func (e *env) claimsOf(idsIn []uint64) []Lease {
	c := e.db.c
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Lease
	for _, id := range idsIn {
		tk, _ := c.store.Task(id)
		out = append(out, Lease{ID: id, Token: tk.Token(), Secret: tk.Secret()})
	}
	return out
}

// TestRateLimit: a claim takes one token per task from a bucket of Burst
// tokens refilled at Rate per Per; a ClaimWait with no token parks with a
// timer for the moment the next token comes (not before, not polling),
// and the bucket's level is durable.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.SnapshotBytes = -1 })
	q := e.q("q")
	for range 10 {
		e.enqueue(q, Task{})
	}
	// 2 per second, bursts of 3.
	mustDo(t, q.SetLimits(ctx, Limits{Rate: 2, Per: time.Second, Burst: 3}))
	if ls := e.claim(q, 10); len(ls) != 3 {
		t.Fatalf("a full bucket gave %d", len(ls))
	}
	if ls := e.claim(q, 10); len(ls) != 0 {
		t.Fatalf("an empty bucket gave %d", len(ls))
	}
	// The bucket's level survives a crash.
	e.crash()
	e.open()
	if ls := e.claim(q, 10); len(ls) != 0 {
		t.Fatalf("an empty bucket gave %d after a crash", len(ls))
	}
	e.clock.Advance(time.Second)
	if ls := e.claim(q, 10); len(ls) != 2 {
		t.Fatalf("a second refilled %d tokens, want 2", len(ls))
	}
	// A parked claim's timer is armed for the next token: 500 ms.
	ch := parkClaim(q, ctx)
	waitParked(t, e, q, 1)
	before := parkedOn(e, q)
	e.clock.Advance(499 * time.Millisecond)
	stillParked(t, e, q, before, ch)
	parks, _ := e.db.Parks()
	e.clock.Advance(time.Millisecond)
	if r := recv(t, ch); r.err != nil || len(r.ls) != 1 {
		t.Fatalf("at the next token: %v %v", ids(r.ls), r.err)
	}
	if p, _ := e.db.Parks(); p != parks {
		t.Fatalf("the claim parked %d more times before its token came", p-parks)
	}
	// A new rate keeps the tokens the bucket holds (none), at most the new
	// burst.
	e.clock.Advance(time.Second) // 2 tokens
	mustDo(t, q.SetLimits(ctx, Limits{Rate: 1, Per: time.Minute, Burst: 1}))
	if ls := e.claim(q, 10); len(ls) != 1 {
		t.Fatalf("after a change to a burst of 1: %d", len(ls))
	}
	if ls := e.claim(q, 10); len(ls) != 0 {
		t.Fatalf("the new bucket gave %d", len(ls))
	}
	// Only changing the bound keeps the bucket as it is.
	mustDo(t, q.SetLimits(ctx, Limits{MaxInFlight: 100, Rate: 1, Per: time.Minute, Burst: 1}))
	if ls := e.claim(q, 10); len(ls) != 0 {
		t.Fatalf("the same bucket refilled on a change of the bound: %d", len(ls))
	}
	// Removing the rate limit leases the rest at once.
	mustDo(t, q.SetLimits(ctx, Limits{}))
	if ls := e.claim(q, 10); len(ls) != 3 {
		t.Fatalf("without limits: %d", len(ls))
	}
	e.reopen()
}

// TestLimitsCombine: a claim leases the fewest the bound, the bucket and
// max allow; a paused queue leases nothing and takes no token.
func TestLimitsCombine(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	for range 10 {
		e.enqueue(q, Task{})
	}
	mustDo(t, q.SetLimits(ctx, Limits{MaxInFlight: 4, Rate: 3, Per: time.Second}))
	mustDo(t, q.Pause(ctx))
	if ls := e.claim(q, 10); len(ls) != 0 {
		t.Fatal("a paused queue leased")
	}
	mustDo(t, q.Resume(ctx))
	if s := settings(t, q); s.Paused || s.Limits.MaxInFlight != 4 {
		t.Fatalf("Resume changed the limits: %+v", s)
	}
	if ls := e.claim(q, 2); len(ls) != 2 {
		t.Fatalf("max 2: %d", len(ls))
	}
	if ls := e.claim(q, 10); len(ls) != 1 {
		t.Fatalf("the bucket's last token: %d", len(ls))
	}
	e.clock.Advance(10 * time.Second) // the bucket is full; the leases (30 s) hold
	if ls := e.claim(q, 10); len(ls) != 1 {
		t.Fatalf("the bound's last slot: %d", len(ls))
	}
}

// TestSetLimitsRefusesBadInput: limits out of range are ErrInvalid and
// change nothing.
func TestSetLimitsRefusesBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	before := dump(e.db)
	for name, l := range map[string]Limits{
		"negative bound":   {MaxInFlight: -1},
		"bound too large":  {MaxInFlight: MaxInFlightLimit + 1},
		"negative rate":    {Rate: -1, Per: time.Second},
		"rate too large":   {Rate: MaxRateTokens + 1, Per: time.Second},
		"rate without per": {Rate: 1},
		"per too short":    {Rate: 1, Per: time.Nanosecond},
		"per too long":     {Rate: 1, Per: MaxRatePer + time.Microsecond},
		"per without rate": {Per: time.Second},
		"burst alone":      {Burst: 3},
		"negative burst":   {Rate: 1, Per: time.Second, Burst: -1},
		"burst too large":  {Rate: 1, Per: time.Second, Burst: MaxRateTokens + 1},
	} {
		if err := q.SetLimits(ctx, l); err == nil {
			t.Errorf("%s accepted", name)
		} else {
			wantErr(t, err, ErrInvalid)
		}
	}
	wantErr(t, e.db.Queue(ns, "").Pause(ctx), ErrInvalid)
	if dump(e.db) != before {
		t.Fatal("a refused call changed the state")
	}
}

// TestReplicatedControlsMatchStandalone: pause, resume, limits, unique
// enqueues and completions that claim under the controls, planned by
// three replicated DBs give, after every step, the
// standalone DB's answers and state byte for byte: every decision reads
// the state and the command's time only.
func TestReplicatedControlsMatchStandalone(t *testing.T) {
	t.Parallel()
	matchStandalone(t, -1, func(api API, clock *ManualClock) []func() string {
		q := api.Queue(ns, "q")
		show := func(v any, err error) string { return fmt.Sprintf("%+v err=%v", v, err) }
		var leases []Lease
		claim := func(n int) string {
			ls, err := q.Claim(ctx, "w", time.Minute, n)
			leases = append(leases, ls...)
			return show(ids(ls), err)
		}
		u := func(payload string, states ...State) Task {
			return Task{Kind: "k", Payload: []byte(payload), Unique: &Unique{Window: time.Minute, States: states}}
		}
		return []func() string{
			func() string {
				return show(q.EnqueueBatch(ctx, []Task{{}, {}, {}, {}, {}, u(`{"a":1,"b":2}`), u(`{"b":2,"a":1}`)}))
			},
			func() string { return show(nil, q.Pause(ctx)) },
			func() string { return claim(3) },
			func() string { return show(api.Queues(ctx)) },
			func() string { return show(nil, q.SetLimits(ctx, Limits{MaxInFlight: 3, Rate: 2, Per: time.Second})) },
			func() string { return show(nil, q.Resume(ctx)) },
			func() string { return claim(5) },
			func() string { clock.Advance(700 * time.Millisecond); return claim(5) },
			func() string { return show(q.Complete(ctx, leases[0], Done{})) },
			func() string { clock.Advance(time.Second); return claim(5) },
			func() string {
				// The claim half under both limits: the bound's room
				// after the completion, and the bucket's tokens.
				res, ls, err := q.CompleteAndClaim(ctx, leases[1], Done{}, "w", time.Minute, 5)
				leases = append(leases, ls...)
				return show(fmt.Sprint(res, ids(ls)), err)
			},
			func() string { return show(nil, q.Pause(ctx)) },
			func() string {
				res, ls, err := q.CompleteAndClaim(ctx, leases[2], Done{}, "w", time.Minute, 5)
				return show(fmt.Sprint(res, ids(ls)), err)
			},
			func() string { return show(nil, q.Resume(ctx)) },
			func() string { return show(q.Settings(ctx)) },
			func() string { return show(q.Enqueue(ctx, u(`{"a":1, "b":2}`))) },
			func() string { clock.Advance(2 * time.Minute); return show(q.Enqueue(ctx, u(`{"a":1,"b":2}`))) },
			func() string {
				return show(q.Enqueue(ctx, u(`{"a":1,"b":2}`, Ready, Scheduled, InFlight, Dead)))
			},
			func() string { return show(nil, q.SetLimits(ctx, Limits{})) },
			func() string { return claim(10) },
			func() string { return show(api.Queues(ctx)) },
		}
	})
}

// TestReplicatedClaimWaitOnPausedQueue: on a replicated DB too, a
// ClaimWait on a paused queue is woken by the Resume applied from the log,
// on whichever node it waits.
func TestReplicatedClaimWaitOnPausedQueue(t *testing.T) {
	t.Parallel()
	clock := NewManualClock(t0)
	l := newLocalLog(t, 2, func(int) Options { return Options{Clock: clock} })
	q := l.members[0].db.Queue(ns, "q")
	mustDo(t, q.Pause(ctx))
	if _, err := q.Enqueue(ctx, Task{}); err != nil {
		t.Fatal(err)
	}
	got := make(chan claimResult, 1)
	go func() {
		ls, err := q.ClaimWait(ctx, "w", time.Minute, 1)
		got <- claimResult{ls, err}
	}()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	mustDo(t, l.members[0].db.WaitParked(wctx, ns, "q", 1))
	mustDo(t, q.Resume(ctx))
	if r := recv(t, got); r.err != nil || len(r.ls) != 1 {
		t.Fatalf("after resume: %v %v", ids(r.ls), r.err)
	}
	l.sameState(t, l.members[0].db, "end")
}

// TestLimitsString: the words the CLI and the dashboard show for limits.
func TestLimitsString(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		l    Limits
		want string
	}{
		{Limits{}, ""},
		{Limits{MaxInFlight: 3}, "at most 3 in flight"},
		{Limits{Rate: 10, Per: time.Second}, "10 per 1s"},
		{Limits{Rate: 10, Per: time.Second, Burst: 10}, "10 per 1s"},
		{Limits{MaxInFlight: 3, Rate: 10, Per: time.Minute, Burst: 2}, "at most 3 in flight; 10 per 1m0s, bursts of 2"},
	} {
		if got := c.l.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.l, got, c.want)
		}
	}
}
