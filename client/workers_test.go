package client

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/server"
)

// Presence works over the network as in process: a worker's report and a
// schedule's controls, each with the permission it needs, bad input
// refused with ErrInvalid and the TTL read on the server's clock.
func TestPresenceOverTheNetwork(t *testing.T) {
	t.Parallel()
	tab, tok := tokens(t)
	clock := engine.NewManualClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	db := memDB(t, engine.Options{Secure: true, Authorizer: tab, Clock: clock})
	srv := serve(t, db, "127.0.0.1:0", server.Options{Tokens: tab}, nil)
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	reader := dial(t, srv.url, Options{Token: tok["reader"]})
	worker := dial(t, srv.url, Options{Token: tok["worker"]})
	root := dial(t, srv.url, Options{Token: tok["root"]})

	started := clock.Now()
	p := engine.WorkerPresence{ID: "w1", Host: "box", PID: 42, Version: "v1.2", Started: started,
		Queues:  []engine.WorkerQueue{{Queue: "mail", Concurrency: 8}},
		Running: []engine.RunningTask{{Queue: "mail", ID: 7, Kind: "send", Attempt: 2, Started: started}}}
	wantErr(t, "reader reports", reader.ReportWorker(ctx, ns, p, time.Minute), engine.ErrPermission)
	if err := worker.ReportWorker(ctx, ns, p, time.Minute); err != nil {
		t.Fatal(err)
	}
	ws := must(reader.Workers(ctx, ns))(t)
	if len(ws) != 1 || ws[0].Host != "box" || ws[0].PID != 42 || ws[0].Queues[0].Concurrency != 8 ||
		ws[0].Running[0].Attempt != 2 || !ws[0].Running[0].Started.Equal(started) || !ws[0].Expires.Equal(started.Add(time.Minute)) {
		t.Fatalf("workers = %+v", ws)
	}
	local := must(db.As(engine.Caller{ID: "reader"}).Workers(ctx, ns))(t)
	if len(local) != 1 || !local[0].Heartbeat.Equal(ws[0].Heartbeat) {
		t.Fatalf("in process %+v, over the network %+v", local, ws)
	}
	err := worker.ReportWorker(ctx, ns, engine.WorkerPresence{ID: "w2"}, time.Hour*48)
	wantErr(t, "a ttl too long", err, engine.ErrInvalid)
	if !strings.Contains(err.Error(), "ttl") {
		t.Fatalf("error %q does not name the ttl", err)
	}

	s := engine.ScheduleInfo{Queue: "mail", Name: "digest", Spec: "@daily", Kind: "digest", Worker: "w1",
		Next: started.Add(time.Hour), LastTask: 3, Outcome: "completed"}
	if err := worker.ReportSchedule(ctx, ns, s, time.Minute); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "reader pauses", reader.PauseSchedule(ctx, ns, "mail", "digest"), engine.ErrPermission)
	if err := root.PauseSchedule(ctx, ns, "mail", "digest"); err != nil {
		t.Fatal(err)
	}
	if err := root.RunSchedule(ctx, ns, "mail", "digest"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "an unknown schedule", root.ResumeSchedule(ctx, ns, "mail", "nope"), engine.ErrNotFound)
	ss := must(reader.Schedules(ctx, ns))(t)
	if len(ss) != 1 || !ss[0].Paused || !ss[0].RunRequested || ss[0].Outcome != "completed" || !ss[0].Next.Equal(started.Add(time.Hour)) {
		t.Fatalf("schedules = %+v", ss)
	}
	if err := worker.RemoveWorker(ctx, ns, "w1"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if ws := must(reader.Workers(ctx, ns))(t); len(ws) != 0 {
		t.Fatalf("workers = %+v", ws)
	}
	if ss := must(reader.Schedules(ctx, ns))(t); len(ss) != 0 {
		t.Fatalf("schedules past the ttl = %+v", ss)
	}
}
