package ui

import (
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/enginetest/record"
	"github.com/docketdb/docket/internal/taskaction"
)

// dashboardExempt are the methods the dashboard does not offer, each with
// the reason.
var dashboardExempt = map[string]string{
	"API.Close":               "the dashboard serves its program's API; it never closes it",
	"Queue.Enqueue":           "the dashboard shows and repairs queues; programs enqueue",
	"Queue.EnqueueBatch":      "the dashboard shows and repairs queues; programs enqueue",
	"Queue.EnqueueAsync":      "the dashboard shows and repairs queues; programs enqueue",
	"Queue.Claim":             "workers claim; people do not",
	"Queue.ClaimWait":         "workers claim; people do not",
	"Queue.Complete":          "a lease's holder completes it: a worker, not a person",
	"Queue.CompleteBatch":     "a lease's holder completes it: a worker, not a person",
	"Queue.CompleteAndClaim":  "a lease's holder completes it: a worker, not a person",
	"Queue.Fail":              "a lease's holder fails it: a worker, not a person",
	"Queue.Heartbeat":         "a lease's holder extends it: a worker, not a person",
	"Queue.HeartbeatBatch":    "a lease's holder extends it: a worker, not a person",
	"Queue.Snooze":            "a lease's holder snoozes it: a worker, not a person",
	"Presence.ReportWorker":   "worker runtimes report themselves; the dashboard lists them",
	"Presence.RemoveWorker":   "worker runtimes report themselves; the dashboard lists them",
	"Presence.ReportSchedule": "schedule runtimes report their schedules; the dashboard lists, pauses, resumes and runs them",
	"KV.Commit":               "the key-value page reads entries; programs write them",
	"KV.Namespace":            "a handle's name is known to the page; it never asks it",
	"KV.Get":                  "the key-value page lists entries (Scan); a key is read as one of them",
	"Queue.Name":              "a handle's name is known to the page; it never asks it",
	"Queue.Namespace":         "a handle's name is known to the page; it never asks it",
}

