package engine

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func prio(p int) *int { return &p }

// TestReschedule: a scheduled task moved to now is served first by its new
// priority, a ready one moved later waits, the payload (in the value log)
// and the attempt count stay, and the state survives a reopen.
func TestReschedule(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.ValueThreshold = 1024; o.RetainCompleted = time.Hour })
	q := e.q("jobs")
	big := []byte(`"` + strings.Repeat("x", 4000) + `"`)
	early := e.enqueue(q, Task{Priority: 1})
	late := e.enqueue(q, Task{Delay: time.Hour, Payload: big})
	if err := q.Reschedule(ctx, late, Reschedule{At: t0, Priority: prio(9)}); err != nil {
		t.Fatal(err)
	}
	if err := q.Reschedule(ctx, early, Reschedule{At: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if info := e.get(q, early); info.State != Scheduled || !info.NotBefore.Equal(t0.Add(time.Minute)) || info.Priority != 1 {
		t.Fatalf("moved later: %+v", info)
	}
	e.reopen()
	ls := e.claim(q, 10)
	if len(ls) != 1 || ls[0].ID != late || ls[0].Priority != 9 || !bytes.Equal(ls[0].Payload, big) {
		t.Fatalf("claimed %v", ids(ls))
	}
	if _, err := q.Complete(ctx, ls[0], Done{}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	if ls := e.claim(q, 10); len(ls) != 1 || ls[0].ID != early {
		t.Fatalf("claimed %v at the new time", ids(ls))
	}
}

// TestRescheduleRefuses: a task in flight, dead or completed is a conflict
// naming its state; bad input is ErrInvalid; a task of another queue is not
// found; none of them changes anything.
func TestRescheduleRefuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, func(o *Options) { o.RetainCompleted = time.Hour })
	q := e.q("jobs")
	a := e.enqueue(q, Task{})
	b := e.enqueue(q, Task{})
	c := e.enqueue(q, Task{})
	timer := e.enqueue(q, Task{Delay: time.Hour})
	ls := e.claim(q, 3)
	soon := Reschedule{At: t0.Add(time.Minute)}
	for _, st := range []struct {
		id   uint64
		name string
	}{{a, "in-flight"}} {
		err := q.Reschedule(ctx, st.id, soon)
		wantErr(t, err, ErrConflict)
		if !strings.Contains(err.Error(), st.name) {
			t.Fatalf("error does not name the state %s: %v", st.name, err)
		}
	}
	if _, err := q.Complete(ctx, ls[1], Done{}); err != nil {
		t.Fatal(err)
	}
	if err := q.Fail(ctx, ls[2], Failure{Permanent: true}); err != nil {
		t.Fatal(err)
	}
	for id, name := range map[uint64]string{b: "completed", c: "dead"} {
		err := q.Reschedule(ctx, id, soon)
		wantErr(t, err, ErrConflict)
		if !strings.Contains(err.Error(), name) {
			t.Fatalf("error does not name the state %s: %v", name, err)
		}
	}
	before := dump(e.db)
	for _, r := range []Reschedule{
		{},
		{At: time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)},
		{At: time.Unix(0, 0)},
		{At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Priority: prio(1)},
	} {
		wantErr(t, q.Reschedule(ctx, timer, r), ErrInvalid)
	}
	wantErr(t, q.Reschedule(ctx, 999, soon), ErrNotFound)
	wantErr(t, e.q("other").Reschedule(ctx, timer, soon), ErrNotFound)
	if after := dump(e.db); after != before {
		t.Fatalf("a refused reschedule changed the state:\n%s\n%s", before, after)
	}
}

// TestRescheduleNeedsAdmin: rescheduling needs the permission RunNow does.
func TestRescheduleNeedsAdmin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, func(o *Options) {
		o.Authorizer = Policy{"w": {{Project: "*", Scope: "*", Perms: PermWork | PermEnqueue | PermRead}}}
	})
	id := e.enqueue(e.q("jobs"), Task{Delay: time.Hour})
	err := e.db.As(Caller{ID: "w"}).Queue(ns, "jobs").Reschedule(ctx, id, Reschedule{Priority: prio(3)})
	wantErr(t, err, ErrPermission)
	if info := e.get(e.q("jobs"), id); info.Priority != 0 {
		t.Fatal("a refused Reschedule changed the task")
	}
}

// TestRescheduleWaiting: a waiting task keeps waiting for its dependency,
// then is due at its new time with its new priority.
func TestRescheduleWaiting(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("jobs")
	parent := e.enqueue(q, Task{})
	child := e.enqueue(q, Task{DependsOn: []uint64{parent}})
	if err := q.Reschedule(ctx, child, Reschedule{At: t0.Add(time.Minute), Priority: prio(5)}); err != nil {
		t.Fatal(err)
	}
	if info := e.get(q, child); info.State != Waiting || info.Priority != 5 {
		t.Fatalf("waiting task after reschedule: %+v", info)
	}
	ls := e.claim(q, 10)
	if len(ls) != 1 || ls[0].ID != parent {
		t.Fatalf("claimed %v", ids(ls))
	}
	if _, err := q.Complete(ctx, ls[0], Done{}); err != nil {
		t.Fatal(err)
	}
	if info := e.get(q, child); info.State != Scheduled || !info.NotBefore.Equal(t0.Add(time.Minute)) {
		t.Fatalf("released child: %+v", info)
	}
	e.clock.Advance(time.Minute)
	if ls := e.claim(q, 10); len(ls) != 1 || ls[0].ID != child || ls[0].Priority != 5 {
		t.Fatalf("claimed %+v", ls)
	}
}
