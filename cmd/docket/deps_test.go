package main

import (
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

// TestEnqueueAfter: enqueue -after makes a task wait for others (on any
// queue of the namespace) and says what it waits for; get shows that, the
// policy and the parent's dependents, in text and JSON; inspect lists the
// waiting state and stats counts it; the task runs once its parents
// complete; an id no task ever had is the engine's ErrInvalid.
func TestEnqueueAfter(t *testing.T) {
	db := openMem(t, engine.Options{})
	run := func(args ...string) string {
		t.Helper()
		code, out, errs, _ := remote(t, db, "", append(args, "-server", "http://x")...)
		if code != 0 {
			t.Fatalf("%v: exit %d, %s", args, code, errs)
		}
		return out
	}
	run("enqueue", "-queue", "extract", `{"part":1}`) // task 1
	run("enqueue", "-queue", "extract", `{"part":2}`) // task 2
	if out := run("enqueue", "-queue", "merge", "-after", "1,2", "-on-failure", "wait", `{"merge":true}`); !strings.Contains(out, "task 3 enqueued") || !strings.Contains(out, "waiting on 1, 2") {
		t.Fatalf("enqueue -after: %s", out)
	}
	out := run("get", "-queue", "merge", "3")
	for _, want := range []string{"task 3 in demo/local merge: waiting", "waiting on", "1, 2", "wait for a redrive"} {
		if !strings.Contains(out, want) {
			t.Fatalf("get 3 lacks %q:\n%s", want, out)
		}
	}
	if out := run("get", "-queue", "extract", "1"); !strings.Contains(out, "dependents") || !strings.Contains(out, "1: 3") {
		t.Fatalf("get 1:\n%s", out)
	}
	js := decode[taskJSON](t, run("get", "-json", "-queue", "merge", "3"))
	if js.State != "waiting" || len(js.WaitingOn) != 2 || js.OnParentFailure != "wait" {
		t.Fatalf("get -json: %+v", js)
	}
	if page := decode[pageJSON](t, run("inspect", "-json", "-queue", "merge", "-state", "waiting")); len(page.Tasks) != 1 {
		t.Fatalf("inspect waiting: %+v", page)
	}
	if out := run("stats"); !strings.Contains(out, "waiting") {
		t.Fatalf("stats:\n%s", out)
	}
	q := db.Queue(demoNS, "extract")
	ls, err := q.Claim(ctx, "w", time.Minute, 2)
	if err != nil || len(ls) != 2 {
		t.Fatal(ls, err)
	}
	for _, l := range ls {
		if _, err := q.Complete(ctx, l, engine.Done{}); err != nil {
			t.Fatal(err)
		}
	}
	if js := decode[taskJSON](t, run("get", "-json", "-queue", "merge", "3")); js.State != "ready" || len(js.WaitingOn) != 0 {
		t.Fatalf("after the parents: %+v", js)
	}
	// Completed (and so deleted) parents are satisfied at once.
	if out := run("enqueue", "-queue", "merge", "-after", "1"); strings.Contains(out, "waiting") {
		t.Fatalf("enqueue after a completed task: %s", out)
	}
	code, _, errs, _ := remote(t, db, "", "enqueue", "-server", "http://x", "-after", "99")
	if code != 1 || !strings.Contains(errs, "invalid") || !strings.Contains(errs, "task 99") {
		t.Fatalf("unknown id: exit %d, %s", code, errs)
	}
}
