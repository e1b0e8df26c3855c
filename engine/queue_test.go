package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine/internal/machine"
)

func TestEnqueueOptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("emails")
	cases := []struct {
		name  string
		task  Task
		state State
		check func(t *testing.T, info TaskInfo)
	}{
		{"defaults", Task{Payload: []byte(`{"to":"a@b"}`)}, Ready, func(t *testing.T, i TaskInfo) {
			if i.MaxAttempts != 5 || i.BackoffBase != time.Second || i.BackoffMax != time.Minute || i.Priority != 0 {
				t.Fatalf("defaults not applied: %+v", i)
			}
			if string(i.Payload) != `{"to":"a@b"}` || !i.NotBefore.Equal(t0) || !i.CreatedAt.Equal(t0) {
				t.Fatalf("fields: %+v", i)
			}
		}},
		{"empty payload", Task{}, Ready, func(t *testing.T, i TaskInfo) {
			if len(i.Payload) != 0 {
				t.Fatalf("payload %q", i.Payload)
			}
		}},
		{"delay", Task{Delay: time.Minute}, Scheduled, func(t *testing.T, i TaskInfo) {
			if !i.NotBefore.Equal(t0.Add(time.Minute)) {
				t.Fatalf("not before %v", i.NotBefore)
			}
		}},
		{"at in the future", Task{At: t0.Add(time.Hour), Delay: time.Minute}, Scheduled, func(t *testing.T, i TaskInfo) {
			if !i.NotBefore.Equal(t0.Add(time.Hour)) {
				t.Fatalf("not before %v", i.NotBefore)
			}
		}},
		{"at in the past", Task{At: t0.Add(-time.Hour)}, Ready, nil},
		{"priority and budget", Task{Priority: -7, MaxAttempts: 2, BackoffBase: time.Millisecond, BackoffMax: time.Second},
			Ready, func(t *testing.T, i TaskInfo) {
				if i.Priority != -7 || i.MaxAttempts != 2 || i.BackoffBase != time.Millisecond || i.BackoffMax != time.Second {
					t.Fatalf("fields: %+v", i)
				}
			}},
		{"kind, headers, key", Task{Kind: "send", Headers: map[string]string{"trace": "x"}, IdempotencyKey: "k1"},
			Ready, func(t *testing.T, i TaskInfo) {
				if i.Kind != "send" || i.Headers["trace"] != "x" || i.IdempotencyKey != "k1" {
					t.Fatalf("fields: %+v", i)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := e.enqueue(q, tc.task)
			info := e.get(q, id)
			if info.State != tc.state {
				t.Fatalf("state %v, want %v", info.State, tc.state)
			}
			if tc.check != nil {
				tc.check(t, info)
			}
		})
	}
}

func TestEnqueueCopiesInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	buf := []byte(`{"a":1}`)
	id := e.enqueue(q, Task{Payload: buf})
	copy(buf, `{"b":2}`)
	if got := e.get(q, id).Payload; string(got) != `{"a":1}` {
		t.Fatalf("payload aliased the caller's buffer: %q", got)
	}
}

func TestPriorityThenFIFO(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	var want []uint64
	low1 := e.enqueue(q, Task{Priority: 1})
	high1 := e.enqueue(q, Task{Priority: 9})
	low2 := e.enqueue(q, Task{Priority: 1})
	high2 := e.enqueue(q, Task{Priority: 9})
	neg := e.enqueue(q, Task{Priority: -3})
	want = []uint64{high1, high2, low1, low2, neg}
	var got []uint64
	for range 5 {
		got = append(got, ids(e.claim(q, 1))...)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("claim order %v, want %v", got, want)
	}
	if ls := e.claim(q, 1); len(ls) != 0 {
		t.Fatalf("claimed from an empty queue: %v", ids(ls))
	}
}

func TestClaimBatchReturnsLeaseFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	for i := range 5 {
		e.enqueue(q, Task{Payload: []byte(fmt.Sprint(i)), Kind: "k"})
	}
	ls, err := q.Claim(ctx, "w9", time.Minute, 3)
	if err != nil || len(ls) != 3 {
		t.Fatalf("claim: %v %d", err, len(ls))
	}
	l := ls[0]
	if l.Attempt != 1 || l.Token != 1 || l.Owner != "w9" || !l.Deadline.Equal(t0.Add(time.Minute)) ||
		l.Queue != "q" || l.Namespace != ns || string(l.Payload) != "0" || l.Kind != "k" || l.MaxAttempts != 5 {
		t.Fatalf("lease fields: %+v", l)
	}
	n, _ := q.Counts(ctx)
	if n.Ready != 2 || n.InFlight != 3 {
		t.Fatalf("counts %+v", n)
	}
}

