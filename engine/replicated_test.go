package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docketdb/docket/engine/internal/machine"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// localLog is a replicated log inside one process: Submit, on the leader's
// member, appends a command and applies it in log order to every member
// that is up; a member that was down catches up from the entries when it
// comes back. It stands in for raft to test the engine's side alone.
type localLog struct {
	mu      sync.Mutex
	entries [][]byte
	members []*member
	leader  int
	// afterApply, if set, runs after each entry is applied everywhere,
	// with the log locked; it may append entries with l.appendLocked.
	afterApply func(l *localLog, entry []byte)
	// fail, if set, is what Submit returns instead of appending.
	fail error
}

type member struct {
	log     *localLog
	i       int
	db      *DB
	applied int // entries applied
	down    bool
}

func (m *member) Submit(_ context.Context, cmd []byte) (*Applied, error) {
	l := m.log
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return nil, l.fail
	}
	if m.i != l.leader {
		return nil, fmt.Errorf("%w: member %d", ErrNotLeader, m.i)
	}
	return l.appendLocked(cmd, m), nil
}

// appendLocked appends cmd, applies it everywhere and returns what it gave
// on member from (nil: none).
func (l *localLog) appendLocked(cmd []byte, from *member) *Applied {
	l.entries = append(l.entries, cmd)
	var out *Applied
	for _, m := range l.members {
		if a := m.catchUp(); m == from {
			out = a
		}
	}
	if l.afterApply != nil {
		l.afterApply(l, cmd)
	}
	return out
}

// catchUp applies the entries m has not applied and returns the answer to
// the last one.
func (m *member) catchUp() *Applied {
	var a *Applied
	for !m.down && m.applied < len(m.log.entries) {
		a = m.db.ApplyCommand(m.log.entries[m.applied])
		m.applied++
	}
	return a
}

func (m *member) ReadBarrier(context.Context) error {
	m.log.mu.Lock()
	defer m.log.mu.Unlock()
	if m.i != m.log.leader {
		return fmt.Errorf("%w: member %d", ErrNotLeader, m.i)
	}
	return nil
}

// newLocalLog opens n replicated DBs on one log; opts(i) gives member i's
// options. Lease secrets all derive from seed 42, so that a standalone DB
// with the same entropy holds the same state.
func newLocalLog(t *testing.T, n int, opts func(i int) Options) *localLog {
	t.Helper()
	l := &localLog{}
	for i := range n {
		m := &member{log: l, i: i}
		o := opts(i)
		if o.Logger == nil {
			o.Logger = quiet
		}
		db, err := OpenReplicated(o, m)
		if err != nil {
			t.Fatal(err)
		}
		db.c.seeds = func() uint64 { return 42 }
		m.db = db
		l.members = append(l.members, m)
		t.Cleanup(func() { db.Close() })
	}
	return l
}

func (l *localLog) setLeader(i int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leader = i
}

