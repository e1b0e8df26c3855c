package engine

import (
	"testing"
	"time"
)

// TestWatchLease: a watch fires once when its task is cancelled, not after
// stop, not for another task; a view without the work permission and bad
// arguments are refused.
func TestWatchLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	a, b := e.enqueue(q, Task{}), e.enqueue(q, Task{})
	ls := e.claim(q, 2)
	fired := map[uint64]int{}
	stopA, err := e.db.WatchLease(ls[0], func() { fired[a]++ })
	if err != nil {
		t.Fatal(err)
	}
	stopB, err := e.db.WatchLease(ls[1], func() { fired[b]++ })
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Cancel(ctx, a); err != nil {
		t.Fatal(err)
	}
	stopA() // after it fired: harmless
	stopB()
	if err := q.Cancel(ctx, b); err != nil {
		t.Fatal(err)
	}
	if fired[a] != 1 || fired[b] != 0 {
		t.Fatalf("fired %v", fired)
	}
	if n := len(e.db.c.watch.m); n != 0 {
		t.Fatalf("%d watches kept", n)
	}

	_, err = e.db.WatchLease(ls[0], nil)
	wantErr(t, err, ErrInvalid)
	_, err = e.db.WatchLease(Lease{ID: 1}, func() {})
	wantErr(t, err, ErrInvalid)
	e2 := newEnv(t, true, func(o *Options) {
		o.Authorizer = Policy{"reader": {{Project: "*", Scope: "*", Perms: PermRead}}}
	})
	_, err = e2.db.As(Caller{ID: "reader"}).WatchLease(Lease{ID: 1, Namespace: ns, Deadline: t0.Add(time.Minute)}, func() {})
	wantErr(t, err, ErrPermission)
}