func TestDueTimersPromotedBeforeServing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	ready := e.enqueue(q, Task{Priority: 1})
	timer := e.enqueue(q, Task{Priority: 5, Delay: time.Minute})
	later := e.enqueue(q, Task{Priority: 9, Delay: time.Hour})
	ls := e.claim(q, 10)
	if got := ids(ls); !slices.Equal(got, []uint64{ready}) {
		t.Fatalf("before the timer: %v", got)
	}
	if _, err := q.Complete(ctx, ls[0], Done{}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	ls = e.claim(q, 10)
	if got := ids(ls); !slices.Equal(got, []uint64{timer}) {
		t.Fatalf("at the timer: %v", got)
	}
	if _, err := q.Complete(ctx, ls[0], Done{}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)
	ready2 := e.enqueue(q, Task{Priority: 1})
	// The due high-priority timer is served before an older-enqueued
	// low-priority ready task.
	if got := ids(e.claim(q, 1)); !slices.Equal(got, []uint64{later}) {
		t.Fatalf("due timer not served by priority: %v", got)
	}
	if got := ids(e.claim(q, 1)); !slices.Equal(got, []uint64{ready2}) {
		t.Fatalf("then: %v", got)
	}
}

func TestClaimPromotesEveryDueTimer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	for range 10 {
		e.enqueue(q, Task{Delay: time.Second})
	}
	e.clock.Advance(time.Second)
	if n := len(e.claim(q, 1)); n != 1 {
		t.Fatalf("claimed %d", n)
	}
	n, _ := q.Counts(ctx)
	if n.Ready != 9 || n.Scheduled != 0 || n.InFlight != 1 {
		t.Fatalf("every due timer should be promoted by one claim: %+v", n)
	}
}

func TestExpiredLeaseReclaimed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	retry := e.enqueue(q, Task{MaxAttempts: 3})
	spent := e.enqueue(q, Task{MaxAttempts: 1})
	first := e.claim(q, 2)
	if len(first) != 2 {
		t.Fatalf("claimed %d", len(first))
	}
	e.clock.Advance(31 * time.Second)
	// A claim by another owner reclaims both expired leases first.
	ls, err := q.Claim(ctx, "w2", time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(ls), []uint64{retry}) || ls[0].Attempt != 2 || ls[0].Token != 2 || ls[0].Owner != "w2" {
		t.Fatalf("reclaimed lease: %+v", ls)
	}
	info := e.get(q, retry)
	if info.LastError != "lease expired" {
		t.Fatalf("last error %q", info.LastError)
	}
	dead := e.get(q, spent)
	if dead.State != Dead || !strings.Contains(dead.LastError, "lease expired") {
		t.Fatalf("spent task: %+v", dead)
	}
	// The zombie's late calls are refused.
	wantErr(t, errOnly(q.Complete(ctx, first[0], Done{})), ErrLeaseLost)
	wantErr(t, q.Fail(ctx, first[1], Failure{Err: "x"}), ErrLeaseLost)
}

func TestReclaimWithoutClaimingGoesReadyAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	id := e.enqueue(q, Task{BackoffBase: time.Hour})
	first := e.claim(q, 1)
	e.enqueue(q, Task{Priority: 100})
	e.clock.Advance(time.Minute)
	ls := e.claim(q, 1) // takes the priority-100 task; the expired one is ready again
	if len(ls) != 1 || ls[0].ID == id {
		t.Fatalf("claimed %v", ids(ls))
	}
	// Ready since its lease ended, without backoff.
	info := e.get(q, id)
	if info.State != Ready || !info.NotBefore.Equal(first[0].Deadline) || info.Owner != "" {
		t.Fatalf("reclaimed task should be ready at once, without backoff: %+v", info)
	}
}

func TestBackoffExact(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	id := e.enqueue(q, Task{MaxAttempts: 10, BackoffBase: 2 * time.Second, BackoffMax: 20 * time.Second})
	want := []time.Duration{2, 4, 8, 16, 20, 20}
	for i, w := range want {
		ls := e.claim(q, 1)
		if len(ls) != 1 || ls[0].ID != id || ls[0].Attempt != i+1 {
			t.Fatalf("attempt %d: %+v", i+1, ls)
		}
		if err := q.Fail(ctx, ls[0], Failure{Err: "boom"}); err != nil {
			t.Fatal(err)
		}
		info := e.get(q, id)
		if d := info.NotBefore.Sub(e.clock.Now()); d != w*time.Second || info.State != Scheduled || info.LastError != "boom" {
			t.Fatalf("attempt %d: retry in %v (%v), want %v", i+1, d, info.State, w*time.Second)
		}
		e.clock.Advance(w*time.Second - time.Microsecond)
		if ls := e.claim(q, 1); len(ls) != 0 {
			t.Fatalf("claimed before backoff elapsed")
		}
		e.clock.Advance(time.Microsecond)
	}
}

