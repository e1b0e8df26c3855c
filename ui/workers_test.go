package ui

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

// The Workers page lists each live worker process: host, pid, version,
// queues with their concurrency, the tasks running with how long each has
// run, the last heartbeat and whether it drains; a process whose TTL ran
// out is gone.
func TestWorkersPage(t *testing.T) {
	e := newEnv(t, Options{})
	id := e.enqueue(e.queue("mail"), engine.Task{Kind: "send"})
	p := engine.WorkerPresence{ID: "box-42-ab", Host: "box.example", PID: 42, Version: "v1.4.2", Started: t0,
		Queues:   []engine.WorkerQueue{{Queue: "mail", Concurrency: 8}},
		Running:  []engine.RunningTask{{Queue: "mail", ID: id, Kind: "send", Attempt: 2, Started: t0}},
		Draining: true}
	if err := e.db.ReportWorker(ctx, ns, p, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(75 * time.Second)
	if err := e.db.ReportWorker(ctx, ns, p, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(5 * time.Second)
	body := e.mustGet("/docket/workers")
	mustContain(t, body, "box.example", "pid 42", "v1.4.2", ">mail</a> ×8", "1/8", "#"+strconv.FormatUint(id, 10), "attempt 2, for 1m20s",
		"5 s ago", `class="pill paused draining">draining`, `aria-current="page">Workers`, "1 process, 1 of 8 handler slots busy")
	e.clock.Advance(30 * time.Second)
	body = e.mustGet("/docket/workers")
	mustNotContain(t, body, "box.example")
	mustContain(t, body, "No worker process is connected")
}

// The Periodic page lists each schedule; an admin pauses, resumes and
// runs it now with its buttons; a reader sees no button and is refused.
func TestPeriodicPage(t *testing.T) {
	e, who, _ := rolesEnv(t)
	admin := e.db.As(engine.Caller{ID: "admin"})
	e.enqueue(admin.Queue(ns, "reports"), engine.Task{}) // so the namespace is listed
	s := engine.ScheduleInfo{Queue: "reports", Name: "nightly", Spec: "0 3 * * *", Kind: "report", Worker: "w1",
		Next: t0.Add(time.Hour), Last: t0.Add(-23 * time.Hour), LastTask: 1, Outcome: "completed"}
	if err := admin.ReportSchedule(ctx, ns, s, time.Minute); err != nil {
		t.Fatal(err)
	}
	*who = "reader"
	body := e.mustGet("/docket/periodic")
	mustContain(t, body, "nightly", "<code>0 3 * * *</code>", "in 1h00m", "23h00m ago", "completed", "read-only")
	mustNotContain(t, body, `value="schedule-pause"`, `value="schedule-run"`)
	csrf := e.csrf()
	form := url.Values{"csrf": {csrf}, "p": {"acme"}, "s": {"prod"}, "q": {"reports"}, "schedule": {"nightly"},
		"op": {"schedule-pause"}, "confirm": {"yes"}}
	if st, _ := e.post("/docket/action", form); st != http.StatusForbidden {
		t.Fatalf("a reader's pause: %d", st)
	}
	*who = "admin"
	body = e.mustGet("/docket/periodic")
	mustContain(t, body, `value="schedule-pause"`, `value="schedule-run"`)
	if st, body := e.post("/docket/action", form); st != http.StatusSeeOther {
		t.Fatalf("pause: %d\n%s", st, body)
	}
	body = e.mustGet("/docket/periodic")
	mustContain(t, body, `class="pill paused">paused`, `value="schedule-resume"`)
	form.Set("op", "schedule-run")
	if st, _ := e.post("/docket/action", form); st != http.StatusSeeOther {
		t.Fatalf("run now: %d", st)
	}
	ss, err := admin.Schedules(ctx, ns)
	if err != nil || len(ss) != 1 || !ss[0].Paused || !ss[0].RunRequested {
		t.Fatalf("schedules %+v, %v", ss, err)
	}
	form.Set("schedule", "nope")
	if st, body := e.post("/docket/action", form); st != http.StatusNotFound {
		t.Fatalf("an unknown schedule: %d\n%s", st, body)
	}
	form.Del("schedule")
	if st, _ := e.post("/docket/action", form); st != http.StatusBadRequest {
		t.Fatalf("no schedule named: %d", st)
	}
	form.Set("schedule", "nightly")
	form.Del("csrf")
	if st, _ := e.post("/docket/action", form); st != http.StatusForbidden {
		t.Fatalf("without the CSRF token: %d", st)
	}
}
