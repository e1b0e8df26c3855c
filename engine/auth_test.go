package engine

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var (
	nsA = NS("tenant-a", "prod")
	nsB = NS("tenant-b", "prod")
)

func policyEnv(t *testing.T, secure bool) *env {
	return newEnv(t, false, func(o *Options) {
		o.Secure = secure
		o.Authorizer = Policy{
			"alice":    {{Project: "tenant-a", Scope: "*", Perms: PermAll}},
			"producer": {{Project: "tenant-a", Scope: "prod", Perms: PermEnqueue}},
			"worker":   {{Project: "tenant-a", Scope: "prod", Perms: PermWork}},
			"reader":   {{Project: "*", Scope: "*", Perms: PermRead}},
		}
	})
}

func TestPermissionsPerCall(t *testing.T) {
	t.Parallel()
	e := policyEnv(t, false)
	producer := e.db.As(Caller{ID: "producer"})
	worker := e.db.As(Caller{ID: "worker"})
	q := func(d *DB) Queue { return d.Queue(nsA, "q") }

	if _, err := q(producer).Enqueue(ctx, Task{}); err != nil {
		t.Fatal(err)
	}
	// An enqueue with a KV write needs kv-write too, checked before planning.
	_, err := q(producer).Enqueue(ctx, Task{}, Set("k", nil))
	wantErr(t, err, ErrPermission)
	if !strings.Contains(err.Error(), "kv-write") || !strings.Contains(err.Error(), "tenant-a/prod") {
		t.Fatalf("error does not name the permission and namespace: %v", err)
	}
	_, err = q(producer).Claim(ctx, "w", time.Second, 1)
	wantErr(t, err, ErrPermission)
	ls, err := q(worker).Claim(ctx, "w", time.Second, 1)
	if err != nil || len(ls) != 1 {
		t.Fatal(err)
	}
	// Completing with a follow-up needs enqueue as well as work.
	_, err = q(worker).Complete(ctx, ls[0], Done{FollowUps: []FollowUp{{Queue: "next"}}})
	wantErr(t, err, ErrPermission)
	_, err = q(worker).Counts(ctx)
	wantErr(t, err, ErrPermission)
	wantErr(t, q(worker).Cancel(ctx, ls[0].ID), ErrPermission)
	if _, err := q(worker).Complete(ctx, ls[0], Done{}); err != nil {
		t.Fatal(err)
	}
	// Unknown callers are denied everything.
	_, err = q(e.db.As(Caller{ID: "mallory"})).Get(ctx, ls[0].ID)
	wantErr(t, err, ErrPermission)
	if got := e.db.Stats().Denied; got != 6 {
		t.Fatalf("denied count %d, want 6", got)
	}
	// Process-level calls are for the program, not for callers.
	wantErr(t, worker.Checkpoint(ctx), ErrPermission)
	wantErr(t, worker.Verify(), ErrPermission)
	wantErr(t, worker.Close(), ErrPermission)
	if worker.Stats() != (Stats{}) {
		t.Fatal("a caller view sees engine-wide stats")
	}
}

