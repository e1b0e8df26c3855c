package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/server"
)

// actionsDir makes a data directory whose queue demo/local emails holds,
// with the same ids wherever it is made: dead tasks 1-3 (last error
// "smtp 451"), 4-5 ("bad address\nline two") and 6 ("timeout"); scheduled
// tasks 7 and 8 (due in an hour); ready task 9; retained completions 10-12.
func actionsDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	db, err := engine.Open(dir, engine.Options{RetainCompleted: time.Hour, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	q := db.Queue(demoNS, demoQueue)
	if _, err := q.EnqueueBatch(ctx, []engine.Task{{MaxAttempts: 1}, {MaxAttempts: 1}, {MaxAttempts: 1},
		{MaxAttempts: 1}, {MaxAttempts: 1}, {MaxAttempts: 1}}); err != nil {
		t.Fatal(err)
	}
	ls, err := q.Claim(ctx, "w", time.Minute, 6)
	if err != nil || len(ls) != 6 {
		t.Fatal(len(ls), err)
	}
	for i, l := range ls {
		msg := [...]string{"smtp 451", "smtp 451", "smtp 451", "bad address\nline two", "bad address\nline two", "timeout"}[i]
		if err := q.Fail(ctx, l, engine.Failure{Err: msg}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.EnqueueBatch(ctx, []engine.Task{{Delay: time.Hour}, {Delay: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueBatch(ctx, make([]engine.Task, 4)); err != nil {
		t.Fatal(err)
	}
	ls, err = q.Claim(ctx, "w", time.Minute, 4)
	if err != nil || len(ls) != 4 || ls[0].ID != 9 {
		t.Fatal(len(ls), err)
	}
	if errs, err := q.CompleteBatch(ctx, ls[1:]); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if err := q.Snooze(ctx, ls[0], 0); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDashboardActionsFromTheCommandLine runs each action of the dashboard
// as a command, on a data directory and on a live `docket serve` reached
// through the network client (client.Dial, as -server does), over two
// copies of one queue: both print the same, and leave the same queue.
func TestDashboardActionsFromTheCommandLine(t *testing.T) {
	dir := actionsDir(t)
	srv := serveInProcess(t, "-dir", actionsDir(t), "-retain-completed", "1h")
	script := []struct {
		args []string
		code int
		want string // in the output
	}{
		{[]string{"dead", "-by-error", "-json"}, 0, `"count": 3`},
		// Bounded: the first two dead tasks read, none matching, more left.
		{[]string{"dead", "-delete-error", "timeout", "-scan", "2", "-json"}, 0, `"more": true`},
		{[]string{"dead", "-redrive-error", "smtp 451", "-json"}, 0, `"redriven": 3`},
		{[]string{"dead", "-delete-error", "bad address\nline two"}, 0, `2 dead tasks with last error "bad address\nline two" deleted`},
		{[]string{"dead", "-redrive-error", "smtp", "-json"}, 0, `"redriven": 0`}, // exact, not a prefix
		{[]string{"dead", "-redrive", "6", "-json"}, 0, `"done": [
    6
  ]`},
		{[]string{"run-now", "-json", "7", "8"}, 0, `"done": [
    7,
    8
  ]`},
		// A generated command (a task action of engine.Queue), on ready task 9.
		{[]string{"reschedule", "-at", "0", "-priority", "3", "-json", "9"}, 0, `"done": [
    9
  ]`},
		{[]string{"get", "-json", "9"}, 0, `"priority": 3`},
		// A task that is not a completion is refused, the others deleted.
		{[]string{"cancel", "-completed", "-json", "10", "9"}, 1, `"error": "conflict: task 9 is ready, not completed: nothing deleted"`},
		{[]string{"cancel", "-completed-all", "-json"}, 0, `"deleted": 2`},
		{[]string{"cancel", "9"}, 0, "task 9 cancelled"},
		{[]string{"dead", "-redrive-all", "-json"}, 0, `"redriven": 0`},
		{[]string{"inspect", "-state", "ready", "-json"}, 0, `"id": 1,`},
	}
	times := regexp.MustCompile(`"(created_at|updated_at|not_before|at)": "[^"]*"`)
	for _, step := range script {
		var outs [2]string
		for i, where := range [][]string{{"-dir", dir}, {"-server", srv.base}} {
			code, out, errs := docket(t, append(step.args, where...)...)
			if code != step.code || !strings.Contains(out, step.want) {
				t.Fatalf("%q %s: exit %d (want %d), want %q in\n%s%s", step.args, where[0], code, step.code, step.want, out, errs)
			}
			outs[i] = out
		}
		// Times differ between the two copies; nothing else may.
		if times.ReplaceAllString(outs[0], "T") != times.ReplaceAllString(outs[1], "T") {
			t.Errorf("%q differs:\n-dir:    %s\n-server: %s", step.args, outs[0], outs[1])
		}
	}
	for i, where := range [][]string{{"-dir", dir}, {"-server", srv.base}} {
		_, out, _ := docket(t, append([]string{"stats", "-json"}, where...)...)
		st := decode[struct{ Queues []queueJSON }](t, out)
		if len(st.Queues) != 1 || st.Queues[0].Counts != (countsJSON{Ready: 6}) {
			t.Errorf("%d: after the script: %s", i, out)
		}
	}
}

// TestDeadByErrorNeedsThePermission: an action by last error that the
// caller may not take stops at the first refusal, exit 1, saying why; with
// -json the report says what was done before.
func TestDeadByErrorNeedsThePermission(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	readTok, readLine, _ := server.NewToken("reader", "demo/local:read")
	os.WriteFile(tokens, []byte(readLine+"\n"), 0o600)
	srv := serveInProcess(t, "-dir", actionsDir(t), "-tokens", tokens)
	for _, args := range [][]string{
		{"dead", "-redrive-error", "smtp 451"},
		{"dead", "-delete-error", "timeout"},
	} {
		code, out, errs := docket(t, append(args, "-server", srv.base, "-token", readTok)...)
		if code != 1 || out != "" || !strings.Contains(errs, "permission denied") || !strings.Contains(errs, "task ") {
			t.Errorf("%q as a reader: exit %d\n%s%s", args, code, out, errs)
		}
		code, out, errs = docket(t, append(args, "-server", srv.base, "-token", readTok, "-json")...)
		if res := decode[map[string]any](t, out); code != 1 || errs != "" || res["error"] == nil || res["read"] == nil {
			t.Errorf("%q -json as a reader: exit %d\n%s%s", args, code, out, errs)
		}
	}
	code, out, _ := docket(t, "dead", "-by-error", "-json", "-server", srv.base, "-token", readTok)
	if code != 0 || !strings.Contains(out, `"count": 3`) {
		t.Fatalf("the refusals changed the dead tasks:\n%s", out)
	}
}
