package engine

import (
	"errors"
	"testing"
	"time"
)

// TestCompleteAndClaim: one commit completes the lease (with its result,
// ops and follow-ups) and leases the next tasks in serving order; the
// follow-ups it enqueues on the same queue are not among them.
func TestCompleteAndClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.RetainCompleted = time.Hour })
	q := e.q("q")
	for p := range 4 {
		e.enqueue(q, Task{Priority: p})
	}
	ls := e.claim(q, 1) // priority 3: task 4
	commits := e.db.Stats().Commits
	res, next, err := q.CompleteAndClaim(ctx, ls[0], Done{Result: []byte(`"r"`), Ops: []Op{Set("k", []byte("v"))},
		FollowUps: []FollowUp{{Queue: "q", Task: Task{Priority: 9}}}}, "w2", time.Minute, 2)
	if err != nil {
		t.Fatal(err)
	}
	if d := e.db.Stats().Commits - commits; d != 1 {
		t.Fatalf("%d commits, want 1", d)
	}
	if len(res.Enqueued) != 1 || res.Enqueued[0].ID != 5 || res.Version == 0 {
		t.Fatalf("result %+v", res)
	}
	if got := ids(next); len(got) != 2 || got[0] != 3 || got[1] != 2 {
		t.Fatalf("claimed %v, want tasks 3 and 2 (the follow-up is not stored yet)", got)
	}
	for _, l := range next {
		if l.Owner != "w2" || l.Attempt != 1 || l.Secret == 0 || !l.Deadline.Equal(t0.Add(time.Minute)) {
			t.Fatalf("lease %+v", l)
		}
	}
	if info := e.get(q, ls[0].ID); info.State != Completed || string(info.Result) != `"r"` || len(info.FollowUps) != 1 {
		t.Fatalf("completed task %+v", info)
	}
	if c := counts(t, q); c != (Counts{Ready: 2, InFlight: 2, Completed: 1}) {
		t.Fatalf("counts %+v", c)
	}
	// The claimed leases are real: they complete, and an empty queue
	// claims nothing.
	for _, l := range next {
		if _, err := q.Complete(ctx, l, Done{}); err != nil {
			t.Fatal(err)
		}
	}
	e.reopen()
	ls = e.claim(q, 2)
	_, more, err := q.CompleteAndClaim(ctx, ls[0], Done{}, "w", time.Minute, 5)
	if err != nil || len(more) != 0 {
		t.Fatalf("with the rest in flight: %v %v", more, err)
	}
}

// TestCompleteAndClaimRefusals: a lost lease, or a completion whose ops
// are refused, changes nothing: no completion, no claim; bad input is
// ErrInvalid.
func TestCompleteAndClaimRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	q := e.q("q")
	for range 3 {
		e.enqueue(q, Task{})
	}
	ls := e.claim(q, 1)
	stale := ls[0]
	stale.Token++
	expired := e.claim(q, 1)[0]
	e.clock.Advance(10 * time.Second)
	if err := q.Heartbeat(ctx, &ls[0], time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	before := dump(e.db)
	type call struct {
		l    Lease
		d    Done
		want error
		max  int
	}
	cases := map[string]call{
		"stale token":      {stale, Done{}, ErrLeaseLost, 1},
		"forged secret":    {Lease{ID: ls[0].ID, Token: ls[0].Token}, Done{}, ErrLeaseLost, 1},
		"no such task":     {Lease{ID: 99, Token: 1}, Done{}, ErrLeaseLost, 1},
		"failed assert":    {ls[0], Done{Ops: []Op{IfExists("nope")}}, ErrConflict, 1},
		"max 0":            {ls[0], Done{}, ErrInvalid, 0},
		"max too big":      {ls[0], Done{}, ErrInvalid, MaxBatch + 1},
		"invalid result":   {ls[0], Done{Result: []byte(`{`)}, ErrInvalid, 1},
		"invalid followup": {ls[0], Done{FollowUps: []FollowUp{{Queue: "", Task: Task{}}}}, ErrInvalid, 1},
	}
	e.clock.Advance(25 * time.Second) // the second lease (30 s) expired, the first (1 h) did not
	cases["expired lease"] = call{expired, Done{}, ErrLeaseLost, 1}
	for name, c := range cases {
		res, next, err := q.CompleteAndClaim(ctx, c.l, c.d, "w", time.Minute, c.max)
		if !errors.Is(err, c.want) || len(next) != 0 || res.Version != 0 {
			t.Errorf("%s: %+v %v %v, want %v", name, res, next, err, c.want)
		}
	}
	if after := dump(e.db); after != before {
		t.Fatalf("refused calls changed the state:\n%s\nwant\n%s", after, before)
	}
	_, _, err := q.CompleteAndClaim(ctx, ls[0], Done{}, "", time.Minute, 1)
	wantErr(t, err, ErrInvalid)
	_, _, err = e.db.As(Caller{ID: "c"}).Queue(ns, "q").CompleteAndClaim(ctx, ls[0], Done{}, "w", time.Minute, 1)
	wantErr(t, err, ErrPermission)
	if after := dump(e.db); after != before {
		t.Fatal("a refused call changed the state")
	}
	// The lease that held still works: it completes and takes the expired
	// lease's task, reclaimed.
	_, next, err := q.CompleteAndClaim(ctx, ls[0], Done{}, "w", time.Minute, 5)
	if err != nil || len(next) != 2 || next[0].ID != expired.ID || next[0].Attempt != 2 {
		t.Fatalf("after the refusals: %+v %v", next, err)
	}
}