func TestSecureModeRefusesAnonymousCalls(t *testing.T) {
	t.Parallel()
	e := policyEnv(t, true)
	q := e.db.Queue(nsA, "q")
	_, err := q.Enqueue(ctx, Task{})
	wantErr(t, err, ErrPermission)
	_, err = q.Get(ctx, 1)
	wantErr(t, err, ErrPermission)
	_, err = q.List(ctx, ListOptions{State: Dead})
	wantErr(t, err, ErrPermission)
	_, err = q.Counts(ctx)
	wantErr(t, err, ErrPermission)
	_, err = e.db.KV(nsA).Get(ctx, "k")
	wantErr(t, err, ErrPermission)
	_, err = e.db.Queues(ctx)
	wantErr(t, err, ErrPermission)
	alice := e.db.As(Caller{ID: "alice"})
	if _, err := alice.Queue(nsA, "q").Enqueue(ctx, Task{}); err != nil {
		t.Fatal(err)
	}
	if n, err := alice.Queue(nsA, "q").Counts(ctx); err != nil || n.Ready != 1 {
		t.Fatal(n, err)
	}
	// The program itself still checkpoints and closes.
	if err := e.db.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestNamespaceIsolation: a caller with every right on tenant-a can neither
// read, change nor tell apart tasks and keys of tenant-b.
func TestNamespaceIsolation(t *testing.T) {
	t.Parallel()
	e := policyEnv(t, false)
	bq := e.db.Queue(nsB, "q")
	secret, _ := bq.Enqueue(ctx, Task{Payload: []byte(`"secret"`), IdempotencyKey: "k"})
	e.db.KV(nsB).Commit(ctx, Set("secret", []byte("b")))
	alice := e.db.As(Caller{ID: "alice"})
	aq := alice.Queue(nsA, "q")

	// Direct access to B is refused.
	_, err := alice.Queue(nsB, "q").Get(ctx, secret.ID)
	wantErr(t, err, ErrPermission)
	_, err = alice.KV(nsB).Get(ctx, "secret")
	wantErr(t, err, ErrPermission)
	// Through A's own queue, B's task is indistinguishable from a missing one.
	_, errB := aq.Get(ctx, secret.ID)
	_, errNone := aq.Get(ctx, 1<<40)
	wantErr(t, errB, ErrNotFound)
	if strings.ReplaceAll(errB.Error(), "1099511627776", "ID") != strings.ReplaceAll(errNone.Error(), "1099511627776", "ID") &&
		strings.Replace(errB.Error(), itoa(secret.ID), "ID", 1) != strings.Replace(errNone.Error(), "1099511627776", "ID", 1) {
		t.Fatalf("errors differ: %q vs %q", errB, errNone)
	}
	wantErr(t, aq.Cancel(ctx, secret.ID), ErrNotFound)
	wantErr(t, aq.Redrive(ctx, secret.ID), ErrNotFound)
	wantErr(t, errOnly(aq.Complete(ctx, Lease{ID: secret.ID, Token: 0}, Done{})), ErrLeaseLost)
	// Same idempotency key in A is a new task, not B's.
	r, err := aq.Enqueue(ctx, Task{IdempotencyKey: "k"})
	if err != nil || r.Deduplicated || r.ID == secret.ID {
		t.Fatalf("idempotency key crossed namespaces: %+v %v", r, err)
	}
	// Claims, lists, counts and scans of A never show B.
	ls, _ := aq.Claim(ctx, "w", time.Minute, 100)
	for _, l := range ls {
		if l.Namespace != nsA {
			t.Fatalf("claimed a task of %v", l.Namespace)
		}
	}
	if ents, _ := alice.KV(nsA).Scan(ctx, ScanOptions{}); len(ents) != 0 {
		t.Fatalf("scan shows %v", ents)
	}
	qs, _ := alice.Queues(ctx)
	for _, qi := range qs {
		if qi.Namespace != nsA {
			t.Fatalf("queue listing shows %v", qi.Namespace)
		}
	}
	// B is untouched.
	info, err := bq.Get(ctx, secret.ID)
	if err != nil || info.State != Ready || string(info.Payload) != `"secret"` {
		t.Fatalf("B changed: %+v %v", info, err)
	}
}

func itoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

func TestHostileInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	q := e.q("q")
	huge := strings.Repeat("n", 64<<10)
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	cases := []struct {
		name string
		call func() error
		ok   bool // the input is legal and must work
	}{
		{"64KiB queue name", func() error { _, err := e.db.Queue(ns, huge).Enqueue(ctx, Task{}); return err }, false},
		{"64KiB owner", func() error { _, err := q.Claim(ctx, huge, time.Second, 1); return err }, false},
		{"64KiB project", func() error { _, err := e.db.Queue(NS(huge, "s"), "q").Enqueue(ctx, Task{}); return err }, false},
		{"64KiB idempotency key", func() error { _, err := q.Enqueue(ctx, Task{IdempotencyKey: huge}); return err }, false},
		{"64KiB KV key", func() error { _, err := e.db.KV(ns).Commit(ctx, Set(huge, nil)); return err }, false},
		{"NUL in owner", func() error { _, err := q.Claim(ctx, "a\x00", time.Second, 1); return err }, false},
		{"invalid UTF-8 scope", func() error { _, err := e.db.Queue(NS("p", "\xc3\x28"), "q").Enqueue(ctx, Task{}); return err }, false},
		{"NUL and invalid UTF-8 in KV key", func() error { _, err := e.db.KV(ns).Commit(ctx, Set("a\x00\xff", []byte{0})); return err }, true},
		{"NUL in idempotency key", func() error { _, err := q.Enqueue(ctx, Task{IdempotencyKey: "\x00\xff"}); return err }, true},
		{"deeply nested JSON", func() error { _, err := q.Enqueue(ctx, Task{Payload: []byte(deep)}); return err }, false},
		{"nested JSON within limits", func() error {
			_, err := q.Enqueue(ctx, Task{Payload: []byte(strings.Repeat("[", 500) + strings.Repeat("]", 500))})
			return err
		}, true},
		{"max priority", func() error { _, err := q.Enqueue(ctx, Task{Priority: 1<<63 - 1}); return err }, true},
		{"min priority", func() error { _, err := q.Enqueue(ctx, Task{Priority: -1 << 63}); return err }, true},
		{"max int64 delay", func() error { _, err := q.Enqueue(ctx, Task{Delay: 1<<63 - 1}); return err }, false},
		{"min int64 delay", func() error { _, err := q.Enqueue(ctx, Task{Delay: -1 << 63}); return err }, false},
		{"max int64 lease", func() error { _, err := q.Claim(ctx, "w", 1<<63-1, 1); return err }, false},
		{"max int64 backoff", func() error { _, err := q.Enqueue(ctx, Task{BackoffMax: 1<<63 - 1}); return err }, false},
		{"max int64 retry after", func() error { return q.Fail(ctx, Lease{ID: 1}, Failure{RetryAfter: 1<<63 - 1}) }, false},
		{"far future at", func() error {
			_, err := q.Enqueue(ctx, Task{At: time.Date(20000, 1, 1, 0, 0, 0, 0, time.UTC)})
			return err
		}, false},
		{"max attempts over limit", func() error { _, err := q.Enqueue(ctx, Task{MaxAttempts: 1 << 40}); return err }, false},
		{"claim max at its limit", func() error { _, err := q.Claim(ctx, "w", time.Minute, MaxBatch); return err }, true},
		{"100,000 mutations", func() error {
			ops := make([]Op, 100000)
			for i := range ops {
				ops[i] = Set(itoa(uint64(i)), nil)
			}
			_, err := e.db.KV(ns).Commit(ctx, ops...)
			return err
		}, false},
		{"65 headers", func() error {
			h := map[string]string{}
			for i := range 65 {
				h[itoa(uint64(i))] = ""
			}
			_, err := q.Enqueue(ctx, Task{Headers: h})
			return err
		}, false},
		{"huge error text is cut", func() error {
			l, err := q.Claim(ctx, "w", time.Minute, 1)
			if err != nil || len(l) == 0 {
				e.enqueue(q, Task{})
				l, _ = q.Claim(ctx, "w", time.Minute, 1)
			}
			return q.Fail(ctx, l[0], Failure{Err: huge})
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := dump(e.db)
			err := c.call()
			if c.ok {
				if err != nil {
					t.Fatalf("legal input refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
			if len(err.Error()) > 400 {
				t.Fatalf("error echoes the input: %d bytes", len(err.Error()))
			}
			if dump(e.db) != before {
				t.Fatal("refused input changed state")
			}
		})
	}
	e.reopen()
}

func TestFollowUpFanOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	q := e.q("q")
	e.enqueue(q, Task{})
	l := e.claim(q, 1)[0]
	fan := make([]FollowUp, MaxOps)
	for i := range fan {
		fan[i] = FollowUp{Queue: "fan", Task: Task{Payload: []byte(`{"i":1}`)}}
	}
	if _, err := q.Complete(ctx, l, Done{FollowUps: append(fan, FollowUp{Queue: "fan"})}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("fan-out over the limit: %v", err)
	}
	if _, err := q.Complete(ctx, l, Done{FollowUps: fan}); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.q("fan").Counts(ctx); n.Ready != MaxOps {
		t.Fatalf("fan-out enqueued %d", n.Ready)
	}
	e.reopen()
}

// revocable is an Authorizer whose grants can be withdrawn while calls run.
type revocable struct {
	granted atomic.Bool
	perms   Perm
	asked   atomic.Int64
}

func (r *revocable) Allowed(_ Caller, _ Namespace, want Perm) Perm {
	r.asked.Add(1)
	if !r.granted.Load() {
		return 0
	}
	return r.perms & want
}

// TestClaimWaitRechecksOnWake: a claim parked before its grant is revoked
// gets ErrPermission when work arrives, not the work.
func TestClaimWaitRechecksOnWake(t *testing.T) {
	t.Parallel()
	auth := &revocable{perms: PermWork}
	auth.granted.Store(true)
	e := newEnv(t, true, func(o *Options) { o.Authorizer = auth })
	q := e.db.As(Caller{ID: "w"}).Queue(ns, "q")
	ch := parkClaim(q, ctx)
	waitParked(t, e, q, 1)
	auth.granted.Store(false)
	id := e.enqueue(e.q("q"), Task{})
	select {
	case r := <-ch:
		if !errors.Is(r.err, ErrPermission) || len(r.ls) != 0 {
			t.Fatalf("revoked parked claim got %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("parked claim never woke")
	}
	if info := e.get(e.q("q"), id); info.State != Ready {
		t.Fatalf("task leased to a revoked caller: %v", info.State)
	}
	// Every later claim asks again: refused while revoked, served once the
	// grant is back.
	_, err := q.Claim(ctx, "w", time.Minute, 1)
	wantErr(t, err, ErrPermission)
	auth.granted.Store(true)
	if ls, err := q.Claim(ctx, "w", time.Minute, 1); err != nil || len(ls) != 1 || ls[0].ID != id {
		t.Fatalf("claim after the grant came back: %v %v", ls, err)
	}
	if got := e.db.Stats().Denied; got != 2 {
		t.Fatalf("denied %d, want 2", got)
	}
}

// TestViewKeepsIdentity: a view cannot become another caller.
func TestViewKeepsIdentity(t *testing.T) {
	t.Parallel()
	e := policyEnv(t, false)
	low := e.db.As(Caller{ID: "producer"})
	esc := low.As(Caller{ID: "alice"})
	_, err := esc.Queue(nsA, "q").Claim(ctx, "w", time.Minute, 1)
	wantErr(t, err, ErrPermission)
	if !strings.Contains(err.Error(), "another caller") {
		t.Fatalf("unclear error: %v", err)
	}
	_, err = esc.KV(nsA).Get(ctx, "k")
	wantErr(t, err, ErrPermission)
	_, err = esc.Queues(ctx)
	wantErr(t, err, ErrPermission)
	wantErr(t, esc.Close(), ErrPermission)
	// Even what the original view may do is refused through the new one,
	// and the original keeps working.
	_, err = esc.Queue(nsA, "q").Enqueue(ctx, Task{})
	wantErr(t, err, ErrPermission)
	if _, err := low.Queue(nsA, "q").Enqueue(ctx, Task{}); err != nil {
		t.Fatal(err)
	}
	// A view of a view of a view stays refused.
	_, err = esc.As(Caller{ID: "alice"}).Queue(nsA, "q").Counts(ctx)
	wantErr(t, err, ErrPermission)
	if esc.Stats() != (Stats{}) {
		t.Fatal("a refused view sees engine-wide stats")
	}
}

func TestCallerIDValidated(t *testing.T) {
	t.Parallel()
	auth := &revocable{perms: PermAll}
	auth.granted.Store(true)
	e := newEnv(t, true, func(o *Options) { o.Authorizer = auth })
	huge := strings.Repeat("\x00x", 512<<10) // 1 MiB with NUL bytes
	for name, id := range map[string]string{
		"empty":         "",
		"1 MiB":         huge,
		"257 bytes":     strings.Repeat("a", 257),
		"256 bytes":     strings.Repeat("a", 256),
		"invalid UTF-8": "a\xffb",
		"NUL":           "a\x00",
		"newline":       "a\nb",
		"DEL":           "a\x7f",
		"C1 control":    "a\u0085",
	} {
		t.Run(name, func(t *testing.T) {
			v := e.db.As(Caller{ID: id})
			before := dump(e.db)
			_, err := v.Queue(ns, "q").Enqueue(ctx, Task{})
			wantErr(t, err, ErrInvalid)
			if len(err.Error()) > 200 || strings.Contains(err.Error(), "\x00") {
				t.Fatalf("error echoes the id: %.200q", err.Error())
			}
			_, err = v.KV(ns).Commit(ctx, Set("k", nil))
			wantErr(t, err, ErrInvalid)
			_, err = v.Queues(ctx)
			wantErr(t, err, ErrInvalid)
			wantErr(t, v.Checkpoint(ctx), ErrInvalid)
			if dump(e.db) != before {
				t.Fatal("a refused caller changed state")
			}
		})
	}
	if got := e.db.Stats().Denied; got != 0 {
		t.Fatalf("invalid ids counted as %d denials", got)
	}
	// The longest and the unusual legal ids work.
	for _, id := range []string{strings.Repeat("a", MaxNameBytes), "*", "user@example.com", "ünï çødé", "a b"} {
		if _, err := e.db.As(Caller{ID: id}).Queue(ns, "q").Enqueue(ctx, Task{}); err != nil {
			t.Fatalf("id %q: %v", id, err)
		}
	}
}

// TestCallerValidate: Caller.Validate, which programs that store caller ids
// call where they write one, refuses exactly the ids As refuses.
func TestCallerValidate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	for _, id := range []string{"", strings.Repeat("a", 256), "a\xffb", "a\x00", "a\nb", "a\u0085",
		strings.Repeat("a", MaxNameBytes), "*", "ünï çødé", "a b"} {
		err := Caller{ID: id}.Validate()
		_, viewErr := e.db.As(Caller{ID: id}).Queues(ctx)
		if (err == nil) != (viewErr == nil) {
			t.Fatalf("id %.40q: Validate says %v, a view says %v", id, err, viewErr)
		}
		if err != nil {
			wantErr(t, err, ErrInvalid)
		}
	}
	if err := (Caller{ID: strings.Repeat("a", 256)}).Validate(); err == nil || !strings.Contains(err.Error(), "256 bytes") {
		t.Fatalf("a 256-byte id: %v", err)
	}
}

// TestProcessCallRefusalsCounted: refused Close, Checkpoint and Verify are
// denials like any other.
func TestProcessCallRefusalsCounted(t *testing.T) {
	t.Parallel()
	var obs deniedObserver
	e := newEnv(t, true, func(o *Options) {
		o.Observer = &obs
		o.Authorizer = Policy{"alice": {{Project: "*", Scope: "*", Perms: PermAll}}}
	})
	v := e.db.As(Caller{ID: "alice"})
	wantErr(t, v.Close(), ErrPermission)
	wantErr(t, v.Checkpoint(ctx), ErrPermission)
	wantErr(t, v.Verify(), ErrPermission)
	if got := e.db.Stats().Denied; got != 3 {
		t.Fatalf("denied %d, want 3", got)
	}
	if got := obs.n.Load(); got != 3 {
		t.Fatalf("observer saw %d denials, want 3", got)
	}
	if err := e.db.Verify(); err != nil {
		t.Fatal(err)
	}
}

type deniedObserver struct{ n atomic.Int64 }

func (o *deniedObserver) Synced(time.Duration, int) {}
func (o *deniedObserver) Snapshot(SnapshotEvent)    {}

func (o *deniedObserver) TaskEvents(evs []TaskEvent) {
	for _, ev := range evs {
		if ev.Kind == EvDenied {
			o.n.Add(1)
		}
	}
}

// countingPolicy is a Policy that counts the questions it is asked.
type countingPolicy struct {
	Policy
	asked atomic.Int64
}

func (p *countingPolicy) Allowed(c Caller, ns Namespace, want Perm) Perm {
	p.asked.Add(1)
	return p.Policy.Allowed(c, ns, want)
}

// countingOpaque counts the questions it is asked and cannot list grants.
type countingOpaque struct{ p *countingPolicy }

func (o countingOpaque) Allowed(c Caller, ns Namespace, want Perm) Perm {
	return o.p.Allowed(c, ns, want)
}

// TestQueuesDecidesPerNamespace: listing queues asks the Authorizer once per
// namespace, however many queues another tenant holds, and, when it lists
// grants, only about the namespaces the caller's grants match.
func TestQueuesDecidesPerNamespace(t *testing.T) {
	t.Parallel()
	auth := &countingPolicy{Policy: Policy{"a": {{Project: "tenant-a", Scope: "*", Perms: PermRead}}}}
	var opaque Authorizer = countingOpaque{auth}
	e := newEnv(t, true, func(o *Options) { o.Authorizer = auth })
	many := 50_000
	if testing.Short() {
		many = 2_000 // as many asks for 2,000 queues as for 50,000
	}
	for i := 0; i < many; i += MaxOps {
		ops := make([]Op, min(MaxOps, many-i))
		for j := range ops {
			ops[j] = Enqueue("q"+itoa(uint64(i+j)), Task{})
		}
		if _, err := e.db.KV(nsB).Commit(ctx, ops...); err != nil {
			t.Fatal(err)
		}
	}
	e.enqueue(e.db.Queue(nsA, "mine"), Task{})

	for _, c := range []struct {
		name              string
		a                 Authorizer
		nobodyAsks, aAsks int64
	}{{"grants", auth, 0, 1}, {"opaque", opaque, 2, 2}} {
		e.db.c.opts.Authorizer = c.a
		qs, err := e.db.As(Caller{ID: "nobody"}).Queues(ctx)
		if err != nil || len(qs) != 0 {
			t.Fatalf("%s: a caller with no grant sees %d queues (%v)", c.name, len(qs), err)
		}
		if n := auth.asked.Swap(0); n != c.nobodyAsks {
			t.Fatalf("%s: authorizer asked %d times for a caller with no grant, want %d", c.name, n, c.nobodyAsks)
		}
		qs, err = e.db.As(Caller{ID: "a"}).Queues(ctx)
		if err != nil || len(qs) != 1 || qs[0].Namespace != nsA || qs[0].Name != "mine" || qs[0].Counts.Ready != 1 {
			t.Fatalf("%s: tenant-a sees %+v (%v)", c.name, qs, err)
		}
		if n := auth.asked.Swap(0); n != c.aAsks {
			t.Fatalf("%s: authorizer asked %d times for tenant-a, want %d", c.name, n, c.aAsks)
		}
	}
	// A listing is not a refusal: nothing is counted as denied.
	if got := e.db.Stats().Denied; got != 0 {
		t.Fatalf("denied %d", got)
	}
	if qs, _ := e.db.Queues(ctx); len(qs) != many+1 {
		t.Fatalf("the program sees %d queues", len(qs))
	}
}
