//go:build linux

package fuzz

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

// These tests check the model on its own, against rules written out by
// hand, so that the fuzzers compare the engine with something trustworthy.

var mq = QueueKey{nsProd, "q"}

func newTestModel(c Config) *Model { return NewModel(c, t0) }

func mustEnqueue(t *testing.T, m *Model, q QueueKey, ts ...engine.Task) []engine.Enqueued {
	t.Helper()
	res, err := m.Enqueue(q, ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func mustClaim(t *testing.T, m *Model, owner string, lease time.Duration, max int) []engine.Lease {
	t.Helper()
	ls, err := m.Claim(mq, owner, lease, max)
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

func leaseIDs(ls []engine.Lease) []uint64 {
	var out []uint64
	for _, l := range ls {
		out = append(out, l.ID)
	}
	return out
}

func advance(m *Model, d time.Duration) { m.Now += d.Microseconds() }

func get(t *testing.T, m *Model, id uint64) Rec {
	t.Helper()
	r, err := m.Get(mq, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestModelBackoff(t *testing.T) {
	for _, c := range []struct {
		base, max int64
		att       int
		want      int64
	}{
		{1, 100, 0, 1}, {1, 100, 1, 1}, {1, 100, 2, 2}, {1, 100, 7, 64}, {1, 100, 8, 100}, {1, 100, 1000, 100},
		{1e6, 60e6, 1, 1e6}, {1e6, 60e6, 3, 4e6}, {1e6, 60e6, 40, 60e6}, {5, 3, 1, 3},
		{int64(engine.MaxDuration / time.Microsecond), int64(engine.MaxDuration / time.Microsecond), 1 << 20, int64(engine.MaxDuration / time.Microsecond)},
	} {
		if got := Backoff(c.base, c.max, c.att); got != c.want {
			t.Errorf("Backoff(%d, %d, %d) = %d, want %d", c.base, c.max, c.att, got, c.want)
		}
	}
}

func TestModelIDsAndOrder(t *testing.T) {
	m := newTestModel(Config{})
	low := mustEnqueue(t, m, mq, engine.Task{Priority: 1})[0].ID
	high := mustEnqueue(t, m, mq, engine.Task{Priority: 9})[0].ID
	other := mustEnqueue(t, m, QueueKey{nsDev, "q"}, engine.Task{Priority: 100})[0].ID
	low2 := mustEnqueue(t, m, mq, engine.Task{Priority: 1})[0].ID
	timer := mustEnqueue(t, m, mq, engine.Task{Priority: 5, Delay: time.Second})[0].ID
	if !slices.Equal([]uint64{low, high, other, low2, timer}, []uint64{1, 2, 3, 4, 5}) {
		t.Fatalf("ids are global and increasing from 1: %d %d %d %d %d", low, high, other, low2, timer)
	}
	if got := leaseIDs(mustClaim(t, m, "w", time.Minute, 10)); !slices.Equal(got, []uint64{high, low, low2}) {
		t.Fatalf("claim order %v", got)
	}
	advance(m, time.Second)
	enq := mustEnqueue(t, m, mq, engine.Task{Priority: 1})[0].ID
	if got := leaseIDs(mustClaim(t, m, "w", time.Minute, 1)); !slices.Equal(got, []uint64{timer}) {
		t.Fatalf("a due timer is served by priority: %v", got)
	}
	if got := leaseIDs(mustClaim(t, m, "w", time.Minute, 5)); !slices.Equal(got, []uint64{enq}) {
		t.Fatalf("then %v", got)
	}
}

func TestModelClaimPromotesEveryDueTimer(t *testing.T) {
	m := newTestModel(Config{})
	for range 5 {
		mustEnqueue(t, m, mq, engine.Task{Delay: time.Second})
	}
	advance(m, time.Second)
	mustClaim(t, m, "w", time.Minute, 1)
	if c := m.Counts(mq); c != (engine.Counts{Ready: 4, InFlight: 1}) {
		t.Fatalf("counts %+v", c)
	}
	// A promoted timer keeps its not-before and updated time.
	for _, r := range m.List(mq, engine.Ready) {
		if r.NotBefore != t0.Add(time.Second).UnixMicro() || r.Updated != t0.UnixMicro() {
			t.Fatalf("promoted timer changed: %s", r.String())
		}
	}
}

func TestModelReclaim(t *testing.T) {
	m := newTestModel(Config{})
	retry := mustEnqueue(t, m, mq, engine.Task{MaxAttempts: 3})[0].ID
	spent := mustEnqueue(t, m, mq, engine.Task{MaxAttempts: 1})[0].ID
	waiting := mustEnqueue(t, m, mq, engine.Task{MaxAttempts: 3, Priority: -1})[0].ID
	first := mustClaim(t, m, "a", 30*time.Second, 3)
	if len(first) != 3 || first[0].Token != 1 || first[0].Attempt != 1 {
		t.Fatalf("first claim %+v", first)
	}
	advance(m, 30*time.Second) // deadline reached: expired
	ls := mustClaim(t, m, "b", time.Minute, 1)
	if len(ls) != 1 || ls[0].ID != retry || ls[0].Token != 2 || ls[0].Attempt != 2 || ls[0].Owner != "b" {
		t.Fatalf("reclaimed and re-leased: %+v", ls)
	}
	if r := get(t, m, retry); r.LastError != "lease expired" {
		t.Fatalf("re-leased task: %s", r.String())
	}
	if r := get(t, m, spent); r.State != engine.Dead || r.LastError != "lease expired; attempts exhausted" ||
		r.Attempts != 1 || r.Owner != "" || r.LeaseUntil != 0 || r.Token != 1 {
		t.Fatalf("spent task: %s", r.String())
	}
	// Not taken: ready since its deadline, no backoff, attempt kept.
	if r := get(t, m, waiting); r.State != engine.Ready || r.NotBefore != first[2].Deadline.UnixMicro() || r.Attempts != 1 ||
		r.LastError != "lease expired" || r.Owner != "" || r.Token != 1 {
		t.Fatalf("reclaimed, not taken: %s", r.String())
	}
	if err := m.Complete(mq, first[0], nil, nil, nil); !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("zombie complete: %v", err)
	}
}

func TestModelFencing(t *testing.T) {
	m := newTestModel(Config{})
	mustEnqueue(t, m, mq, engine.Task{})
	l := mustClaim(t, m, "a", time.Minute, 1)[0]
	before := m.View([]QueueKey{mq}, allNS).String()
	forged := l
	forged.Token++
	for name, err := range map[string]error{
		"forged token":                  m.Complete(mq, forged, nil, nil, nil),
		"bare lease on the wrong queue": m.Fail(QueueKey{nsProd, "other"}, engine.Lease{ID: l.ID, Token: l.Token, Secret: l.Secret}, engine.Failure{}),
		"forged snooze":                 m.Snooze(mq, forged, 0),
	} {
		if !errors.Is(err, engine.ErrLeaseLost) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := m.Fail(QueueKey{nsProd, "other"}, l, engine.Failure{}); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("a lease presented to another queue: %v, want ErrInvalid", err)
	}
	if _, err := m.Heartbeat(mq, forged, time.Second, nil); !errors.Is(err, engine.ErrLeaseLost) {
		t.Errorf("forged heartbeat: %v", err)
	}
	if after := m.View([]QueueKey{mq}, allNS).String(); after != before {
		t.Fatalf("a refused call changed the state")
	}
	// The owner name does not fence, the token does.
	other := l
	other.Owner = "someone else"
	if err := m.Complete(mq, other, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestModelFail(t *testing.T) {
	m := newTestModel(Config{})
	id := mustEnqueue(t, m, mq, engine.Task{MaxAttempts: 3, BackoffBase: 2 * time.Second, BackoffMax: 5 * time.Second})[0].ID
	for i, wait := range []time.Duration{2 * time.Second, 4 * time.Second} {
		l := mustClaim(t, m, "w", time.Minute, 1)[0]
		if err := m.Fail(mq, l, engine.Failure{Err: "boom"}); err != nil {
			t.Fatal(err)
		}
		r := get(t, m, id)
		if r.State != engine.Scheduled || r.NotBefore != m.Now+wait.Microseconds() || r.Attempts != i+1 || r.LastError != "boom" {
			t.Fatalf("retry %d: %s", i, r.String())
		}
		advance(m, wait)
	}
	l := mustClaim(t, m, "w", time.Minute, 1)[0]
	if err := m.Fail(mq, l, engine.Failure{Err: "last", RetryAfter: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if r := get(t, m, id); r.State != engine.Dead || r.LastError != "last" || r.Attempts != 3 {
		t.Fatalf("attempts spent: %s", r.String())
	}
	id2 := mustEnqueue(t, m, mq, engine.Task{})[0].ID
	l = mustClaim(t, m, "w", time.Minute, 1)[0]
	if err := m.Fail(mq, l, engine.Failure{Err: "x", RetryAfter: 7 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if r := get(t, m, id2); r.State != engine.Scheduled || r.NotBefore != m.Now+7e6 {
		t.Fatalf("retry after: %s", r.String())
	}
	advance(m, 7*time.Second)
	l = mustClaim(t, m, "w", time.Minute, 1)[0]
	if err := m.Fail(mq, l, engine.Failure{Permanent: true}); err != nil {
		t.Fatal(err)
	}
	if r := get(t, m, id2); r.State != engine.Dead || r.Attempts != 2 || r.LastError != "" {
		t.Fatalf("permanent: %s", r.String())
	}
	if err := m.Redrive(mq, id2); err != nil {
		t.Fatal(err)
	}
	if r := get(t, m, id2); r.State != engine.Ready || r.Attempts != 0 || r.Token != 2 {
		t.Fatalf("redriven: %s", r.String())
	}
	if err := m.Redrive(mq, id2); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("redrive of a ready task: %v", err)
	}
	if n, err := m.RedriveAll(mq); err != nil || n != 1 {
		t.Fatalf("redrive all: %d %v", n, err)
	}
}

func TestModelSnoozeAndHeartbeat(t *testing.T) {
	m := newTestModel(Config{})
	id := mustEnqueue(t, m, mq, engine.Task{})[0].ID
	l := mustClaim(t, m, "w", time.Minute, 1)[0]
	dl, err := m.Heartbeat(mq, l, time.Hour, []byte(`{"p":1}`))
	if err != nil || dl.UnixMicro() != m.Now+time.Hour.Microseconds() {
		t.Fatalf("heartbeat: %v %v", dl, err)
	}
	if _, err := m.Heartbeat(mq, l, time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	if r := get(t, m, id); string(r.Progress) != `{"p":1}` {
		t.Fatalf("nil progress must keep the old one: %s", r.String())
	}
	if err := m.Snooze(mq, l, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if r := get(t, m, id); r.State != engine.Scheduled || r.Attempts != 0 || r.Token != 1 || r.NotBefore != m.Now+3e6 {
		t.Fatalf("snoozed: %s", r.String())
	}
}

func TestModelIdempotency(t *testing.T) {
	m := newTestModel(Config{IdempotencyTTL: time.Minute})
	res := mustEnqueue(t, m, mq, engine.Task{IdempotencyKey: "k"}, engine.Task{IdempotencyKey: "k"})
	if res[0].Deduplicated || !res[1].Deduplicated || res[1].ID != res[0].ID {
		t.Fatalf("within a batch: %+v", res)
	}
	if r := mustEnqueue(t, m, QueueKey{nsProd, "other"}, engine.Task{IdempotencyKey: "k"}); r[0].Deduplicated {
		t.Fatal("keys are per queue")
	}
	l := mustClaim(t, m, "w", time.Minute, 1)[0]
	if err := m.Complete(mq, l, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	advance(m, time.Minute-time.Microsecond)
	if r := mustEnqueue(t, m, mq, engine.Task{IdempotencyKey: "k"}); !r[0].Deduplicated || r[0].ID != res[0].ID {
		t.Fatalf("remembered within the TTL: %+v", r)
	}
	advance(m, time.Microsecond)
	seq := m.Seq
	if r := mustEnqueue(t, m, mq, engine.Task{IdempotencyKey: "k"}); r[0].Deduplicated {
		t.Fatalf("forgotten at the TTL: %+v", r)
	}
	if m.Seq != seq+2 {
		t.Fatalf("the expired key is pruned in a housekeeping batch of its own: seq %d -> %d", seq, m.Seq)
	}

	m = newTestModel(Config{IdempotencyTTL: -1})
	id := mustEnqueue(t, m, mq, engine.Task{IdempotencyKey: "k"})[0].ID
	if err := m.Cancel(mq, id); err != nil {
		t.Fatal(err)
	}
	if r := mustEnqueue(t, m, mq, engine.Task{IdempotencyKey: "k"}); r[0].Deduplicated {
		t.Fatal("a negative TTL forgets the key when the task ends")
	}
}

func TestModelSeqAndVersions(t *testing.T) {
	m := newTestModel(Config{})
	res, err := m.Commit(nsProd, []TxOp{{Kind: TxSet, Key: "a", Value: []byte("1")}, {Kind: TxDelete, Key: "absent"}})
	if err != nil || res.Version != 1 || m.Seq != 1 {
		t.Fatalf("first commit: %+v %v seq %d", res, err, m.Seq)
	}
	if e, _ := m.KVGet(nsProd, "a"); e.Version != 1 {
		t.Fatalf("version is the batch: %+v", e)
	}
	res, err = m.Commit(nsProd, []TxOp{{Kind: TxIfVersion, Key: "a", Version: 1}})
	if err != nil || res.Version != 1 || m.Seq != 1 {
		t.Fatalf("an assertion-only commit writes no batch: %+v %v", res, err)
	}
	if _, err := m.Commit(nsProd, []TxOp{{Kind: TxDelete, Key: "b"}}); err != nil || m.Seq != 2 {
		t.Fatalf("deleting an absent key is still a batch: %v seq %d", err, m.Seq)
	}
	// A failed assertion applies nothing and uses no id.
	_, err = m.Enqueue(mq, []engine.Task{{}}, []TxOp{{Kind: TxSet, Key: "c"}, {Kind: TxIfAbsent, Key: "a"}})
	if !errors.Is(err, engine.ErrConflict) || m.Seq != 2 || m.NextID != 1 {
		t.Fatalf("outbox conflict: %v seq %d next %d", err, m.Seq, m.NextID)
	}
	if _, err := m.KVGet(nsProd, "c"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatal("a refused commit wrote")
	}
	if _, err := m.Commit(nsProd, nil); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("empty commit: %v", err)
	}
}

func TestModelRetention(t *testing.T) {
	m := newTestModel(Config{RetainCompleted: time.Hour})
	id := mustEnqueue(t, m, mq, engine.Task{})[0].ID
	l := mustClaim(t, m, "w", time.Minute, 1)[0]
	if err := m.Complete(mq, l, []byte(`{"ok":1}`), nil, nil); err != nil {
		t.Fatal(err)
	}
	if r := get(t, m, id); r.State != engine.Completed || string(r.Result) != `{"ok":1}` || r.Owner != "" {
		t.Fatalf("completed: %s", r.String())
	}
	advance(m, time.Hour-time.Microsecond)
	if _, err := m.Get(mq, id); err != nil {
		t.Fatal("a retained task is kept for its time")
	}
	advance(m, time.Microsecond)
	seq := m.Seq
	if _, err := m.Get(mq, id); !errors.Is(err, engine.ErrNotFound) || m.Counts(mq) != (engine.Counts{}) || m.Seq != seq {
		t.Fatal("reads see a retained task gone when its time is up, without a commit")
	}
	if _, err := m.Claim(mq, "w", time.Second, 1); err != nil || m.Seq != seq+1 {
		t.Fatalf("the next commit deletes it in a batch of its own: %v, seq %d", err, m.Seq)
	}
}

// TestModelReadsSeeTimePass: reads report the state at Now (a due timer
// ready, an expired lease ready or dead) and commit nothing; claims and
// redrives store what reads showed.
func TestModelReadsSeeTimePass(t *testing.T) {
	m := newTestModel(Config{})
	timer := mustEnqueue(t, m, mq, engine.Task{Delay: time.Second})[0].ID
	retry := mustEnqueue(t, m, mq, engine.Task{MaxAttempts: 2, Priority: -1})[0].ID
	last := mustEnqueue(t, m, mq, engine.Task{MaxAttempts: 1, Priority: -2})[0].ID
	ls := mustClaim(t, m, "w", 10*time.Second, 2)
	if !slices.Equal(leaseIDs(ls), []uint64{retry, last}) {
		t.Fatalf("claimed %v", leaseIDs(ls))
	}
	seq := m.Seq
	advance(m, 10*time.Second)
	if c := m.Counts(mq); c != (engine.Counts{Ready: 2, Dead: 1}) || m.Seq != seq {
		t.Fatalf("counts %+v at seq %d", c, m.Seq)
	}
	deadline := ls[0].Deadline.UnixMicro()
	if r := get(t, m, timer); r.State != engine.Ready {
		t.Fatalf("due timer: %s", r.String())
	}
	want := []AttemptErr{{Attempt: 1, At: deadline, Error: "lease expired"}}
	if r := get(t, m, retry); r.State != engine.Ready || r.NotBefore != deadline || r.Updated != deadline ||
		r.Owner != "" || !slices.Equal(r.Errors, want) {
		t.Fatalf("expired lease: %s", r.String())
	}
	want[0].Error = "lease expired; attempts exhausted"
	dead := get(t, m, last)
	if dead.State != engine.Dead || !slices.Equal(dead.Errors, want) {
		t.Fatalf("expired last lease: %s", dead.String())
	}
	if err := m.Complete(mq, ls[0], nil, nil, nil); !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("a lease past its deadline completed: %v", err)
	}
	// A claim of one dead-letters the spent lease and takes the timer
	// (priority 0 before -1); what it leaves is as reads showed it.
	before := get(t, m, retry)
	if got := leaseIDs(mustClaim(t, m, "w", time.Minute, 1)); !slices.Equal(got, []uint64{timer}) {
		t.Fatalf("claimed %v", got)
	}
	if r := get(t, m, retry); r.String() != before.String() {
		t.Fatalf("a task the claim did not take changed: %s", r.String())
	}
	if r := get(t, m, last); r.String() != dead.String() {
		t.Fatalf("dead-lettering changed the record reads showed: %s", r.String())
	}
	if q := m.Queues([]QueueKey{mq})[0]; q.Totals != (engine.Totals{Enqueued: 3, Claimed: 3, DeadLettered: 1}) {
		t.Fatalf("totals %+v", q.Totals)
	}
}

// TestModelHistoryAndLinks: every failed attempt is remembered (the oldest
// dropped beyond the bound), a follow-up names its parent, and a kept
// completion lists the follow-ups it enqueued.
func TestModelHistoryAndLinks(t *testing.T) {
	m := newTestModel(Config{RetainCompleted: time.Hour})
	id := mustEnqueue(t, m, mq, engine.Task{MaxAttempts: 100, BackoffBase: time.Microsecond, BackoffMax: time.Microsecond})[0].ID
	for i := range engine.MaxAttemptErrors + 3 {
		advance(m, time.Second)
		l := mustClaim(t, m, "w", time.Minute, 1)[0]
		if err := m.Fail(mq, l, engine.Failure{Err: "e" + string(rune('a'+i))}); err != nil {
			t.Fatal(err)
		}
	}
	r := get(t, m, id)
	if len(r.Errors) != engine.MaxAttemptErrors || r.Errors[0].Attempt != 4 || r.Errors[0].Error != "ed" ||
		r.Errors[len(r.Errors)-1].Attempt != engine.MaxAttemptErrors+3 {
		t.Fatalf("history %v", r.Errors)
	}
	advance(m, time.Second)
	l := mustClaim(t, m, "w", time.Minute, 1)[0]
	err := m.Complete(mq, l, nil, []TxOp{{Kind: TxEnqueue, Queue: "q", Task: engine.Task{IdempotencyKey: "k"}}},
		[]engine.FollowUp{{Queue: "q", Task: engine.Task{}}, {Queue: "q", Task: engine.Task{IdempotencyKey: "k"}}})
	if err != nil {
		t.Fatal(err)
	}
	done := get(t, m, id)
	if done.State != engine.Completed || !slices.Equal(done.FollowUps, []uint64{id + 1, id + 2}) {
		t.Fatalf("completed: %s", done.String())
	}
	for _, f := range done.FollowUps {
		if r := get(t, m, f); r.Parent != id {
			t.Fatalf("follow-up %s", r.String())
		}
	}
}

func TestModelCompleteAllOrNothing(t *testing.T) {
	m := newTestModel(Config{})
	mustEnqueue(t, m, mq, engine.Task{})
	l := mustClaim(t, m, "w", time.Minute, 1)[0]
	ops := []TxOp{{Kind: TxSet, Key: "k"}, {Kind: TxIfExists, Key: "k"}}
	follow := []engine.FollowUp{{Queue: "next", Task: engine.Task{}}}
	if err := m.Complete(mq, l, nil, ops, follow); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("assertions see the state before the commit: %v", err)
	}
	if m.Counts(mq).InFlight != 1 || m.NextID != 2 {
		t.Fatal("a refused completion changed something")
	}
	if err := m.Complete(mq, l, nil, ops[:1], follow); err != nil {
		t.Fatal(err)
	}
	if m.Len() != 1 || m.Counts(QueueKey{nsProd, "next"}).Ready != 1 {
		t.Fatalf("follow-up: %d tasks", m.Len())
	}
}

func TestModelClone(t *testing.T) {
	m := newTestModel(Config{})
	mustEnqueue(t, m, mq, engine.Task{})
	c := m.Clone()
	mustClaim(t, m, "w", time.Minute, 1)
	if c.Counts(mq).Ready != 1 || m.Counts(mq).InFlight != 1 {
		t.Fatal("a clone shares state with its original")
	}
}

// TestModelDependencies: a task waits for its parents and is released by
// the last completion; a death cancels, keeps waiting or runs its
// dependents by their policy, in cascade; unknown ids are invalid, dead
// parents of a cancelling dependent a conflict; the housekeeping batch
// stores the death of an expired parent.
func TestModelDependencies(t *testing.T) {
	m := newTestModel(Config{})
	res := mustEnqueue(t, m, mq, engine.Task{MaxAttempts: 1}, engine.Task{})
	p1, p2 := res[0].ID, res[1].ID
	kids := mustEnqueue(t, m, mq,
		engine.Task{DependsOn: []uint64{p1, p2}},
		engine.Task{DependsOnSibling: []int{0}},
		engine.Task{DependsOn: []uint64{p1}, OnParentFailure: engine.WaitOnFailure},
		engine.Task{DependsOnSibling: []int{0}, OnParentFailure: engine.RunOnFailure, Delay: time.Hour})
	c, gc, w, run := kids[0].ID, kids[1].ID, kids[2].ID, kids[3].ID
	if r := get(t, m, c); r.State != engine.Waiting || !slices.Equal(r.WaitingOn, []uint64{p1, p2}) {
		t.Fatalf("waiting: %s", r.String())
	}
	if r := get(t, m, p1); !slices.Equal(r.Dependents, []uint64{c, w}) {
		t.Fatalf("dependents: %s", r.String())
	}
	if n := m.Counts(mq); n.Waiting != 4 || n.Ready != 2 {
		t.Fatalf("counts %+v", n)
	}
	if _, err := m.Enqueue(mq, []engine.Task{{DependsOn: []uint64{m.NextID}}}, nil); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("unknown id: %v", err)
	}
	if _, err := m.Enqueue(mq, []engine.Task{{DependsOnSibling: []int{0}}}, nil); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("sibling of none: %v", err)
	}
	// p1's last lease expires; the next commit's housekeeping stores its
	// death: c is cancelled, gc with it, run runs (scheduled for its
	// delay), w keeps waiting.
	mustClaim(t, m, "w", time.Second, 1)
	advance(m, 2*time.Second)
	seq := m.Seq
	if _, err := m.Commit(nsProd, []TxOp{{Kind: TxSet, Key: "k"}}); err != nil {
		t.Fatal(err)
	}
	if m.Seq != seq+2 {
		t.Fatalf("seq %d -> %d: no housekeeping batch", seq, m.Seq)
	}
	for _, id := range []uint64{c, gc} {
		if _, err := m.Get(mq, id); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("task %d survived its parent's death: %v", id, err)
		}
	}
	if r := get(t, m, run); r.State != engine.Scheduled {
		t.Fatalf("run: %s", r.String())
	}
	if r := get(t, m, w); r.State != engine.Waiting || !slices.Equal(r.WaitingOn, []uint64{p1}) {
		t.Fatalf("wait: %s", r.String())
	}
	if _, err := m.Enqueue(mq, []engine.Task{{DependsOn: []uint64{p1}}}, nil); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("a cancelling dependent of a dead task: %v", err)
	}
	if err := m.Redrive(mq, p1); err != nil {
		t.Fatal(err)
	}
	ls := mustClaim(t, m, "w", time.Minute, 1)
	if ls[0].ID != p1 {
		t.Fatalf("claimed %v", leaseIDs(ls))
	}
	if err := m.Complete(mq, ls[0], nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if r := get(t, m, w); r.State != engine.Ready || len(r.WaitingOn) != 0 {
		t.Fatalf("released: %s", r.String())
	}
	if err := m.Cancel(mq, p2); err != nil || len(m.deps) != 0 {
		t.Fatalf("cancel: %v, %d dependencies left", err, len(m.deps))
	}
}

// TestSameView: views equal but for the lease secrets are the same (and
// render alike); a difference in anything else makes them differ.
func TestSameView(t *testing.T) {
	q := QueueKey{engine.NS("acme", "prod"), "q"}
	view := func(edit func(*Rec), kv string) View {
		r := Rec{ID: 1, Queue: q, Owner: "w", Token: 2, Secret: 7, Payload: []byte(`"p"`), Headers: map[string]string{"h": "v"}}
		if edit != nil {
			edit(&r)
		}
		per := make([][]Rec, len(States))
		per[1] = []Rec{r}
		return View{Seq: 3, Tasks: map[QueueKey][][]Rec{q: per},
			KV: map[engine.Namespace][]engine.Entry{q.NS: {{Key: "k", Value: []byte(kv), Version: 1}}}}
	}
	base := view(nil, "1")
	other := view(func(r *Rec) { r.Secret = 9 }, "1")
	if !sameView(base, other) || base.String() != other.String() {
		t.Fatal("views differing only in a lease secret differ")
	}
	for name, v := range map[string]View{
		"owner":   view(func(r *Rec) { r.Owner = "x" }, "1"),
		"payload": view(func(r *Rec) { r.Payload = []byte(`"q"`) }, "1"),
		"headers": view(func(r *Rec) { r.Headers["h"] = "w" }, "1"),
		"kv":      view(nil, "2"),
		"seq":     func() View { v := view(nil, "1"); v.Seq++; return v }(),
		"tasks":   func() View { v := view(nil, "1"); v.Tasks[q][1] = nil; return v }(),
	} {
		if sameView(base, v) || base.String() == v.String() {
			t.Errorf("views differing in %s are the same", name)
		}
	}
}