func (l *localLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

// sameState requires every member that is up to hold the state of want,
// by hash and byte for byte.
func (l *localLog) sameState(t *testing.T, want *DB, step string) {
	t.Helper()
	var wb bytes.Buffer
	if err := want.EncodeState(&wb); err != nil {
		t.Fatal(err)
	}
	wh, _ := want.StateHash()
	for _, m := range l.members {
		if m.down {
			continue
		}
		var b bytes.Buffer
		if err := m.db.EncodeState(&b); err != nil {
			t.Fatal(err)
		}
		h, _ := m.db.StateHash()
		if h != wh || !bytes.Equal(b.Bytes(), wb.Bytes()) {
			t.Fatalf("%s: member %d differs:\n%s\nwant:\n%s", step, m.i, dump(m.db), dump(want))
		}
		if err := m.db.Verify(); err != nil {
			t.Fatalf("%s: member %d: %v", step, m.i, err)
		}
	}
}

// script is a workload over every write and read of the API, for running
// the same calls against different DBs. Each step returns its answer as
// text.
func script(api API, clock *ManualClock) []struct {
	name string
	do   func() string
} {
	q, q2, kv := api.Queue(ns, "a"), api.Queue(ns, "b"), api.KV(ns)
	dq := api.Queue(ns, "deps")
	var leases []Lease
	var deps []Enqueued
	var completed Lease // by complete and claim
	show := func(v any, err error) string { return fmt.Sprintf("%+v err=%v", v, err) }
	claim := func(qq Queue, n int) string {
		ls, err := qq.Claim(ctx, "w", time.Minute, n)
		leases = append(leases, ls...)
		return show(ls, err)
	}
	lease := func(i int) Lease { return leases[i%len(leases)] }
	h := map[string]string{"z": "1", "y": "2", "x": "3", "w": "4"}
	return []struct {
		name string
		do   func() string
	}{
		{"enqueue", func() string {
			return show(q.Enqueue(ctx, Task{Payload: []byte(`{}`), Headers: h, Kind: "k", IdempotencyKey: "i"}))
		}},
		{"enqueue dedup", func() string { return show(q.Enqueue(ctx, Task{IdempotencyKey: "i"})) }},
		{"enqueue outbox", func() string {
			return show(q.Enqueue(ctx, Task{Priority: 3, MaxAttempts: 2, BackoffBase: time.Second}, Set("o", []byte("1")), IfAbsent("nope")))
		}},
		{"enqueue conflict", func() string { return show(q.Enqueue(ctx, Task{}, IfExists("nope"))) }},
		{"enqueue invalid", func() string { return show(q.Enqueue(ctx, Task{Payload: []byte(`{`)})) }},
		{"batch", func() string {
			return show(q2.EnqueueBatch(ctx, []Task{{Delay: time.Second}, {At: clock.Now().Add(time.Hour)}, {IdempotencyKey: "j"}, {IdempotencyKey: "j"}},
				Enqueue("a", Task{Kind: "from-batch"})))
		}},
		{"kv", func() string { return show(kv.Commit(ctx, Set("k", []byte{}), Set("j", []byte("v")), Delete("gone"))) }},
		{"kv conflict", func() string { return show(kv.Commit(ctx, IfVersion("k", 1), Set("x", nil))) }},
		{"kv get", func() string { return show(kv.Get(ctx, "j")) }},
		{"kv scan", func() string { return show(kv.Scan(ctx, ScanOptions{})) }},
		{"claim", func() string { return claim(q, 3) }},
		{"claim empty queue", func() string { return claim(api.Queue(ns, "none"), 1) }},
		{"heartbeat", func() string {
			l := lease(0)
			err := q.Heartbeat(ctx, &l, 2*time.Minute, []byte(`{"p":1}`))
			return show(l.Deadline, err)
		}},
		{"heartbeat empty progress", func() string {
			l := lease(0)
			err := q.Heartbeat(ctx, &l, 2*time.Minute, []byte{})
			return show(l.Progress, err)
		}},
		{"snooze", func() string { return show(nil, q.Snooze(ctx, lease(1), time.Second)) }},
		{"fail", func() string { return show(nil, q.Fail(ctx, lease(2), Failure{Err: "x", RetryAfter: 3 * time.Second})) }},
		{"fail stale", func() string { return show(nil, q.Fail(ctx, lease(2), Failure{Err: "late"})) }},
		{"complete", func() string {
			return show(q.Complete(ctx, lease(0), Done{Result: []byte(`1`), Ops: []Op{Delete("j"), Set("r", []byte("x"))},
				FollowUps: []FollowUp{{Queue: "b", Task: Task{IdempotencyKey: "i"}}, {Queue: "a", Task: Task{}}}}))
		}},
		{"complete stale", func() string { return show(q.Complete(ctx, lease(0), Done{})) }},
		{"advance", func() string { clock.Advance(5 * time.Second); return "" }},
		{"promote and claim", func() string { return claim(q2, 10) }},
		{"claim a", func() string { return claim(q, 10) }},
		{"complete batch", func() string {
			n := len(leases)
			return show(q2.CompleteBatch(ctx, []Lease{leases[n-1], leases[n-1], leases[0]}))
		}},
		{"fail permanent", func() string {
			return show(nil, q.Fail(ctx, leases[len(leases)-2], Failure{Err: "dead", Permanent: true}))
		}},
		{"counts", func() string { return show(q.Counts(ctx)) }},
		{"list dead", func() string { return show(q.List(ctx, ListOptions{State: Dead})) }},
		{"redrive", func() string { return show(nil, q.Redrive(ctx, leases[len(leases)-2].ID)) }},
		{"redrive not dead", func() string { return show(nil, q.Redrive(ctx, leases[len(leases)-2].ID)) }},
		{"cancel", func() string { return show(nil, q.Cancel(ctx, leases[len(leases)-2].ID)) }},
		{"cancel missing", func() string { return show(nil, q.Cancel(ctx, 999)) }},
		{"run now", func() string {
			res, _ := q2.Enqueue(ctx, Task{Delay: time.Hour})
			return show(nil, q2.RunNow(ctx, res.ID))
		}},
		{"run now in flight", func() string { return show(nil, q.RunNow(ctx, leases[len(leases)-1].ID)) }},
		{"reschedule", func() string {
			res, _ := q2.Enqueue(ctx, Task{Delay: time.Hour})
			p := 7
			err := q2.Reschedule(ctx, res.ID, Reschedule{At: clock.Now().Add(time.Minute), Priority: &p})
			info, gerr := q2.Get(ctx, res.ID)
			return show(nil, err) + show(info.State, gerr) + show(info.Priority, nil)
		}},
		{"reschedule in flight", func() string {
			return show(nil, q.Reschedule(ctx, leases[len(leases)-1].ID, Reschedule{At: clock.Now()}))
		}},
		{"expire leases", func() string { clock.Advance(10 * time.Minute); return claim(q, 1) }},
		{"dead letters", func() string {
			for range 3 {
				ls, _ := q.Claim(ctx, "w", time.Minute, 10)
				for _, l := range ls {
					q.Fail(ctx, l, Failure{Permanent: true})
				}
			}
			return show(q.Counts(ctx))
		}},
		{"redrive all", func() string { return show(q.RedriveAll(ctx)) }},
		{"get", func() string { return show(q.Get(ctx, leases[0].ID)) }},
		{"enqueue async", func() string {
			p := q.EnqueueAsync(ctx, Task{Kind: "async"}, Set("async", []byte("1")))
			<-p.Done()
			return show(p.Wait(ctx))
		}},
		{"enqueue async conflict", func() string { return show(q.EnqueueAsync(ctx, Task{}, IfAbsent("async")).Wait(ctx)) }},
		{"enqueue async invalid", func() string { return show(q.EnqueueAsync(ctx, Task{Payload: []byte(`[`)}).Wait(ctx)) }},
		{"complete and claim", func() string {
			ls, _ := q.Claim(ctx, "w", time.Minute, 1)
			leases = append(leases, ls...)
			if len(ls) == 0 {
				return "nothing to claim"
			}
			completed = ls[0]
			res, next, err := q.CompleteAndClaim(ctx, ls[0], Done{FollowUps: []FollowUp{{Queue: "a", Task: Task{Kind: "next"}}}},
				"w2", time.Minute, 3)
			leases = append(leases, next...)
			return show(res, err) + show(next, nil)
		}},
		{"complete and claim stale", func() string {
			res, next, err := q.CompleteAndClaim(ctx, completed, Done{}, "w2", time.Minute, 3)
			return show(res, err) + show(next, nil)
		}},
		{"heartbeat batch", func() string {
			ls, _ := q.Claim(ctx, "w", time.Minute, 1)
			leases = append(leases, ls...)
			n := len(leases)
			a, b, stale := leases[n-1], leases[n-2], completed
			clock.Advance(time.Second)
			errs, err := q.HeartbeatBatch(ctx, []*Lease{&a, &stale, &b, &a}, 3*time.Minute)
			return show(errs, err) + show([]time.Time{a.Deadline, b.Deadline, stale.Deadline}, nil)
		}},
		{"housekeeping", func() string {
			clock.Advance(48 * time.Hour)
			return show(q2.Enqueue(ctx, Task{IdempotencyKey: "i"}))
		}},
		{"deps enqueue", func() string {
			// A parent on its last attempt, and dependents with each policy;
			// the last waits for two of them.
			res, err := dq.EnqueueBatch(ctx, []Task{{MaxAttempts: 1}, {DependsOnSibling: []int{0}},
				{DependsOnSibling: []int{0}, OnParentFailure: WaitOnFailure},
				{DependsOnSibling: []int{1, 2}, OnParentFailure: RunOnFailure, Delay: time.Hour}})
			deps = res
			return show(res, err)
		}},
		{"deps get", func() string { return show(dq.Get(ctx, deps[3].ID)) }},
		{"deps claim parent", func() string { return claim(dq, 5) }},
		{"deps parent lease expires", func() string {
			clock.Advance(2 * time.Minute)
			// Any commit first stores the death and applies the policies.
			return show(kv.Commit(ctx, Set("tick", nil)))
		}},
		{"deps counts", func() string { return show(dq.Counts(ctx)) }},
		{"deps waiting", func() string { return show(dq.List(ctx, ListOptions{State: Waiting})) }},
		{"deps unknown", func() string { return show(dq.Enqueue(ctx, Task{DependsOn: []uint64{1 << 40}})) }},
		{"deps on dead", func() string { return show(dq.Enqueue(ctx, Task{DependsOn: []uint64{deps[0].ID}})) }},
		{"deps redrive and complete", func() string {
			if err := dq.Redrive(ctx, deps[0].ID); err != nil {
				return show(nil, err)
			}
			claim(dq, 1)
			return show(dq.Complete(ctx, leases[len(leases)-1], Done{}))
		}},
		{"deps claim released", func() string { return claim(dq, 5) }},
		{"deps complete last", func() string { return show(dq.Complete(ctx, leases[len(leases)-1], Done{})) }},
		{"deps scheduled", func() string { return show(dq.Get(ctx, deps[3].ID)) }},
		{"deps complete and claim", func() string {
			// The completion releases a dependent of the same queue, ready
			// in that commit, though not among the tasks its claim leases.
			dq2 := api.Queue(ns, "deps2")
			p, _ := dq2.Enqueue(ctx, Task{})
			c, _ := dq2.Enqueue(ctx, Task{DependsOn: []uint64{p.ID}})
			ls, _ := dq2.Claim(ctx, "w", time.Minute, 1)
			leases = append(leases, ls...)
			if len(ls) == 0 {
				return "nothing to claim"
			}
			res, next, err := dq2.CompleteAndClaim(ctx, ls[0], Done{}, "w", time.Minute, 5)
			leases = append(leases, next...)
			info, gerr := dq2.Get(ctx, c.ID)
			return show(res, err) + show(next, nil) + show(info.State, gerr)
		}},
		{"search", func() string { return show(dq.Search(ctx, SearchOptions{Count: true, Newest: true})) }},
		{"bulk run now", func() string { return show(dq.Bulk(ctx, Filter{States: []State{Scheduled}}, BulkRunNow)) }},
		{"bulk cancel", func() string { return show(api.Queue(ns, "deps2").Bulk(ctx, Filter{}, BulkCancel)) }},
		{"bulk retry", func() string { return show(api.Queue(ns, "q").Bulk(ctx, Filter{}, BulkRetry)) }},
		{"bulk invalid", func() string { return show(dq.Bulk(ctx, Filter{MinID: 5, MaxID: 1}, BulkDelete)) }},
		{"queues", func() string { return show(api.Queues(ctx)) }},
	}
}

// TestReplicatedMatchesStandalone runs one workload over every write and
// read against a standalone DB and against three replicated DBs on one
// log (lease secrets from one seed in both): every answer is the same, and
// after every step every member holds the standalone DB's state, byte for
// byte. Calls refused by validation never reach the log.
func TestReplicatedMatchesStandalone(t *testing.T) {
	t.Parallel()
	for _, retain := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprintf("retain=%v", retain), func(t *testing.T) {
			sclock, rclock := NewManualClock(t0), NewManualClock(t0)
			opts := func(c Clock) Options {
				return Options{Clock: c, RetainCompleted: retain, IdempotencyTTL: time.Hour, Logger: quiet}
			}
			solo, err := OpenInMemory(opts(sclock))
			if err != nil {
				t.Fatal(err)
			}
			defer solo.Close()
			solo.c.entropy = func() uint64 { return 42 }
			l := newLocalLog(t, 3, func(int) Options { return opts(rclock) })
			sSteps, rSteps := script(solo, sclock), script(l.members[0].db, rclock)
			for i := range sSteps {
				before := l.len()
				want, got := sSteps[i].do(), rSteps[i].do()
				if got != want {
					t.Fatalf("%s: replicated answer\n%s\nstandalone\n%s", sSteps[i].name, got, want)
				}
				if strings.HasSuffix(sSteps[i].name, "invalid") && l.len() != before {
					t.Fatalf("%s: a call refused by validation reached the log", sSteps[i].name)
				}
				l.sameState(t, solo, sSteps[i].name)
			}
			if s := solo.Stats(); s.Seq == 0 || l.members[2].db.Stats().Commits != s.Commits {
				t.Fatalf("commits: standalone %+v, member 2 %+v", s, l.members[2].db.Stats())
			}
		})
	}
}