func TestBackoffFunction(t *testing.T) {
	t.Parallel()
	cases := []struct {
		base, max int64
		att       uint32
		want      int64
	}{
		{1, 100, 1, 1}, {1, 100, 2, 2}, {1, 100, 7, 64}, {1, 100, 8, 100},
		{1e6, 60e6, 0, 1e6}, {1e6, 60e6, 40, 60e6}, {1 << 40, 1 << 62, 1000, 1 << 62}, {3, 1 << 62, 62, 1 << 62},
	}
	for _, c := range cases {
		if got := machine.Backoff(c.base, c.max, c.att); got != c.want {
			t.Errorf("backoff(%d,%d,%d)=%d want %d", c.base, c.max, c.att, got, c.want)
		}
	}
}

func TestFailOutcomes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	perm := e.enqueue(q, Task{})
	ls := e.claim(q, 1)
	if err := q.Fail(ctx, ls[0], Failure{Err: "bad input", Permanent: true}); err != nil {
		t.Fatal(err)
	}
	if info := e.get(q, perm); info.State != Dead || info.Attempts != 1 || info.LastError != "bad input" {
		t.Fatalf("permanent failure: %+v", info)
	}
	last := e.enqueue(q, Task{MaxAttempts: 1})
	ls = e.claim(q, 1)
	if err := q.Fail(ctx, ls[0], Failure{Err: "x"}); err != nil {
		t.Fatal(err)
	}
	if info := e.get(q, last); info.State != Dead {
		t.Fatalf("spent budget: %+v", info)
	}
	after := e.enqueue(q, Task{})
	ls = e.claim(q, 1)
	if err := q.Fail(ctx, ls[0], Failure{Err: "x", RetryAfter: 7 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if info := e.get(q, after); !info.NotBefore.Equal(t0.Add(7 * time.Second)) {
		t.Fatalf("retry after: %+v", info)
	}
	page, err := q.List(ctx, ListOptions{State: Dead})
	if err != nil || len(page.Tasks) != 2 || page.Tasks[0].ID != perm || page.Tasks[1].ID != last {
		t.Fatalf("dead letter list: %v %+v", err, page)
	}
}

func TestStaleTokensRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	q := e.q("q")
	id := e.enqueue(q, Task{})
	old := e.claim(q, 1)[0]
	e.clock.Advance(time.Minute)
	cur, err := q.Claim(ctx, "w2", time.Minute, 1)
	if err != nil || len(cur) != 1 || cur[0].Token != old.Token+1 {
		t.Fatalf("reclaim: %v %+v", err, cur)
	}
	before := dump(e.db)
	wantErr(t, errOnly(q.Complete(ctx, old, Done{Ops: []Op{Set("k", []byte("v"))}})), ErrLeaseLost)
	wantErr(t, q.Fail(ctx, old, Failure{Err: "late"}), ErrLeaseLost)
	_, err = hb(ctx, q, old, time.Hour, []byte(`1`))
	wantErr(t, err, ErrLeaseLost)
	wantErr(t, q.Snooze(ctx, old, 0), ErrLeaseLost)
	forged := cur[0]
	forged.Token += 5
	wantErr(t, errOnly(q.Complete(ctx, forged, Done{})), ErrLeaseLost)
	other := cur[0]
	other.Queue = "other"
	wantErr(t, errOnly(e.q("other").Complete(ctx, other, Done{})), ErrLeaseLost)
	if after := dump(e.db); after != before {
		t.Fatalf("a refused call changed state:\n%s\n%s", before, after)
	}
	if got := e.db.Stats().LeaseLost; got != 6 {
		t.Fatalf("lease lost count %d", got)
	}
	if _, err := q.Complete(ctx, cur[0], Done{}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, errOnly(q.Complete(ctx, cur[0], Done{})), ErrLeaseLost) // twice
	if _, err := q.Get(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("completed task still there: %v", err)
	}
	e.reopen()
}

func TestTokensNeverGoBackAcrossRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	q := e.q("q")
	id := e.enqueue(q, Task{MaxAttempts: 100})
	var last uint64
	for i := range 6 {
		l := e.claim(q, 1)[0]
		if l.Token <= last {
			t.Fatalf("token %d after %d", l.Token, last)
		}
		last = l.Token
		if err := q.Snooze(ctx, l, 0); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			e.reopen()
		}
		if i == 3 {
			if err := e.db.Checkpoint(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if info := e.get(q, id); info.Token != last || info.Attempts != 0 {
		t.Fatalf("snoozes should not use attempts: %+v", info)
	}
}

func TestHeartbeat(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	id := e.enqueue(q, Task{})
	l := e.claim(q, 1)[0]
	e.clock.Advance(20 * time.Second)
	dl, err := hb(ctx, q, l, time.Minute, []byte(`{"pct":40}`))
	if err != nil || !dl.Equal(e.clock.Now().Add(time.Minute)) {
		t.Fatalf("heartbeat: %v %v", dl, err)
	}
	e.clock.Advance(50 * time.Second) // past the original lease, inside the extended one
	if ls := e.claim(q, 1); len(ls) != 0 {
		t.Fatalf("extended lease was reclaimed")
	}
	if _, err := hb(ctx, q, l, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	info := e.get(q, id)
	if string(info.Progress) != `{"pct":40}` || info.State != InFlight {
		t.Fatalf("progress kept after a heartbeat without progress: %+v", info)
	}
	_, err = hb(ctx, q, l, time.Minute, []byte(`{bad`))
	wantErr(t, err, ErrInvalid)
	_, err = hb(ctx, q, l, 0, nil)
	wantErr(t, err, ErrInvalid)
}

func TestIdempotency(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.IdempotencyTTL = time.Hour })
	q := e.q("q")
	a, err := q.Enqueue(ctx, Task{IdempotencyKey: "welcome-42", Payload: []byte(`1`)})
	if err != nil || a.Deduplicated {
		t.Fatal(err, a)
	}
	b, err := q.Enqueue(ctx, Task{IdempotencyKey: "welcome-42", Payload: []byte(`2`)})
	if err != nil || !b.Deduplicated || b.ID != a.ID {
		t.Fatalf("duplicate: %+v %v", b, err)
	}
	// Same key on another queue is a different task.
	c, _ := e.q("other").Enqueue(ctx, Task{IdempotencyKey: "welcome-42"})
	if c.Deduplicated {
		t.Fatal("keys leaked across queues")
	}
	// Within one batch.
	res, err := q.EnqueueBatch(ctx, []Task{{IdempotencyKey: "x"}, {IdempotencyKey: "x"}, {IdempotencyKey: "welcome-42"}})
	if err != nil || res[0].Deduplicated || !res[1].Deduplicated || res[1].ID != res[0].ID || res[2].ID != a.ID {
		t.Fatalf("batch: %+v %v", res, err)
	}
	// Completed: still remembered within the TTL, also across a restart.
	ls := e.claim(q, 10)
	for _, l := range ls {
		if _, err := q.Complete(ctx, l, Done{}); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(59 * time.Minute)
	e.reopen()
	again, _ := q.Enqueue(ctx, Task{IdempotencyKey: "welcome-42"})
	if !again.Deduplicated || again.ID != a.ID {
		t.Fatalf("forgot the key within its TTL: %+v", again)
	}
	e.clock.Advance(2 * time.Minute)
	fresh, _ := q.Enqueue(ctx, Task{IdempotencyKey: "welcome-42"})
	if fresh.Deduplicated || fresh.ID == a.ID {
		t.Fatalf("key not forgotten after the TTL: %+v", fresh)
	}
	// The expired entry of "x" was pruned, so memory does not grow.
	e.db.c.mu.Lock()
	_, held := e.db.c.store.Idem(q.(*queue).key(), "x")
	e.db.c.mu.Unlock()
	if held {
		t.Fatal("expired idempotency key still held")
	}
	e.reopen()
}

func TestIdempotencyForgottenAtOnceWithNegativeTTL(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, func(o *Options) { o.IdempotencyTTL = -1 })
	q := e.q("q")
	a, _ := q.Enqueue(ctx, Task{IdempotencyKey: "k"})
	if err := q.Cancel(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	b, _ := q.Enqueue(ctx, Task{IdempotencyKey: "k"})
	if b.Deduplicated {
		t.Fatal("key remembered after its task ended with TTL < 0")
	}
}

func TestCompleteWithFollowUpsAndMutations(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	q := e.q("step1")
	e.enqueue(q, Task{Payload: []byte(`{"order":7}`)})
	l := e.claim(q, 1)[0]
	_, err := q.Complete(ctx, l, Done{
		Result: []byte(`{"ok":true}`),
		Ops:    []Op{Set("order/7", []byte("charged")), IfAbsent("order/7")},
		FollowUps: []FollowUp{
			{Queue: "step2", Task: Task{Payload: []byte(`{"order":7}`)}},
			{Queue: "audit", Task: Task{Delay: time.Minute}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	n2, _ := e.q("step2").Counts(ctx)
	na, _ := e.q("audit").Counts(ctx)
	if n2.Ready != 1 || na.Scheduled != 1 {
		t.Fatalf("follow-ups: %+v %+v", n2, na)
	}
	ent, err := e.db.KV(ns).Get(ctx, "order/7")
	if err != nil || string(ent.Value) != "charged" {
		t.Fatalf("kv: %+v %v", ent, err)
	}
	e.reopen()
}

func TestCompleteAllOrNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	q := e.q("q")
	e.enqueue(q, Task{})
	l := e.claim(q, 1)[0]
	before := dump(e.db)
	_, err := q.Complete(ctx, l, Done{
		Ops:       []Op{Set("a", []byte("1")), IfExists("missing")},
		FollowUps: []FollowUp{{Queue: "next", Task: Task{}}},
	})
	wantErr(t, err, ErrConflict)
	if after := dump(e.db); after != before {
		t.Fatalf("failed completion changed state")
	}
	// The lease still holds: a corrected completion succeeds.
	if _, err := q.Complete(ctx, l, Done{Ops: []Op{Set("a", []byte("1"))}}); err != nil {
		t.Fatal(err)
	}
}

func TestOutboxAllOrNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	q := e.q("emails")
	kv := e.db.KV(ns)
	res, err := kv.Commit(ctx, Set("user/42", []byte("v1")))
	if err != nil {
		t.Fatal(err)
	}
	v1 := res.Version
	_, err = q.Enqueue(ctx, Task{Payload: []byte(`{}`)}, Set("user/42/welcomed", []byte("pending")), IfVersion("user/42", v1+100))
	wantErr(t, err, ErrConflict)
	if n, _ := q.Counts(ctx); n.Ready != 0 {
		t.Fatal("task committed though its assertion failed")
	}
	if _, err := kv.Get(ctx, "user/42/welcomed"); !errors.Is(err, ErrNotFound) {
		t.Fatal("KV write committed though the assertion failed")
	}
	r, err := q.Enqueue(ctx, Task{Payload: []byte(`{}`)}, Set("user/42/welcomed", []byte("pending")), IfVersion("user/42", v1))
	if err != nil || r.ID == 0 {
		t.Fatal(err)
	}
	ent, _ := kv.Get(ctx, "user/42/welcomed")
	if ent.Version <= v1 {
		t.Fatalf("version did not advance: %d after %d", ent.Version, v1)
	}
	e.reopen()
}

func TestKV(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	kv := e.db.KV(ns)
	for _, k := range []string{"b/2", "a/1", "b/1", "c", "b/3"} {
		if _, err := kv.Commit(ctx, Set(k, []byte(k))); err != nil {
			t.Fatal(err)
		}
	}
	keys := func(es []Entry) (out []string) {
		for _, e := range es {
			out = append(out, e.Key)
		}
		return
	}
	got, _ := kv.Scan(ctx, ScanOptions{Prefix: "b/"})
	if !slices.Equal(keys(got), []string{"b/1", "b/2", "b/3"}) {
		t.Fatalf("prefix scan %v", keys(got))
	}
	got, _ = kv.Scan(ctx, ScanOptions{Start: "a/5", End: "b/3"})
	if !slices.Equal(keys(got), []string{"b/1", "b/2"}) {
		t.Fatalf("range scan %v", keys(got))
	}
	got, _ = kv.Scan(ctx, ScanOptions{Limit: 2})
	if !slices.Equal(keys(got), []string{"a/1", "b/1"}) {
		t.Fatalf("limit %v", keys(got))
	}
	// Another namespace sees nothing.
	if got, _ := e.db.KV(NS("acme", "dev")).Scan(ctx, ScanOptions{}); len(got) != 0 {
		t.Fatalf("namespace leak: %v", keys(got))
	}
	c, _ := kv.Get(ctx, "c")
	res, err := kv.Commit(ctx, IfVersion("c", c.Version), Delete("c"), Set("d", nil))
	if err != nil || res.Version <= c.Version {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, "c"); !errors.Is(err, ErrNotFound) {
		t.Fatal("delete")
	}
	_, err = kv.Commit(ctx, IfVersion("d", res.Version+1), Set("e", []byte("x")))
	wantErr(t, err, ErrConflict)
	_, err = kv.Commit(ctx, IfAbsent("d"))
	wantErr(t, err, ErrConflict)
	e.reopen()
}

func TestCancelRedriveListCounts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	q := e.q("q")
	var dead []uint64
	for range 5 {
		id := e.enqueue(q, Task{MaxAttempts: 1})
		dead = append(dead, id)
	}
	for _, l := range e.claim(q, 5) {
		if err := q.Fail(ctx, l, Failure{Err: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	p1, err := q.List(ctx, ListOptions{State: Dead, Limit: 2})
	if err != nil || len(p1.Tasks) != 2 || p1.Next == "" {
		t.Fatalf("page 1: %+v %v", p1, err)
	}
	p2, _ := q.List(ctx, ListOptions{State: Dead, Limit: 2, Cursor: p1.Next})
	p3, _ := q.List(ctx, ListOptions{State: Dead, Limit: 2, Cursor: p2.Next})
	var all []uint64
	for _, p := range []Page{p1, p2, p3} {
		for _, ti := range p.Tasks {
			all = append(all, ti.ID)
		}
	}
	if !slices.Equal(all, dead) || p3.Next != "" {
		t.Fatalf("paged dead list %v, want %v (next %q)", all, dead, p3.Next)
	}
	if err := q.Redrive(ctx, dead[0]); err != nil {
		t.Fatal(err)
	}
	if info := e.get(q, dead[0]); info.State != Ready || info.Attempts != 0 {
		t.Fatalf("redriven: %+v", info)
	}
	wantErr(t, q.Redrive(ctx, dead[0]), ErrConflict)
	wantErr(t, q.Redrive(ctx, 9999), ErrNotFound)
	n, err := q.RedriveAll(ctx)
	if err != nil || n != 4 {
		t.Fatalf("redrive all: %d %v", n, err)
	}
	if err := q.Cancel(ctx, dead[1]); err != nil {
		t.Fatal(err)
	}
	wantErr(t, q.Cancel(ctx, dead[1]), ErrNotFound)
	wantErr(t, e.q("other").Cancel(ctx, dead[2]), ErrNotFound)
	counts, _ := q.Counts(ctx)
	if counts != (Counts{Ready: 4}) {
		t.Fatalf("counts %+v", counts)
	}
	// Ready listing follows the serving order.
	e.enqueue(q, Task{Priority: 10})
	page, _ := q.List(ctx, ListOptions{State: Ready, Limit: 3})
	if page.Tasks[0].Priority != 10 || page.Next == "" {
		t.Fatalf("ready list %+v", page)
	}
	rest, _ := q.List(ctx, ListOptions{State: Ready, Cursor: page.Next})
	if len(rest.Tasks) != 2 || rest.Next != "" {
		t.Fatalf("ready rest %+v", rest)
	}
	_, err = q.List(ctx, ListOptions{State: Ready, Cursor: "garbage"})
	wantErr(t, err, ErrInvalid)
	e.reopen()
}

func TestCancelInFlightFencesWorker(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	id := e.enqueue(q, Task{})
	l := e.claim(q, 1)[0]
	if err := q.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	wantErr(t, errOnly(q.Complete(ctx, l, Done{})), ErrLeaseLost)
}

func TestRetainCompleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.RetainCompleted = time.Hour })
	q := e.q("q")
	id := e.enqueue(q, Task{})
	l := e.claim(q, 1)[0]
	if _, err := q.Complete(ctx, l, Done{Result: []byte(`{"sent":true}`)}); err != nil {
		t.Fatal(err)
	}
	info := e.get(q, id)
	if info.State != Completed || string(info.Result) != `{"sent":true}` || info.Owner != "" {
		t.Fatalf("retained: %+v", info)
	}
	wantErr(t, errOnly(q.Complete(ctx, l, Done{})), ErrLeaseLost)
	e.reopen()
	page, _ := q.List(ctx, ListOptions{State: Completed})
	if len(page.Tasks) != 1 {
		t.Fatalf("completed list %+v", page)
	}
	e.clock.Advance(time.Hour + time.Second)
	e.enqueue(q, Task{}) // any commit prunes what expired
	if _, err := q.Get(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("retention not enforced: %v", err)
	}
	e.reopen()
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.MaxPayloadBytes = 100 })
	q := e.q("q")
	long := strings.Repeat("x", 256)
	cases := []struct {
		name, field string
		call        func() error
	}{
		{"empty queue", "queue name", func() error { _, err := e.db.Queue(ns, "").Enqueue(ctx, Task{}); return err }},
		{"long queue", "queue name", func() error { _, err := e.db.Queue(ns, long).Enqueue(ctx, Task{}); return err }},
		{"NUL queue", "NUL", func() error { _, err := e.db.Queue(ns, "a\x00b").Enqueue(ctx, Task{}); return err }},
		{"bad utf8 queue", "UTF-8", func() error { _, err := e.db.Queue(ns, "a\xffb").Enqueue(ctx, Task{}); return err }},
		{"empty project", "project", func() error { _, err := e.db.Queue(NS("", "s"), "q").Enqueue(ctx, Task{}); return err }},
		{"long scope", "scope", func() error { _, err := e.db.Queue(NS("p", long), "q").Enqueue(ctx, Task{}); return err }},
		{"payload not JSON", "payload", func() error { _, err := q.Enqueue(ctx, Task{Payload: []byte("{nope")}); return err }},
		{"payload too big", "MaxPayloadBytes", func() error {
			_, err := q.Enqueue(ctx, Task{Payload: []byte(`"` + strings.Repeat("a", 100) + `"`)})
			return err
		}},
		{"negative delay", "delay", func() error { _, err := q.Enqueue(ctx, Task{Delay: -1}); return err }},
		{"huge delay", "delay", func() error { _, err := q.Enqueue(ctx, Task{Delay: 1<<63 - 1}); return err }},
		{"negative attempts", "max attempts", func() error { _, err := q.Enqueue(ctx, Task{MaxAttempts: -1}); return err }},
		{"sub-microsecond backoff", "backoff", func() error { _, err := q.Enqueue(ctx, Task{BackoffBase: time.Nanosecond}); return err }},
		{"backoff base over max", "backoff base 2s is over backoff max 1s", func() error {
			_, err := q.Enqueue(ctx, Task{BackoffBase: 2 * time.Second, BackoffMax: time.Second})
			return err
		}},
		{"payload not UTF-8", "payload is not valid UTF-8", func() error { _, err := q.Enqueue(ctx, Task{Payload: []byte("\"a\xffb\"")}); return err }},
		{"header not UTF-8", "valid UTF-8", func() error {
			_, err := q.Enqueue(ctx, Task{Headers: map[string]string{"trace": "a\xffb"}})
			return err
		}},
		{"payload key not UTF-8", "payload is not valid UTF-8", func() error { _, err := q.Enqueue(ctx, Task{Payload: []byte("{\"\xc3\":1}")}); return err }},
		{"too many tasks", "batch", func() error { _, err := q.EnqueueBatch(ctx, make([]Task, MaxBatch+1)); return err }},
		{"bad task in batch", "task 1", func() error {
			_, err := q.EnqueueBatch(ctx, []Task{{}, {Payload: []byte("x")}})
			return err
		}},
		{"empty owner", "owner", func() error { _, err := q.Claim(ctx, "", time.Second, 1); return err }},
		{"long owner", "owner", func() error { _, err := q.Claim(ctx, long, time.Second, 1); return err }},
		{"zero lease", "lease", func() error { _, err := q.Claim(ctx, "w", 0, 1); return err }},
		{"negative lease", "lease", func() error { _, err := q.Claim(ctx, "w", -time.Second, 1); return err }},
		{"claim zero", "claim max", func() error { _, err := q.Claim(ctx, "w", time.Second, 0); return err }},
		{"claim too many", "claim max", func() error { _, err := q.Claim(ctx, "w", time.Second, MaxBatch+1); return err }},
		{"result not JSON", "result", func() error { return errOnly(q.Complete(ctx, Lease{ID: 1}, Done{Result: []byte("x")})) }},
		{"result not UTF-8", "result is not valid UTF-8", func() error {
			return errOnly(q.Complete(ctx, Lease{ID: 1}, Done{Result: []byte("[\"\xed\xa0\x80\"]")}))
		}},
		{"empty key", "key", func() error { _, err := e.db.KV(ns).Commit(ctx, Set("", nil)); return err }},
		{"zero op", "zero Op", func() error { _, err := e.db.KV(ns).Commit(ctx, Op{}); return err }},
		{"too many ops", "ops", func() error { _, err := e.db.KV(ns).Commit(ctx, make([]Op, MaxOps+1)...); return err }},
		{"value too big", "value", func() error { _, err := e.db.KV(ns).Commit(ctx, Set("k", make([]byte, 101))); return err }},
		{"long idem key", "idempotency key", func() error {
			_, err := q.Enqueue(ctx, Task{IdempotencyKey: strings.Repeat("k", MaxKeyBytes+1)})
			return err
		}},
		{"list state", "state", func() error { _, err := q.List(ctx, ListOptions{}); return err }},
		{"durability", "durability", func() error { _, err := OpenInMemory(Options{Durability: 9}); return err }},
		{"empty dir", "empty data directory", func() error { _, err := Open("", Options{}); return err }},
	}
	before := dump(e.db)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), c.field) {
				t.Fatalf("error %q does not name %q", err, c.field)
			}
		})
	}
	if after := dump(e.db); after != before {
		t.Fatalf("bad input changed state:\n%s", after)
	}
}