// TestHeartbeatBatch: one commit extends every lease that holds and
// updates its Deadline; a stale, forged or repeated lease gets
// ErrLeaseLost in its place and keeps its Deadline; bad input (a lease of
// another queue among them) changes nothing.
func TestHeartbeatBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	q := e.q("q")
	for range 4 {
		e.enqueue(q, Task{})
	}
	e.enqueue(e.q("other"), Task{})
	ls := e.claim(q, 4)
	foreign, _ := e.db.Queue(ns, "other").Claim(ctx, "w", time.Minute, 1)
	e.clock.Advance(10 * time.Second)
	stale := ls[2]
	stale.Token = 99
	forged := Lease{ID: ls[3].ID, Token: ls[3].Token}
	a, b, a2 := ls[0], ls[1], ls[0]
	batch := []*Lease{&a, &stale, &b, &a2, &forged}
	old := []time.Time{a.Deadline, stale.Deadline, b.Deadline, a2.Deadline, forged.Deadline}
	commits := e.db.Stats().Commits
	errs, err := q.HeartbeatBatch(ctx, batch, time.Hour)
	if err != nil || len(errs) != len(batch) {
		t.Fatalf("%v %v", errs, err)
	}
	if d := e.db.Stats().Commits - commits; d != 1 {
		t.Fatalf("%d commits, want 1", d)
	}
	want := t0.Add(10*time.Second + time.Hour)
	for i, l := range batch {
		ok := i == 0 || i == 2
		switch {
		case ok && (errs[i] != nil || !l.Deadline.Equal(want)):
			t.Errorf("lease %d: %v, deadline %v, want %v", i, errs[i], l.Deadline, want)
		case !ok && (!errors.Is(errs[i], ErrLeaseLost) || !l.Deadline.Equal(old[i])):
			t.Errorf("lease %d: %v, deadline %v, want ErrLeaseLost and %v", i, errs[i], l.Deadline, old[i])
		}
	}
	for _, id := range []uint64{a.ID, b.ID} {
		if info := e.get(q, id); !info.LeaseUntil.Equal(want) {
			t.Fatalf("task %d leased until %v", id, info.LeaseUntil)
		}
	}
	if info := e.get(q, ls[2].ID); !info.LeaseUntil.Equal(ls[2].Deadline) {
		t.Fatalf("a refused lease was extended: %v", info.LeaseUntil)
	}
	// The extended leases hold past their first deadline.
	e.clock.Advance(time.Minute)
	if _, err := q.Complete(ctx, a, Done{}); err != nil {
		t.Fatal(err)
	}

	before := dump(e.db)
	commits = e.db.Stats().Commits
	for name, call := range map[string]func() error{
		"nil lease":    func() error { return errOnly(q.HeartbeatBatch(ctx, []*Lease{&b, nil}, time.Hour)) },
		"no extension": func() error { return errOnly(q.HeartbeatBatch(ctx, []*Lease{&b}, 0)) },
		"negative":     func() error { return errOnly(q.HeartbeatBatch(ctx, []*Lease{&b}, -time.Second)) },
		"too many":     func() error { return errOnly(q.HeartbeatBatch(ctx, make([]*Lease, MaxBatch+1), time.Hour)) },
		"another queue's lease": func() error {
			return errOnly(q.HeartbeatBatch(ctx, []*Lease{&b, &foreign[0]}, time.Hour))
		},
	} {
		if err := call(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	wantErr(t, errOnly(e.db.As(Caller{ID: "c"}).Queue(ns, "q").HeartbeatBatch(ctx, []*Lease{&b}, time.Hour)), ErrPermission)
	// Every lease refused: nothing to commit.
	errs, err = q.HeartbeatBatch(ctx, []*Lease{&stale, &forged}, time.Hour)
	if err != nil || !errors.Is(errs[0], ErrLeaseLost) || !errors.Is(errs[1], ErrLeaseLost) {
		t.Fatalf("%v %v", errs, err)
	}
	if errs, err := q.HeartbeatBatch(ctx, nil, time.Hour); err != nil || len(errs) != 0 {
		t.Fatalf("empty batch: %v %v", errs, err)
	}
	if dump(e.db) != before || e.db.Stats().Commits != commits {
		t.Fatal("refused heartbeats changed the state")
	}
	e.reopen()
}

// TestCompleteAndClaimWithinControls: the claim half of CompleteAndClaim
// obeys the queue's controls as Claim does, while the completion always
// commits: a paused queue leases nothing; an in-flight bound leases at
// most the room left once the completed task has left flight; a rate
// limit leases at most the bucket's tokens and takes them
// (TestReplicatedControlsMatchStandalone has a replicated DB plan the
// same).
func TestCompleteAndClaimWithinControls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.SnapshotBytes = -1 })
	q := e.q("q")
	for range 8 {
		e.enqueue(q, Task{})
	}
	ls := e.claim(q, 2)
	mustDo(t, q.Pause(ctx))
	res, next, err := q.CompleteAndClaim(ctx, ls[0], Done{}, "w", time.Minute, 5)
	if err != nil || len(next) != 0 || res.Version == 0 {
		t.Fatalf("on a paused queue: %+v %v %v, want the completion alone", res, ids(next), err)
	}
	if c := counts(t, q); c != (Counts{Ready: 6, InFlight: 1}) {
		t.Fatalf("counts after completing on a paused queue: %+v", c)
	}
	mustDo(t, q.Resume(ctx))

	// At the bound of 2 (ls[1] and the next lease in flight), a completion
	// frees its slot for the claim, and only that one.
	mustDo(t, q.SetLimits(ctx, Limits{MaxInFlight: 2}))
	a := e.claim(q, 5)
	if len(a) != 1 {
		t.Fatalf("claimed %d under a bound of 2 with one in flight", len(a))
	}
	_, next, err = q.CompleteAndClaim(ctx, a[0], Done{}, "w", time.Minute, 5)
	if err != nil || len(next) != 1 {
		t.Fatalf("at the bound: %v %v, want the freed slot's one task", ids(next), err)
	}
	if c := counts(t, q); c.InFlight != 2 {
		t.Fatalf("%d in flight past a bound of 2", c.InFlight)
	}
	// A lowered bound leaves no room even after the completion.
	mustDo(t, q.SetLimits(ctx, Limits{MaxInFlight: 1}))
	_, more, err := q.CompleteAndClaim(ctx, next[0], Done{}, "w", time.Minute, 5)
	if err != nil || len(more) != 0 {
		t.Fatalf("over a lowered bound: %v %v", ids(more), err)
	}

	// A new rate limit starts with a full bucket of one token.
	mustDo(t, q.SetLimits(ctx, Limits{Rate: 1, Per: time.Minute, Burst: 1}))
	_, next, err = q.CompleteAndClaim(ctx, ls[1], Done{}, "w", time.Minute, 5)
	if err != nil || len(next) != 1 {
		t.Fatalf("with one token: %v %v", ids(next), err)
	}
	_, more, err = q.CompleteAndClaim(ctx, next[0], Done{}, "w", time.Minute, 5)
	if err != nil || len(more) != 0 {
		t.Fatalf("with the bucket empty: %v %v", ids(more), err)
	}
	if ls := e.claim(q, 5); len(ls) != 0 {
		t.Fatalf("the claim half took no token: Claim leased %v", ids(ls))
	}
	e.clock.Advance(time.Minute)
	if ls := e.claim(q, 5); len(ls) != 1 {
		t.Fatalf("a minute later: %v", ids(ls))
	}
	e.reopen()
	if c := counts(t, q); c != (Counts{Ready: 2, InFlight: 1}) {
		t.Fatalf("counts after a reopen: %+v", c)
	}
}