// TestReplicatedPlansWithSubmittersOptions: members configured with other
// retention and idempotency options still apply the same batches, because
// those options travel with each command.
func TestReplicatedPlansWithSubmittersOptions(t *testing.T) {
	t.Parallel()
	clock := NewManualClock(t0)
	l := newLocalLog(t, 3, func(i int) Options {
		o := Options{Clock: clock}
		if i == 0 {
			o.RetainCompleted, o.IdempotencyTTL = time.Hour, time.Minute
		}
		return o
	})
	steps := script(l.members[0].db, clock)
	for _, s := range steps {
		s.do()
		l.sameState(t, l.members[0].db, s.name)
	}
}

// stepBack is a clock a test sets anywhere, backwards too.
type stepBack struct {
	mu  sync.Mutex
	now time.Time
	*ManualClock
}

func (c *stepBack) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepBack) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// TestReplicatedTimeNeverGoesBack: a new leader whose clock is an hour
// behind cannot move time backwards: its commands plan at the last applied
// time, so a lease granted by the old leader does not expire early, a new
// timer is not due before the old leader's now, and a heartbeat extends
// from the applied time.
func TestReplicatedTimeNeverGoesBack(t *testing.T) {
	t.Parallel()
	fast := &stepBack{now: t0.Add(time.Hour), ManualClock: NewManualClock(t0)}
	slow := &stepBack{now: t0, ManualClock: NewManualClock(t0)}
	l := newLocalLog(t, 3, func(i int) Options {
		if i == 0 {
			return Options{Clock: fast}
		}
		return Options{Clock: slow}
	})
	a, b := l.members[0].db.Queue(ns, "q"), l.members[1].db.Queue(ns, "q")
	if _, err := a.Enqueue(ctx, Task{}); err != nil {
		t.Fatal(err)
	}
	ls, err := a.Claim(ctx, "w", 30*time.Second, 1)
	if err != nil || len(ls) != 1 {
		t.Fatalf("claim: %v %v", ls, err)
	}
	lease := ls[0]
	if want := t0.Add(time.Hour + 30*time.Second); !lease.Deadline.Equal(want) {
		t.Fatalf("deadline %v, want %v", lease.Deadline, want)
	}
	l.setLeader(1)
	res, err := b.Enqueue(ctx, Task{Delay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got := getInfo(t, b, res.ID); !got.NotBefore.Equal(t0.Add(time.Hour+time.Second)) || !got.CreatedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("timer on the slow leader: created %v, due %v", got.CreatedAt, got.NotBefore)
	}
	// The lease is not expired on the slow leader, though its clock is past
	// nothing: nothing is reclaimed, and the old holder's heartbeat extends
	// from the applied time.
	slow.set(t0.Add(10 * time.Minute))
	if ls, err := b.Claim(ctx, "thief", time.Minute, 5); err != nil || len(ls) != 0 {
		t.Fatalf("slow leader claimed %v (%v): the lease expired early", ls, err)
	}
	if err := b.Heartbeat(ctx, &lease, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(time.Hour + time.Minute); !lease.Deadline.Equal(want) {
		t.Fatalf("heartbeat deadline %v, want %v", lease.Deadline, want)
	}
	for _, m := range l.members {
		if now := m.db.c.store.Now(); now != t0.Add(time.Hour).UnixMicro() {
			t.Fatalf("member %d applied time %v, want the old leader's", m.i, timeOf(now))
		}
	}
	// Once the slow clock passes the lease, it is reclaimed.
	slow.set(t0.Add(time.Hour + 2*time.Minute))
	if ls, err := b.Claim(ctx, "next", time.Minute, 1); err != nil || len(ls) != 1 || ls[0].ID != lease.ID || ls[0].Token != lease.Token+1 {
		t.Fatalf("after the lease: %v %v", ls, err)
	}
	l.sameState(t, l.members[0].db, "end")
}

func getInfo(t *testing.T, q Queue, id uint64) TaskInfo {
	t.Helper()
	info, err := q.Get(ctx, id)
	if err != nil {
		t.Fatalf("get %d: %v", id, err)
	}
	return info
}

// TestReplicatedReadsAndWritesNeedTheLeader: a follower refuses writes and
// linearizable reads with ErrNotLeader, logging nothing; with
// WithStaleReads it serves reads from its own state.
func TestReplicatedReadsAndWritesNeedTheLeader(t *testing.T) {
	t.Parallel()
	l := newLocalLog(t, 2, func(int) Options { return Options{Clock: NewManualClock(t0)} })
	lead, fol := l.members[0].db, l.members[1].db
	res, err := lead.Queue(ns, "q").Enqueue(ctx, Task{})
	if err != nil {
		t.Fatal(err)
	}
	fq := fol.Queue(ns, "q")
	n := l.len()
	if _, err := fq.Enqueue(ctx, Task{}); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("follower enqueue: %v", err)
	}
	if _, err := fol.KV(ns).Commit(ctx, Set("k", nil)); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("follower commit: %v", err)
	}
	if l.len() != n {
		t.Fatal("a follower's refused write reached the log")
	}
	if _, err := fq.Get(ctx, res.ID); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("follower read: %v", err)
	}
	if _, err := fol.Queues(ctx); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("follower Queues: %v", err)
	}
	stale := WithStaleReads(ctx)
	if !StaleReads(stale) || StaleReads(ctx) {
		t.Fatal("StaleReads does not report WithStaleReads")
	}
	if info, err := fq.Get(stale, res.ID); err != nil || info.ID != res.ID {
		t.Fatalf("stale read: %v %v", info, err)
	}
	if n, err := fq.Counts(stale); err != nil || n.Ready != 1 {
		t.Fatalf("stale counts: %v %v", n, err)
	}
	if _, err := lead.Queue(ns, "q").Get(ctx, res.ID); err != nil {
		t.Fatalf("leader read: %v", err)
	}
	l.mu.Lock()
	l.fail = fmt.Errorf("%w: lost the leadership", ErrOutcomeUnknown)
	l.mu.Unlock()
	if _, err := lead.Queue(ns, "q").Enqueue(ctx, Task{}); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("enqueue whose outcome is unknown: %v", err)
	}
}

