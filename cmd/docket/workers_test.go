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

// presenceDir makes a data directory where a worker process and a
// periodic schedule have reported themselves (for an hour), in demo/local.
func presenceDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	db, err := engine.Open(dir, engine.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Queue(demoNS, demoQueue).Enqueue(ctx, engine.Task{Kind: "send"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	p := engine.WorkerPresence{ID: "box-42-ab", Host: "box.example", PID: 42, Version: "v1.4.2", Started: now,
		Queues:  []engine.WorkerQueue{{Queue: demoQueue, Concurrency: 8}},
		Running: []engine.RunningTask{{Queue: demoQueue, ID: 1, Kind: "send", Attempt: 1, Started: now.Add(-90 * time.Second)}}}
	if err := db.ReportWorker(ctx, demoNS, p, time.Hour); err != nil {
		t.Fatal(err)
	}
	s := engine.ScheduleInfo{Queue: "reports", Name: "nightly", Spec: "0 3 * * *", Kind: "report", Worker: "box-42-ab",
		Next: now.Add(time.Hour), Last: now.Add(-23 * time.Hour), LastTask: 1, Outcome: "completed"}
	if err := db.ReportSchedule(ctx, demoNS, s, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// docket workers and docket schedules print the same on a directory and
// on a live server, and the schedule controls work on both.
func TestWorkersAndSchedulesCommands(t *testing.T) {
	dir := presenceDir(t)
	srv := serveInProcess(t, "-dir", presenceDir(t))
	script := []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"workers"}, 0, []string{"demo/local", "box.example", "42", "v1.4.2", "emails×8", "1/8", "running", "task 1 send on emails, attempt 1, running for 1m3"}},
		{[]string{"workers", "-json"}, 0, []string{`"host": "box.example"`, `"concurrency": 8`, `"draining": false`, `"for": "1m3`}},
		{[]string{"workers", "-ns", "other/scope"}, 0, []string{"no worker process is connected"}},
		{[]string{"schedules"}, 0, []string{"reports", "nightly", "0 3 * * *", "  in ", "ago (task 1)", "completed", "active"}},
		{[]string{"schedules", "-pause", "nightly"}, 0, []string{"schedule nightly on demo/local reports paused"}},
		{[]string{"schedules", "-run", "nightly", "-json"}, 0, []string{`"paused": true`, `"run_requested": true`}},
		{[]string{"schedules", "-json"}, 0, []string{`"paused": true`, `"run_requested": true`, `"spec": "0 3 * * *"`}},
		{[]string{"schedules", "-resume", "nightly", "-queue", "reports", "-ns", "demo/local"}, 0, []string{"resumed"}},
		{[]string{"schedules", "-resume", "nope"}, 1, []string{`no periodic schedule named "nope" is registered`}},
		{[]string{"schedules", "-pause", "nightly", "-queue", "other"}, 1, []string{"on queue other"}},
		{[]string{"schedules", "-pause", "a", "-run", "b"}, 2, []string{"exclude each other"}},
	}
	clock := regexp.MustCompile(`\d+(\.\d+)?(ms|s)\b|"(heartbeat|expires|started|next|last)": "[^"]*"`)
	for _, step := range script {
		var outs [2]string
		for i, at := range [][]string{{"-dir", dir}, {"-server", srv.base}} {
			code, out, errs := docket(t, append(step.args, at...)...)
			if code != step.code {
				t.Fatalf("%q %s: exit %d, want %d\n%s%s", step.args, at[0], code, step.code, out, errs)
			}
			for _, w := range step.want {
				if !strings.Contains(out+errs, w) {
					t.Fatalf("%q %s: want %q in\n%s%s", step.args, at[0], w, out, errs)
				}
			}
			outs[i] = clock.ReplaceAllString(out, "T")
		}
		if outs[0] != outs[1] {
			t.Errorf("%q differs:\n-dir:    %s\n-server: %s", step.args, outs[0], outs[1])
		}
	}
}

// A reader lists the workers and schedules but may not pause one.
func TestSchedulesNeedAdmin(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	readTok, readLine, _ := server.NewToken("reader", "demo/local:read")
	if err := os.WriteFile(tokens, []byte(readLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := serveInProcess(t, "-dir", presenceDir(t), "-tokens", tokens)
	if code, out, errs := docket(t, "workers", "-server", srv.base, "-token", readTok); code != 0 || !strings.Contains(out, "box.example") {
		t.Fatalf("a reader's workers: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs := docket(t, "schedules", "-pause", "nightly", "-server", srv.base, "-token", readTok)
	if code != 1 || !strings.Contains(errs, "permission denied") || !strings.Contains(errs, "admin") {
		t.Fatalf("a reader's pause: exit %d\n%s%s", code, out, errs)
	}
}
