package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/enginetest/record"
	"github.com/docketdb/docket/internal/taskaction"
)

// sampleValue is a value a field of kind k takes.
func sampleValue(k taskaction.Kind) string {
	switch k {
	case taskaction.Time, taskaction.Duration:
		return "1h"
	case taskaction.Int, taskaction.OptInt:
		return "2"
	case taskaction.String:
		return "x"
	}
	return "true"
}

// cliExempt are the methods the command line does not offer, each with
// the reason.
var cliExempt = map[string]string{
	"Queue.EnqueueAsync":      "enqueue is one task, waited for: nothing to pipeline",
	"Queue.Claim":             "workers claim; people do not",
	"Queue.ClaimWait":         "workers claim; people do not",
	"Queue.Complete":          "a lease's holder completes it: a worker, not a person",
	"Queue.CompleteBatch":     "a lease's holder completes it: a worker, not a person",
	"Queue.CompleteAndClaim":  "a lease's holder completes it: a worker, not a person",
	"Queue.Fail":              "a lease's holder fails it: a worker, not a person",
	"Queue.Heartbeat":         "a lease's holder extends it: a worker, not a person",
	"Queue.HeartbeatBatch":    "a lease's holder extends it: a worker, not a person",
	"Queue.Snooze":            "a lease's holder snoozes it: a worker, not a person",
	"Presence.ReportWorker":   "worker runtimes report themselves; the command line lists them",
	"Presence.RemoveWorker":   "worker runtimes report themselves; the command line lists them",
	"Presence.ReportSchedule": "schedule runtimes report their schedules; the command line lists, pauses, resumes and runs them",
	"Queue.Counts":            "stats and top read every queue's counts in one Queues call",
	"Queue.EnqueueBatch":      "enqueue adds one task a call; batches are programs' (the demo and bench make them on a directory)",
	"Queue.Name":              "a handle's name is known to the command; it never asks it",
	"Queue.Namespace":         "a handle's name is known to the command; it never asks it",
	"KV.Namespace":            "a handle's name is known to the command; it never asks it",
}

// keptDB is a DB whose Close does nothing, so that one DB serves every
// command of a script (each closes what it dialed).
type keptDB struct{ *engine.DB }

func (keptDB) Close() error { return nil }

// TestParityCLI runs a script of the commands that read and change queues
// against a recording DB (dialed as -server) and checks that it reaches
// every method of engine.API, Queue, KV, Presence and Quotas, or that the
// method is exempt with a reason: a method added to the engine and not to
// the command line fails here, named.
func TestParityCLI(t *testing.T) {
	db, err := engine.OpenInMemory(engine.Options{RetainCompleted: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ns := engine.NS("acme", "prod")
	q := db.Queue(ns, "emails")
	// Tasks 1-2 dead, 3-4 scheduled, 5 ready in partition p, 6 completed.
	if _, err := q.EnqueueBatch(ctx, []engine.Task{{MaxAttempts: 1}, {MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	ls, err := q.Claim(ctx, "w", time.Minute, 2)
	if err != nil || len(ls) != 2 {
		t.Fatal(ls, err)
	}
	for _, l := range ls {
		if err := q.Fail(ctx, l, engine.Failure{Err: "smtp 451"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.EnqueueBatch(ctx, []engine.Task{{Delay: time.Hour}, {Delay: time.Hour}, {Partition: "p"}, {}}); err != nil {
		t.Fatal(err)
	}
	if err := db.ReportWorker(ctx, ns, engine.WorkerPresence{ID: "w1"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := db.ReportSchedule(ctx, ns, engine.ScheduleInfo{Queue: "emails", Name: "nightly", Spec: "@every 1h"}, time.Hour); err != nil {
		t.Fatal(err)
	}

	rec := record.New()
	api := rec.Wrap(keptDB{db})
	c := cli{stdin: strings.NewReader(""), dial: func(context.Context, string, string) (engine.API, error) { return api, nil }}
	on := []string{"-server", "http://docket.test", "-ns", "acme/prod", "-queue", "emails"}
	onNS := []string{"-server", "http://docket.test", "-ns", "acme/prod"}
	for _, args := range [][]string{
		append([]string{"enqueue"}, append(on, `{"to":"a"}`)...),
		append([]string{"stats"}, on...),
		append([]string{"top", "-once"}, onNS[:2]...),
		append([]string{"inspect", "-state", "scheduled"}, on...),
		append([]string{"get"}, append(on, "3")...),
		append([]string{"search", "-count"}, on...),
		append([]string{"bulk", "-action", "run-now", "-state", "scheduled", "-yes"}, on...),
		append([]string{"dead", "-redrive", "1"}, on...),
		append([]string{"dead", "-redrive-all"}, on...),
		append([]string{"dead"}, on...),
		append([]string{"run-now"}, append(on, "4")...),
		append([]string{"cancel"}, append(on, "5")...),
		append([]string{"pause"}, on...),
		append([]string{"resume"}, on...),
		append([]string{"limits", "-max-in-flight", "3"}, on...),
		append([]string{"limits"}, on...),
		append([]string{"partitions"}, on...),
		append([]string{"workers"}, onNS...),
		append([]string{"schedules", "-pause", "nightly"}, on...),
		append([]string{"schedules", "-resume", "nightly"}, on...),
		append([]string{"schedules", "-run", "nightly"}, on...),
		append([]string{"schedules"}, on...),
		append([]string{"quota", "-tasks", "1000"}, onNS...),
		append([]string{"quota"}, onNS...),
		append([]string{"kv", "set"}, append(onNS, "k", `1`)...),
		append([]string{"kv", "get"}, append(onNS, "k")...),
		append([]string{"kv", "scan"}, onNS...),
		append([]string{"kv", "delete"}, append(onNS, "k")...),
	} {
		var out, errb bytes.Buffer
		c.stdout, c.stderr = &out, &errb
		if code := runCLI(ctx, c, args); code != 0 {
			t.Errorf("command line: docket %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
		}
	}
	// Every task action without a hand-written command, by its generated
	// command, on scheduled task 4 (the engine may refuse it for its
	// state: the call reached it all the same).
	for _, a := range taskaction.Actions() {
		if _, ok := byHand[a.Method]; ok {
			continue
		}
		args := append([]string{a.Name}, on...)
		for _, f := range a.Fields {
			args = append(args, "-"+fieldFlag(&f)+"="+sampleValue(f.Kind))
		}
		args = append(args, "4")
		var out, errb bytes.Buffer
		c.stdout, c.stderr = &out, &errb
		if code := runCLI(ctx, c, args); code != 0 && code != 1 {
			t.Errorf("command line: docket %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
		}
	}
	rec.Check(t, "command line", cliExempt)
}
