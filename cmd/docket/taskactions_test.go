package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"reflect"
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
		if a.Doc == "" || !strings.Contains(strings.Join(strings.Fields(out), " "), a.Doc) {
			t.Errorf("%s -h does not say what Queue.%s does (%q):\n%s", a.Name, a.Method, a.Doc, out)
		}
		for _, line := range strings.Split(wrapText(a.Doc, 76), "\n") {
			if len(line) > 76 && strings.Contains(line, " ") {
				t.Errorf("%s -h: a line of %d columns: %q", a.Name, len(line), line)
			}
		}
		for i := range a.Fields {
			if f := fieldFlag(&a.Fields[i]); code != 0 || !strings.Contains(out, "  -"+f+" ") {
				t.Errorf("%s -h: exit %d, no -%s:\n%s", a.Name, code, f, out)
			}
		}
	}
}

// tagOpts are the options of tag, a task action engine.Queue does not
// have: a field of each kind, one named as a target flag.
type tagOpts struct {
	Queue  string
	Due    time.Time
	Weight *int
	Every  time.Duration
	Urgent bool
}

// taggingQueue is engine.Queue with one more task action.
type taggingQueue interface {
	engine.Queue
	Tag(ctx context.Context, id uint64, o tagOpts) error
}

type tagCall struct {
	id uint64
	o  tagOpts
}

// tagger is a queue of a DB with Tag, which records its calls on the
// queue's tasks.
type tagger struct {
	engine.Queue
	calls *[]tagCall
}

func (q tagger) Tag(ctx context.Context, id uint64, o tagOpts) error {
	if _, err := q.Get(ctx, id); err != nil {
		return err
	}
	*q.calls = append(*q.calls, tagCall{id, o})
	return nil
}

// taggingAPI is a DB whose queues have Tag.
type taggingAPI struct {
	engine.API
	calls *[]tagCall
}

func (a taggingAPI) Queue(ns engine.Namespace, name string) engine.Queue {
	return tagger{a.API.Queue(ns, name), a.calls}
}

func (taggingAPI) Close() error { return nil }

// TestNewTaskActionNeedsNoHandEdit: a task action engine.Queue does not
// have, found on an interface that adds it, gets its command from
// taskActionCommands with nothing written for it: a flag per field (the
// one named as a target flag as -set-queue), the times from now by the
// DB's clock, an optional int left nil, each task's outcome printed; bad
// input is a usage error that calls nothing.
func TestNewTaskActionNeedsNoHandEdit(t *testing.T) {
	clock := engine.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	db := openMem(t, engine.Options{Clock: clock})
	for range 2 {
		if _, err := db.Queue(demoNS, demoQueue).Enqueue(ctx, engine.Task{}); err != nil {
			t.Fatal(err)
		}
	}
	var cmd *command
	cmds := taskActionCommands(taskaction.Of(reflect.TypeFor[taggingQueue]()))
	for i, c := range cmds {
		switch c.name {
		case "tag":
			cmd = &cmds[i]
		case "cancel", "redrive", "run-now":
			t.Errorf("%s, which a hand-written command takes, is generated", c.name)
		}
	}
	if cmd == nil || cmd.args != "[-dir DIR | -server URL] [-ns P/S] [-queue Q] [-set-queue TEXT] [-due TIME] [-weight N] [-every DUR] [-urgent] ID..." ||
		cmd.summary != "tag tasks by id, setting -set-queue, -due, -weight, -every and/or -urgent (Queue.Tag)" {
		t.Fatalf("tag: %+v", cmd)
	}
	var calls []tagCall
	run := func(args ...string) (error, string, string) {
		var out, errb bytes.Buffer
		c := cli{stdout: &out, stderr: &errb, stdin: strings.NewReader(""),
			dial: func(context.Context, string, string) (engine.API, error) { return taggingAPI{db, &calls}, nil }}
		return cmd.run(ctx, c, append([]string{"-server", "s"}, args...)), out.String(), errb.String()
	}
	err, out, errs := run("-set-queue", "blue", "-due", "10m", "-every", "1m", "-urgent", "1", "2", "3")
	if !errors.Is(err, exitError(1)) || out != "task 1 tagged\ntask 2 tagged\n" || !strings.Contains(errs, "task 3: not found") {
		t.Fatalf("tag: %v\n%s%s", err, out, errs)
	}
	want := tagOpts{Queue: "blue", Due: clock.Now().Add(10 * time.Minute), Every: time.Minute, Urgent: true}
	if len(calls) != 2 || calls[0] != (tagCall{1, want}) || calls[1] != (tagCall{2, want}) {
		t.Fatalf("calls: %+v", calls)
	}
	calls = nil
	if err, out, _ := run("-weight", "4", "1"); err != nil || out != "task 1 tagged\n" || len(calls) != 1 || *calls[0].o.Weight != 4 {
		t.Fatalf("tag -weight: %v %q %+v", err, out, calls)
	}
	calls = nil
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"1"}, "tag: nothing to change: give -set-queue, -due, -weight, -every or -urgent"},
		{[]string{"-weight", "x", "1"}, `tag: -weight "x": want a whole number`},
		{[]string{"-due", "soon", "1"}, `tag: -due "soon": want an RFC 3339 time`},
		{[]string{"-every", "often", "1"}, `tag: -every "often": want a duration`},
		{[]string{"-urgent=maybe", "1"}, `tag: -urgent "maybe": want true or false`},
		{[]string{"-queue", "x", "-set-queue", "a", "-json=maybe", "1"}, "invalid boolean value"}, // the flag package says why
		{[]string{"-urgent"}, "tag: missing argument"},
	} {
		err, _, errs := run(c.args...)
		var ue usageError
		if errors.As(err, &ue) {
			errs += ue.msg
		} else if !errors.Is(err, exitError(2)) {
			t.Errorf("%v: %v, want a usage error", c.args, err)
		}
		if !strings.Contains(errs, c.want) {
			t.Errorf("%v: %q, want %q", c.args, errs, c.want)
		}
	}
	if len(calls) != 0 {
		t.Fatalf("bad input called Tag: %+v", calls)
	}
}

// TestTargetFlagNames: the flags a field's flag may not take are those of
// the target flags.
func TestTargetFlagNames(t *testing.T) {
	tf := newTargetFlags(cli{}, "x", oneQueue)
	n := 0
	tf.fs.VisitAll(func(f *flag.Flag) {
		n++
		if !targetFlagNames[f.Name] {
			t.Errorf("-%s is not in targetFlagNames", f.Name)
		}
	})
	if n+2 != len(targetFlagNames) { // and -h, -help
		t.Errorf("targetFlagNames %v; the target flags are %d", targetFlagNames, n)
	}
}

// TestWrapText: lines break at spaces within the width; a word longer
// than the width has a line of its own; runs of spaces and newlines in the
// text are one space.
func TestWrapText(t *testing.T) {
	for _, c := range []struct {
		in    string
		width int
		want  string
	}{
		{"", 10, ""},
		{"one two three", 9, "one two\nthree"},
		{"one two three", 13, "one two three"},
		{"a  verylongword\nb", 5, "a\nverylongword\nb"},
	} {
		if got := wrapText(c.in, c.width); got != c.want {
			t.Errorf("wrapText(%q, %d) = %q, want %q", c.in, c.width, got, c.want)
		}
	}
}
