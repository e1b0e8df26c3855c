package main

import (
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/taskaction"
)

// TestReschedule: the generated docket reschedule moves tasks by -at (how
// long from now by the DB's clock, or an RFC 3339 time) and -priority,
// says which it could not (a task in flight, a missing one), and refuses a
// command line with nothing to change, a bad time or priority, or no id,
// changing nothing.
func TestReschedule(t *testing.T) {
	clock := engine.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	db := openMem(t, engine.Options{Clock: clock})
	q := db.Queue(demoNS, demoQueue)
	for _, d := range []time.Duration{time.Hour, 0} {
		if _, err := q.Enqueue(ctx, engine.Task{Delay: d}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Claim(ctx, "w", time.Minute, 1); err != nil { // task 2
		t.Fatal(err)
	}
	code, out, errs, _ := remote(t, db, "", "reschedule", "-server", "s", "-at", "2h", "-priority", "5", "1", "2", "99")
	if code != 1 || out != "task 1 rescheduled\n" || !strings.Contains(errs, "task 2:") || !strings.Contains(errs, "in-flight") ||
		!strings.Contains(errs, "task 99:") {
		t.Fatalf("reschedule: exit %d\n%s\n%s", code, out, errs)
	}
	info, err := q.Get(ctx, 1)
	if err != nil || info.Priority != 5 || info.State != engine.Scheduled || !info.NotBefore.Equal(clock.Now().Add(2*time.Hour)) {
		t.Fatalf("task 1: %+v %v", info, err)
	}
	code, out, errs, _ = remote(t, db, "", "reschedule", "-server", "s", "-at", "2026-01-01T00:00:00Z", "1")
	if code != 0 || out != "task 1 rescheduled\n" {
		t.Fatalf("reschedule -at: exit %d\n%s\n%s", code, out, errs)
	}
	if info, _ := q.Get(ctx, 1); info.State != engine.Ready || info.Priority != 5 {
		t.Fatalf("task 1 after -at in the past: %+v", info)
	}
	code, out, errs, _ = remote(t, db, "", "reschedule", "-server", "s", "-json", "-at", "+90m", "1")
	if code != 0 || !strings.Contains(out, `"done": [`) {
		t.Fatalf("reschedule -json: exit %d\n%s\n%s", code, out, errs)
	}
	want, _ := q.Get(ctx, 1)
	if !want.NotBefore.Equal(clock.Now().Add(90 * time.Minute)) {
		t.Fatalf("-at +90m: %+v", want)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"1"}, "reschedule: nothing to change: give -at or -priority"},
		{[]string{"-at", "", "1"}, "nothing to change"},
		{[]string{"-at", "tomorrow", "1"}, `reschedule: -at "tomorrow": want an RFC 3339 time`},
		{[]string{"-at", "-1h", "1"}, `reschedule: -at "-1h": how long from now must be 0..`},
		{[]string{"-priority", "high", "1"}, `reschedule: -priority "high": want a whole number`},
		{[]string{"-at", "1h"}, "missing argument"},
		{[]string{"-at", "1h", "x"}, `task id "x"`},
	} {
		args := append([]string{"reschedule", "-server", "s"}, c.args...)
		if code, out, errs, _ := remote(t, db, "", args...); code != 2 || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q %q, want %q", args, code, out, errs, c.want)
		}
	}
	if info, _ := q.Get(ctx, 1); info.NotBefore != want.NotBefore || info.Priority != want.Priority || info.UpdatedAt != want.UpdatedAt {
		t.Fatalf("the refused command lines changed task 1: %+v, was %+v", info, want)
	}
}

// TestRescheduleNeedsThePermission: a caller who may only read is refused
// by the engine, per task, exit 1, and the task is left as it was.
func TestRescheduleNeedsThePermission(t *testing.T) {
	db := openMem(t, engine.Options{Secure: true, Authorizer: engine.Policy{
		"admin":  {{Project: "*", Scope: "*", Perms: engine.PermAll}},
		"reader": {{Project: "*", Scope: "*", Perms: engine.PermRead}},
	}})
	q := db.As(engine.Caller{ID: "admin"}).Queue(demoNS, demoQueue)
	if _, err := q.Enqueue(ctx, engine.Task{Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	before, _ := q.Get(ctx, 1)
	code, out, errs, _ := remote(t, db.As(engine.Caller{ID: "reader"}), "", "reschedule", "-server", "s", "-at", "0", "-priority", "3", "1")
	if code != 1 || out != "" || !strings.Contains(errs, "task 1:") || !strings.Contains(errs, "permission denied") {
		t.Fatalf("as a reader: exit %d\n%s%s", code, out, errs)
	}
	if after, _ := q.Get(ctx, 1); after.NotBefore != before.NotBefore || after.Priority != 0 {
		t.Fatalf("the refusal changed the task: %+v", after)
	}
}

// TestTaskActionCommands: every task action of engine.Queue has a command:
// a hand-written one (byHand, which names only actions and commands that
// exist) or the generated one of its name, which takes a flag per field
// of its options and task ids, and whose name no hand-written command
// takes.
func TestTaskActionCommands(t *testing.T) {
	byName := map[string]command{}
	for _, c := range commands {
		if _, dup := byName[c.name]; dup {
			t.Errorf("two commands are named %s", c.name)
		}
		byName[c.name] = c
	}
	for m, cmd := range byHand {
		if a := taskaction.Lookup(taskaction.Kebab(m)); a == nil || a.Method != m {
			t.Errorf("byHand names %s, not a task action of engine.Queue", m)
		}
		if _, ok := byName[strings.Fields(cmd)[0]]; !ok {
			t.Errorf("byHand's command for %s, %q, is not a command", m, cmd)
		}
	}
	for _, a := range taskaction.Actions() {
		if _, ok := byHand[a.Method]; ok {
			continue
		}
		c, ok := byName[a.Name]
		if !ok {
			t.Errorf("Queue.%s has no command", a.Method)
			continue
		}
		if !strings.HasSuffix(c.args, " ID...") || !strings.Contains(c.summary, "Queue."+a.Method) {
			t.Errorf("%s: the command of Queue.%s is not the generated one: %+v", a.Name, a.Method, c)
		}
		code, out, _ := docket(t, a.Name, "-h")
		for _, f := range a.Fields {
			if code != 0 || !strings.Contains(out, "  -"+f.Flag) {
				t.Errorf("%s -h: exit %d, no -%s:\n%s", a.Name, code, f.Flag, out)
			}
		}
	}
}
