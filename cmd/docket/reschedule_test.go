package main

import (
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

// TestReschedule: docket reschedule moves tasks by -in and -priority, says
// which it could not (a task in flight, a missing one), and refuses a
// command line with nothing to change or both -at and -in.
func TestReschedule(t *testing.T) {
	db := openMem(t, engine.Options{})
	q := db.Queue(demoNS, demoQueue)
	for _, d := range []time.Duration{time.Hour, 0} {
		if _, err := q.Enqueue(ctx, engine.Task{Delay: d}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Claim(ctx, "w", time.Minute, 1); err != nil { // task 2
		t.Fatal(err)
	}
	code, out, errs, _ := remote(t, db, "", "reschedule", "-server", "s", "-in", "2h", "-priority", "5", "1", "2", "99")
	if code != 1 || out != "task 1 rescheduled\n" || !strings.Contains(errs, "task 2:") || !strings.Contains(errs, "in-flight") ||
		!strings.Contains(errs, "task 99:") {
		t.Fatalf("reschedule: exit %d\n%s\n%s", code, out, errs)
	}
	info, err := q.Get(ctx, 1)
	if err != nil || info.Priority != 5 || info.State != engine.Scheduled || info.NotBefore.Sub(info.CreatedAt) < 90*time.Minute {
		t.Fatalf("task 1: %+v %v", info, err)
	}
	code, out, errs, _ = remote(t, db, "", "reschedule", "-server", "s", "-at", "2026-01-01T00:00:00Z", "1")
	if code != 0 || out != "task 1 rescheduled\n" {
		t.Fatalf("reschedule -at: exit %d\n%s\n%s", code, out, errs)
	}
	if info, _ := q.Get(ctx, 1); info.State != engine.Ready || info.Priority != 5 {
		t.Fatalf("task 1 after -at in the past: %+v", info)
	}
	for _, args := range [][]string{
		{"reschedule", "-server", "s", "1"},
		{"reschedule", "-server", "s", "-at", "2026-01-01T00:00:00Z", "-in", "1h", "1"},
		{"reschedule", "-server", "s", "-at", "tomorrow", "1"},
		{"reschedule", "-server", "s", "-priority", "high", "1"},
	} {
		if code, _, errs, _ := remote(t, db, "", args...); code != 2 || errs == "" {
			t.Errorf("%v: exit %d, %q", args, code, errs)
		}
	}
}