// TestReplicatedClaimWait: a ClaimWait on the leader parks before it
// submits its claim, so it is woken by an enqueue committed after its claim,
// even one committed before it got its answer; with nothing due it learns
// when the next timer is, to wait for it.
func TestReplicatedClaimWait(t *testing.T) {
	t.Parallel()
	clock := NewManualClock(t0)
	l := newLocalLog(t, 3, func(int) Options { return Options{Clock: clock} })
	db := l.members[0].db
	q := db.Queue(ns, "q")
	claimed := make(chan struct{}, 8)
	l.afterApply = func(l *localLog, entry []byte) {
		var cmd command
		if decodeCommand(entry, &cmd) == nil && cmd.Op() == machine.CmdClaim {
			claimed <- struct{}{}
		}
	}
	wait := func() <-chan []Lease {
		out := make(chan []Lease, 1)
		go func() {
			ls, err := q.ClaimWait(ctx, "w", time.Minute, 1)
			if err != nil {
				t.Error(err)
			}
			out <- ls
		}()
		return out
	}
	got := wait()
	recv(t, claimed) // its claim found nothing, and it was parked before that
	if _, err := q.Enqueue(ctx, Task{}); err != nil {
		t.Fatal(err)
	}
	if ls := recv(t, got); len(ls) != 1 {
		t.Fatalf("woken by an enqueue: %v", ls)
	}
	recv(t, claimed)

	// With only a timer, the claim says when it comes due.
	res, err := q.Enqueue(ctx, Task{Delay: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ls, s, err := q.(*queue).claim(ctx, "w", time.Minute.Microseconds(), 1, true, nil)
	recv(t, claimed)
	if err != nil || len(ls) != 0 || s == nil || s.due != t0.Add(time.Minute).UnixMicro() {
		t.Fatalf("claim with a timer: %v %v %v", ls, s, err)
	}
	db.c.leave(s)
	if err := q.Cancel(ctx, res.ID); err != nil {
		t.Fatal(err)
	}

	// An enqueue committed right after the claim, before the call has its
	// answer.
	l.mu.Lock()
	l.afterApply = func(l *localLog, entry []byte) {
		var cmd command
		if decodeCommand(entry, &cmd) == nil && cmd.Op() == machine.CmdClaim {
			l.afterApply = nil
			e := command{NS: ns, Queue: "q", Now: t0.UnixMicro(), Args: &machine.Enqueue{Task: spec{MaxAttempts: 5}}}
			l.appendLocked(must(e.Encode()), nil)
		}
	}
	l.mu.Unlock()
	if ls := recv(t, wait()); len(ls) != 1 {
		t.Fatalf("woken by a commit between claim and park: %v", ls)
	}
	l.sameState(t, db, "end")
}

// recv receives from ch, failing the test if nothing comes within 10 s.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing arrived within 10 s")
		panic("unreachable")
	}
}