// TestBackoffZeroMaxIsDefault: only a set BackoffMax under a set
// BackoffBase is refused (TestBadInput); a zero on either side is the
// default, and equal values are fine.
func TestBackoffZeroMaxIsDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	for _, c := range []struct{ base, max, wantBase, wantMax time.Duration }{
		{time.Hour, 0, time.Hour, time.Minute},
		{0, 500 * time.Millisecond, time.Second, 500 * time.Millisecond},
		{time.Second, time.Second, time.Second, time.Second},
	} {
		id, err := q.Enqueue(ctx, Task{BackoffBase: c.base, BackoffMax: c.max})
		if err != nil {
			t.Fatalf("base %v max %v: %v", c.base, c.max, err)
		}
		if i := e.get(q, id.ID); i.BackoffBase != c.wantBase || i.BackoffMax != c.wantMax {
			t.Fatalf("base %v max %v stored as %v %v", c.base, c.max, i.BackoffBase, i.BackoffMax)
		}
	}
}

// TestInvalidUTF8Refused: JSON that is not UTF-8 inside its strings (which
// encoding/json.Valid accepts) is refused wherever the engine takes JSON: a
// payload, a batch's, a follow-up's, a result and progress (headers:
// TestBadInput). KV values are bytes and keep any bytes, and keys of KV
// entries and idempotency keys any bytes too (TestHostileInput); a
// failure's text loses the bytes that are not UTF-8.
func TestInvalidUTF8Refused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	bad := []byte("{\"msg\":\"caf\xe9\"}") // Latin-1 é
	e.enqueue(q, Task{Payload: []byte(`{"msg":"café"}`)})
	l := e.claim(q, 1)[0]
	before := dump(e.db)
	for name, call := range map[string]func() error{
		"enqueue": func() error { return errOnly(q.Enqueue(ctx, Task{Payload: bad})) },
		"batch":   func() error { return errOnly(q.EnqueueBatch(ctx, []Task{{}, {Payload: bad}})) },
		"follow-up": func() error {
			return errOnly(q.Complete(ctx, l, Done{FollowUps: []FollowUp{{Queue: "next", Task: Task{Payload: bad}}}}))
		},
		"result":   func() error { return errOnly(q.Complete(ctx, l, Done{Result: bad})) },
		"progress": func() error { return q.Heartbeat(ctx, &l, time.Minute, bad) },
	} {
		err := call()
		wantErr(t, err, ErrInvalid)
		if !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("%s: %v does not say UTF-8", name, err)
		}
	}
	if dump(e.db) != before {
		t.Fatal("a refused call changed state")
	}
	// The same call with valid text goes through.
	if err := q.Heartbeat(ctx, &l, time.Minute, []byte(`{"msg":"café ☕"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.KV(ns).Commit(ctx, Set("k", []byte("\xff\xfe"))); err != nil {
		t.Fatalf("a KV value of arbitrary bytes: %v", err)
	}
	// A failure's text is not refused: the bytes that are not UTF-8 are
	// dropped, as a rune cut at MaxErrorBytes is.
	if err := q.Fail(ctx, l, Failure{Err: "caf\xe9 \xff\xfeclosed ☕"}); err != nil {
		t.Fatal(err)
	}
	if i := e.get(q, l.ID); i.LastError != "caf closed ☕" {
		t.Fatalf("stored error %q", i.LastError)
	}
}

func TestClosed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	q := e.q("q")
	e.enqueue(q, Task{})
	if err := e.db.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := q.Enqueue(ctx, Task{})
	wantErr(t, err, ErrClosed)
	_, err = q.Claim(ctx, "w", time.Second, 1)
	wantErr(t, err, ErrClosed)
	_, err = q.Counts(ctx)
	wantErr(t, err, ErrClosed)
	wantErr(t, e.db.Checkpoint(ctx), ErrClosed)
	wantErr(t, e.db.Close(), ErrClosed)
	e.db = nil
}

func TestCompleteBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	q := e.q("q")
	for range 5 {
		e.enqueue(q, Task{IdempotencyKey: ""})
	}
	ls := e.claim(q, 5)
	stale := ls[1]
	stale.Token--
	batch := []Lease{ls[0], stale, ls[2], ls[2], ls[3]}
	errs, err := q.CompleteBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []error{nil, ErrLeaseLost, nil, ErrLeaseLost, nil} {
		if want == nil && errs[i] != nil || want != nil && !errors.Is(errs[i], want) {
			t.Fatalf("lease %d: %v, want %v", i, errs[i], want)
		}
	}
	n, _ := q.Counts(ctx)
	if n.InFlight != 2 || n.Ready != 0 {
		t.Fatalf("counts after batch completion: %+v", n)
	}
	if st := e.db.Stats(); st.Completed != 3 || st.LeaseLost != 2 {
		t.Fatalf("stats %+v", st)
	}
	// All stale: nothing written, every lease refused.
	errs, err = q.CompleteBatch(ctx, []Lease{ls[0], stale})
	if err != nil || !errors.Is(errs[0], ErrLeaseLost) || !errors.Is(errs[1], ErrLeaseLost) {
		t.Fatalf("stale batch: %v %v", errs, err)
	}
	_, err = q.CompleteBatch(ctx, make([]Lease, MaxBatch+1))
	wantErr(t, err, ErrInvalid)
	e.reopen()
}

func TestSnoozeUnderAMicrosecondIsReadyAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	id := e.enqueue(q, Task{})
	l := e.claim(q, 1)[0]
	if err := q.Snooze(ctx, l, time.Nanosecond); err != nil {
		t.Fatal(err)
	}
	if info := e.get(q, id); info.State != Ready || info.Attempts != 0 || info.Owner != "" {
		t.Fatalf("snoozed for under a microsecond: %+v", info)
	}
}
