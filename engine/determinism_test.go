package engine

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/docketdb/docket/internal/index"
)

// follower is a replica fed by a DB's tap, with the decoded batches kept.
type follower struct {
	t       *testing.T
	r       *replica
	batches []index.Batch
	err     error
}

func tapInto(f *follower) func(*Options) {
	return func(o *Options) {
		o.tap = func(seq uint64, data []byte) {
			var b index.Batch
			if err := index.NewDecoder(index.NewStore()).Batch(data, &b); err != nil && f.err == nil {
				f.err = err
			}
			f.batches = append(f.batches, b)
			if _, err := f.r.Apply(seq, bytes.Clone(data)); err != nil && f.err == nil {
				f.err = err
			}
		}
	}
}

// same requires the follower's state to equal the leader's, by hash and by
// bytes.
func (f *follower) same(db *DB, step string) {
	f.t.Helper()
	if f.err != nil {
		f.t.Fatalf("%s: follower: %v", step, f.err)
	}
	var lb, fb bytes.Buffer
	if err := db.EncodeState(&lb); err != nil {
		f.t.Fatal(err)
	}
	if err := f.r.EncodeState(&fb); err != nil {
		f.t.Fatal(err)
	}
	lh, _ := db.StateHash()
	fh, _ := f.r.StateHash()
	if lh != fh || !bytes.Equal(lb.Bytes(), fb.Bytes()) {
		f.t.Fatalf("%s: follower state differs from the leader's (seq %d vs %d)", step, f.r.Seq(), db.Stats().Seq)
	}
	if err := f.r.Verify(); err != nil {
		f.t.Fatalf("%s: follower: %v", step, err)
	}
}