// TestReplicatedRestore: a member that missed entries is brought up to
// date from another's image and then follows the log; its state equals the
// others'. A damaged stream changes nothing.
func TestReplicatedRestore(t *testing.T) {
	t.Parallel()
	clock := NewManualClock(t0)
	l := newLocalLog(t, 3, func(int) Options { return Options{Clock: clock} })
	lag := l.members[2]
	lag.down = true
	steps := script(l.members[0].db, clock)
	for _, s := range steps[:len(steps)/2] {
		s.do()
	}
	img, err := l.members[1].db.Image()
	if err != nil {
		t.Fatal(err)
	}
	var snap bytes.Buffer
	if _, err := img.WriteTo(&snap); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if _, err := img.WriteTo(&again); err != nil || !bytes.Equal(again.Bytes(), snap.Bytes()) {
		t.Fatalf("an image writes other bytes the second time (%v)", err)
	}
	// The lagging member holds a state of its own, which a restore must
	// discard; every damaged stream is refused and leaves it.
	own := command{NS: NS("other", "space"), Queue: "mine", Now: t0.Add(time.Hour).UnixMicro(), Args: &machine.Enqueue{Task: spec{MaxAttempts: 5}}}
	if err := lag.db.ApplyCommand(must(own.Encode())).Err(); err != nil {
		t.Fatal(err)
	}
	before, _ := lag.db.StateHash()
	data := snap.Bytes()
	for _, cut := range []int{0, 1, 20, len(data) / 2, len(data) - 1} {
		if err := lag.db.Restore(bytes.NewReader(data[:cut])); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("restore of %d of %d bytes: %v", cut, len(data), err)
		}
	}
	flipped := bytes.Clone(data)
	flipped[len(flipped)/2] ^= 0x10
	if err := lag.db.Restore(bytes.NewReader(flipped)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("restore of a flipped stream: %v", err)
	}
	if h, _ := lag.db.StateHash(); h != before {
		t.Fatal("a refused restore changed the state")
	}
	if err := lag.db.Restore(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	lag.down, lag.applied = false, len(l.entries)
	l.mu.Unlock()
	for _, s := range steps[len(steps)/2:] {
		s.do()
	}
	l.sameState(t, l.members[0].db, "after restore")

	solo, _ := OpenInMemory(Options{})
	defer solo.Close()
	if err := solo.Restore(bytes.NewReader(data)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("restore of a standalone DB: %v", err)
	}
	if err := lag.db.As(Caller{ID: "x"}).Restore(bytes.NewReader(data)); !errors.Is(err, ErrPermission) {
		t.Fatalf("restore through a caller view: %v", err)
	}
}