// TestParityDashboard drives the dashboard, signed in as an admin, through
// its pages and actions over a recording view of the DB and checks that it
// reaches every method of engine.API, Queue, KV, Presence and Quotas, or
// that the method is exempt with a reason: a method added to the engine
// and not to the dashboard fails here, named.
func TestParityDashboard(t *testing.T) {
	rec := record.New()
	// newLoginEnv's, with the engine's log quiet.
	le := &loginEnv{tokens: map[string]string{"s3cret": "admin"}}
	o := Options{AllowActions: true, Logger: slog.New(slog.DiscardHandler), As: func(c engine.Caller) engine.API { return rec.Wrap(le.db.As(c)) },
		Login: func(tok string) (engine.Caller, error) {
			if id, ok := le.tokens[tok]; ok {
				return engine.Caller{ID: id}, nil
			}
			return engine.Caller{}, errors.New("unknown token")
		}}
	le.env = newEnv(t, o, func(eo *engine.Options) {
		eo.Secure, eo.Authorizer = true, engine.Policy{"admin": {{Project: "*", Scope: "*", Perms: engine.PermAll}}}
		eo.Logger = slog.New(slog.DiscardHandler)
	})
	adm := le.db.As(engine.Caller{ID: "admin"})
	q := adm.Queue(ns, "jobs")
	// Tasks 1-3 dead, 4-5 scheduled, 6 ready in partition p, 7 completed.
	for range 3 {
		le.kill(q, "smtp 451")
	}
	le.enqueue(q, engine.Task{Delay: time.Hour})
	le.enqueue(q, engine.Task{Delay: time.Hour})
	le.enqueue(q, engine.Task{Partition: "p"})
	done := le.enqueue(q, engine.Task{})
	ls, err := q.Claim(ctx, "w", time.Minute, 2)
	if err != nil || len(ls) != 2 {
		t.Fatal(ls, err)
	}
	for _, l := range ls {
		if l.ID != done {
			err = q.Snooze(ctx, l, 0)
		} else {
			_, err = q.Complete(ctx, l, engine.Done{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := adm.ReportWorker(ctx, ns, engine.WorkerPresence{ID: "w1"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := adm.ReportSchedule(ctx, ns, engine.ScheduleInfo{Queue: "jobs", Name: "nightly", Spec: "@every 1h"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.KV(ns).Commit(ctx, engine.Set("k", []byte(`1`))); err != nil {
		t.Fatal(err)
	}

	_, id := le.signIn("s3cret", "")
	u, _ := url.Parse(le.srv.URL)
	le.c.Jar.SetCookies(u, []*http.Cookie{{Name: sessionCookie, Value: id, Path: "/"}})
	tok := le.csrf()
	where := "p=acme&s=prod&q=jobs"
	for _, path := range []string{
		"/docket/",
		"/docket/queue?" + where,
		"/docket/queue?" + where + "&state=scheduled",
		"/docket/queue?" + where + "&state=dead&kind=x",
		"/docket/task?" + where + "&id=1",
		"/docket/dead?" + where,
		"/docket/rates",
		"/docket/kv?p=acme&s=prod",
		"/docket/workers?p=acme&s=prod",
		"/docket/periodic?p=acme&s=prod",
	} {
		if st, body := le.get(path); st != http.StatusOK {
			t.Errorf("dashboard: GET %s: %d\n%.500s", path, st, body)
		}
	}
	for _, a := range []url.Values{
		{"op": {"redrive"}, "id": {"1"}},
		{"op": {"redrive-all"}},
		{"op": {"run-now"}, "id": {"4"}},
		{"op": {"cancel"}, "id": {"6"}},
		{"op": {"pause"}},
		{"op": {"resume"}},
		{"op": {"set-limits"}, "max_in_flight": {"3"}},
		{"op": {"set-quota"}, "max_tasks": {"1000"}, "max_bytes": {"64MiB"}},
		{"op": {"bulk-run-now"}, "state": {"scheduled"}, "upto": {"100"}, "at": {strconv.FormatInt(le.clock.Now().UnixMicro(), 10)}},
		{"op": {"schedule-pause"}, "schedule": {"nightly"}},
		{"op": {"schedule-resume"}, "schedule": {"nightly"}},
		{"op": {"schedule-run"}, "schedule": {"nightly"}},
	} {
		a.Set("csrf", tok)
		a.Set("p", "acme")
		a.Set("s", "prod")
		a.Set("q", "jobs")
		a.Set("confirm", "yes")
		// A schedule's action answers with a redirect to its page.
		if st, body := le.post("/docket/action", a); st != http.StatusOK && st != http.StatusSeeOther {
			t.Errorf("dashboard: action %s: %d\n%.500s", a.Get("op"), st, strings.TrimSpace(body))
		}
	}
	// Every task action without a hand-written op, by its form, on
	// scheduled task 5 (the engine may refuse it for its state: the call
	// reached it all the same).
	for _, tf := range taskForms {
		a := url.Values{"op": {tf.Name}, "id": {"5"}, "csrf": {tok}, "p": {"acme"}, "s": {"prod"}, "q": {"jobs"}, "confirm": {"yes"}}
		for _, f := range tf.Fields {
			a.Set(f.Name, sampleValue(f))
		}
		if st, body := le.post("/docket/action", a); st != http.StatusOK && st != http.StatusConflict {
			t.Errorf("dashboard: action %s: %d\n%.500s", tf.Name, st, strings.TrimSpace(body))
		}
	}
	rec.Check(t, "dashboard", dashboardExempt)
}

// sampleValue is a value the input of f takes.
func sampleValue(f formField) string {
	switch f.f.Kind {
	case taskaction.Time, taskaction.Duration:
		return "1h"
	case taskaction.Int, taskaction.OptInt:
		return "2"
	case taskaction.String:
		return "x"
	}
	return "true"
}