// TestFollowerMatchesLeader applies every batch the DB logs to a fresh
// replica and compares the state hash and bytes after every call, across a
// workload touching every mutation kind, headers included.
func TestFollowerMatchesLeader(t *testing.T) {
	t.Parallel()
	f := &follower{t: t, r: newReplica()}
	e := newEnv(t, true, tapInto(f), func(o *Options) { o.RetainCompleted = time.Hour; o.IdempotencyTTL = time.Minute })
	q, q2 := e.q("a"), e.q("b")
	h := map[string]string{"z": "1", "y": "2", "x": "3", "w": "4", "v": "5", "u": "6"}
	steps := []struct {
		name string
		do   func() error
	}{
		{"enqueue", func() error {
			return errOnly(q.Enqueue(ctx, Task{Payload: []byte(`{}`), Headers: h, Kind: "k", IdempotencyKey: "i"}))
		}},
		{"enqueue empty", func() error { return errOnly(q.Enqueue(ctx, Task{Payload: []byte{}, Priority: 3})) }},
		{"enqueue timer", func() error { return errOnly(q2.Enqueue(ctx, Task{Delay: time.Second})) }},
		{"kv", func() error { return errOnly(e.db.KV(ns).Commit(ctx, Set("k", []byte{}), Set("j", []byte("v")))) }},
		{"claim", func() error { return errOnly(q.Claim(ctx, "w", time.Minute, 2)) }},
		{"advance", func() error { e.clock.Advance(2 * time.Minute); return nil }},
		{"reclaim", func() error { return errOnly(q.Claim(ctx, "w", time.Minute, 1)) }},
		{"promote", func() error { return errOnly(q2.Claim(ctx, "w", time.Minute, 1)) }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		f.same(e.db, s.name)
	}
	ls := e.claim(q, 5)
	for i, l := range ls {
		var err error
		switch i % 3 {
		case 0:
			_, err = q.Complete(ctx, l, Done{Result: []byte(`1`), Ops: []Op{Delete("j")}, FollowUps: []FollowUp{{Queue: "b", Task: Task{}}}})
		case 1:
			err = q.Fail(ctx, l, Failure{Err: "x"})
		case 2:
			err = q.Heartbeat(ctx, &l, time.Minute, []byte(`{"p":1}`))
		}
		if err != nil {
			t.Fatal(err)
		}
		f.same(e.db, "fenced call")
	}
	e.clock.Advance(2 * time.Hour) // expire the idempotency key and the retained completion
	e.enqueue(q2, Task{})
	f.same(e.db, "housekeeping")
	if len(f.batches) == 0 {
		t.Fatal("the tap saw nothing")
	}
}

// TestBatchNowIsThePlanTime: every logged batch carries the time its plan
// used, and that time never goes backwards though the clock does.
func TestBatchNowIsThePlanTime(t *testing.T) {
	t.Parallel()
	f := &follower{t: t, r: newReplica()}
	var sc *stepClock
	e := newEnv(t, false, tapInto(f), func(o *Options) {
		sc = &stepClock{ManualClock: o.Clock.(*ManualClock)}
		o.Clock = sc
	})
	q := e.q("q")
	e.enqueue(q, Task{})
	e.clock.Advance(time.Second)
	e.enqueue(q, Task{Delay: time.Second})
	ahead := t0.Add(time.Second).UnixMicro()
	sc.back = time.Hour // the clock steps back
	id := e.enqueue(q, Task{})
	want := []int64{t0.UnixMicro(), ahead, ahead}
	if len(f.batches) != 3 {
		t.Fatalf("%d batches", len(f.batches))
	}
	for i, b := range f.batches {
		if b.Now != want[i] {
			t.Fatalf("batch %d: now %d, want %d", i, b.Now, want[i])
		}
	}
	if info := e.get(q, id); info.CreatedAt.UnixMicro() != ahead {
		t.Fatalf("a task planned after the clock stepped back was created at %v", info.CreatedAt)
	}
	// The time survives a restart: after reopening with a clock still
	// behind, the next batch is not earlier.
	e.reopen()
	e.enqueue(q, Task{})
	if got := f.batches[len(f.batches)-1].Now; got != ahead {
		t.Fatalf("after reopen: now %d, want %d", got, ahead)
	}
}

// stepClock is a ManualClock that can be set back.
type stepClock struct {
	*ManualClock
	back time.Duration
}

func (c *stepClock) Now() time.Time { return c.ManualClock.Now().Add(-c.back) }

// TestRefusedCallInternsNothing: planning changes nothing, so a refused
// enqueue on a new queue leaves no queue behind.
func TestRefusedCallInternsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	for i := range 50 {
		q := e.db.Queue(ns, "new"+string(rune('a'+i%26))+string(rune('a'+i/26)))
		_, err := q.Enqueue(ctx, Task{}, IfExists("missing"))
		wantErr(t, err, ErrConflict)
	}
	n := 0
	e.db.c.store.Queues(func(*index.Queue) bool { n++; return true })
	if n != 0 {
		t.Fatalf("%d queues left by refused enqueues", n)
	}
	if err := e.db.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestForgedSecretRefused: a lease with the right id and token but not the
// secret is refused by every fenced call and changes nothing; the secret
// survives a restart through the log and through a snapshot.
func TestForgedSecretRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.SnapshotBytes = -1 })
	q := e.q("q")
	e.enqueue(q, Task{})
	e.enqueue(q, Task{})
	ls := e.claim(q, 2)
	if ls[0].Secret == 0 || ls[0].Secret == ls[1].Secret {
		t.Fatalf("secrets %d %d", ls[0].Secret, ls[1].Secret)
	}
	forge := func(l Lease) Lease {
		return Lease{ID: l.ID, Namespace: l.Namespace, Queue: l.Queue, Owner: l.Owner, Token: l.Token}
	}
	check := func(l Lease) {
		t.Helper()
		before, _ := e.db.StateHash()
		bad := forge(l)
		bad2 := bad
		calls := map[string]error{
			"complete":  errOnly(q.Complete(ctx, bad, Done{Ops: []Op{Set("k", nil)}})),
			"fail":      q.Fail(ctx, bad, Failure{Err: "x"}),
			"heartbeat": q.Heartbeat(ctx, &bad2, time.Hour, nil),
			"snooze":    q.Snooze(ctx, bad, time.Hour),
		}
		errs, err := q.CompleteBatch(ctx, []Lease{bad})
		if err != nil || len(errs) != 1 {
			t.Fatalf("complete batch: %v %v", errs, err)
		}
		calls["complete batch"] = errs[0]
		_, next, err := q.CompleteAndClaim(ctx, bad, Done{}, "w", time.Minute, 1)
		if len(next) != 0 {
			t.Fatalf("complete and claim with a forged secret claimed %v", next)
		}
		calls["complete and claim"] = err
		errs, err = q.HeartbeatBatch(ctx, []*Lease{&bad2}, time.Hour)
		if err != nil || len(errs) != 1 {
			t.Fatalf("heartbeat batch: %v %v", errs, err)
		}
		calls["heartbeat batch"] = errs[0]
		for name, err := range calls {
			if !errors.Is(err, ErrLeaseLost) {
				t.Errorf("%s with a forged secret: %v", name, err)
			}
		}
		if after, _ := e.db.StateHash(); after != before {
			t.Fatal("a forged lease changed the state")
		}
	}
	check(ls[0])
	e.crash() // recover from the log
	e.open()
	check(ls[0])
	if err := q.Heartbeat(ctx, &ls[0], time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	check(ls[0])
	e.reopen() // Close writes a snapshot: recover from it
	check(ls[1])
	if _, err := q.Complete(ctx, ls[1], Done{}); err != nil {
		t.Fatalf("the real lease after restarts: %v", err)
	}
}