// TestApplyCommandRefuses: a caller view and a standalone DB cannot apply
// commands; bytes that are not a command are an ErrCorrupt answer that
// changes nothing; a command of an unknown version stops the DB.
func TestApplyCommandRefuses(t *testing.T) {
	t.Parallel()
	l := newLocalLog(t, 1, func(int) Options { return Options{Clock: NewManualClock(t0)} })
	db := l.members[0].db
	cmd := command{NS: ns, Queue: "q", Now: t0.UnixMicro(), Args: &machine.Enqueue{Task: spec{MaxAttempts: 5}}}
	data := must(cmd.Encode())
	if err := db.As(Caller{ID: "x"}).ApplyCommand(data).Err(); !errors.Is(err, ErrPermission) {
		t.Fatalf("through a view: %v", err)
	}
	solo, _ := OpenInMemory(Options{})
	defer solo.Close()
	if err := solo.ApplyCommand(data).Err(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("standalone: %v", err)
	}
	before, _ := db.StateHash()
	for cut := range len(data) {
		if err := db.ApplyCommand(data[:cut]).Err(); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
	if h, _ := db.StateHash(); h != before {
		t.Fatal("an undecodable command changed the state")
	}
	if a := db.ApplyCommand(data); a.Err() != nil || a.res.Enq.ID != 1 {
		t.Fatalf("apply: %+v", a)
	}
	if err := db.ApplyCommand(append([]byte{9}, data[1:]...)).Err(); !errors.Is(err, ErrFailed) {
		t.Fatalf("unknown version: %v", err)
	}
	if err := db.Err(); !errors.Is(err, ErrFailed) {
		t.Fatalf("after an unknown version the DB reports %v", err)
	}
	if _, err := OpenReplicated(Options{}, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("OpenReplicated without a log: %v", err)
	}
}

// matchStandalone runs the steps that steps builds, once on a standalone
// in-memory DB and once on the first of three replicated members (each
// with a manual clock of its own, and the same lease secrets), side by
// side: after every step both must have given the same answer and hold the
// same state. Before step restoreAt (-1: never) the third member restores
// from the second's image, and goes on applying the log from there.
func matchStandalone(t *testing.T, restoreAt int, steps func(api API, clock *ManualClock) []func() string) {
	t.Helper()
	sclock, rclock := NewManualClock(t0), NewManualClock(t0)
	solo, err := OpenInMemory(Options{Clock: sclock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer solo.Close()
	solo.c.entropy = func() uint64 { return 42 }
	l := newLocalLog(t, 3, func(int) Options { return Options{Clock: rclock} })
	s, r := steps(solo, sclock), steps(l.members[0].db, rclock)
	for i := range s {
		if i == restoreAt {
			img, err := l.members[1].db.Image()
			if err != nil {
				t.Fatal(err)
			}
			var snap bytes.Buffer
			if _, err := img.WriteTo(&snap); err != nil {
				t.Fatal(err)
			}
			if err := l.members[2].db.Restore(&snap); err != nil {
				t.Fatal(err)
			}
		}
		want, got := s[i](), r[i]()
		if got != want {
			t.Fatalf("step %d: replicated answer\n%s\nstandalone\n%s", i, got, want)
		}
		l.sameState(t, solo, fmt.Sprintf("step %d", i))
	}
}
