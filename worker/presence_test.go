package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

func (e *env) workers() []engine.WorkerPresence {
	e.t.Helper()
	ws, err := e.db.Workers(bg, ns)
	if err != nil {
		e.t.Fatal(err)
	}
	return ws
}

func (e *env) schedule(name string) engine.ScheduleInfo {
	e.t.Helper()
	ss, err := e.db.Schedules(bg, ns)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range ss {
		if s.Name == name {
			return s
		}
	}
	return engine.ScheduleInfo{}
}

// A started Worker reports its process, queues and running tasks on its
// cadence, reports itself draining while it stops, and removes its
// presence once stopped.
func TestPresenceReportsTheProcess(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{PresenceEvery: 5 * time.Second, Version: "v9", ShutdownGrace: time.Hour})
	started, release := make(chan struct{}), make(chan struct{})
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		close(started)
		<-release
		return nil
	}, worker.QueueOptions{Concurrency: 3, Lease: time.Minute})
	e.start(w)
	ws := e.workers()
	if len(ws) != 1 || ws[0].ID != "w1" || ws[0].Version != "v9" || ws[0].PID == 0 || len(ws[0].Queues) != 1 ||
		ws[0].Queues[0] != (engine.WorkerQueue{Queue: "q", Concurrency: 3}) || len(ws[0].Running) != 0 || ws[0].Draining {
		t.Fatalf("workers at start = %+v", ws)
	}
	id := e.enqueue("q", engine.Task{Kind: "slow"})
	recv(t, started)
	e.armed(t0.Add(5 * time.Second))
	e.clock.Advance(5 * time.Second)
	e.eventually("the running task reported", func() bool {
		ws := e.workers()
		return len(ws) == 1 && len(ws[0].Running) == 1 && ws[0].Running[0].ID == id &&
			ws[0].Running[0].Kind == "slow" && ws[0].Running[0].Started.Equal(t0) && ws[0].Heartbeat.Equal(t0.Add(5*time.Second))
	})
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(bg) }()
	e.eventually("the worker reported draining", func() bool {
		ws := e.workers()
		return len(ws) == 1 && ws[0].Draining
	})
	close(release)
	if err := recv(t, stopped); err != nil {
		t.Fatal(err)
	}
	if ws := e.workers(); len(ws) != 0 {
		t.Fatalf("workers after stop = %+v", ws)
	}
}

// A Worker that stops reporting (its process died) disappears once its
// TTL has passed.
func TestPresenceExpires(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{PresenceEvery: 5 * time.Second, PresenceTTL: 20 * time.Second})
	w.HandleFunc(ns, "q", func(context.Context, *worker.Task) error { return nil }, worker.QueueOptions{})
	e.start(w)
	// What a dead process leaves: its last report, never removed.
	ws := e.workers()
	if len(ws) != 1 {
		t.Fatalf("workers = %+v", ws)
	}
	if err := e.db.ReportWorker(bg, ns, engine.WorkerPresence{ID: "dead"}, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		e.armed(e.clock.Now().Add(5 * time.Second))
		e.clock.Advance(5 * time.Second)
	}
	e.eventually("the dead process gone, the live one listed", func() bool {
		ws := e.workers()
		return len(ws) == 1 && ws[0].ID == "w1"
	})
}

// A paused schedule skips its ticks; run now enqueues its task at the
// next report, paused or not; resumed, it enqueues its ticks again.
func TestPeriodicPauseAndRunNow(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{PresenceEvery: 5 * time.Second})
	if err := w.Periodic(ns, "reports", "@every 1m", engine.Task{Kind: "report"}); err != nil {
		t.Fatal(err)
	}
	e.start(w)
	s := e.schedule("report")
	if s.Spec != "@every 1m" || s.Kind != "report" || s.Worker != "w1" || !s.Next.Equal(t0.Add(time.Minute)) || s.Paused {
		t.Fatalf("schedule = %+v", s)
	}
	if err := e.db.PauseSchedule(bg, ns, "reports", "report"); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		c, err := e.q("reports").Counts(bg)
		if err != nil {
			t.Fatal(err)
		}
		return c.Ready - 1 // the tick at t0, Start's
	}
	for range 12 { // to the tick at t0+1m
		e.armed(e.clock.Now().Add(5 * time.Second))
		e.clock.Advance(5 * time.Second)
	}
	e.eventually("the paused tick skipped", func() bool {
		s := e.schedule("report")
		return s.Paused && s.Outcome == "skipped: paused" && s.Last.Equal(t0.Add(time.Minute))
	})
	if n := count(); n != 0 {
		t.Fatalf("a paused schedule enqueued %d", n)
	}
	if err := e.db.RunSchedule(bg, ns, "reports", "report"); err != nil {
		t.Fatal(err)
	}
	if s := e.schedule("report"); !s.RunRequested {
		t.Fatalf("run not requested: %+v", s)
	}
	e.armed(e.clock.Now().Add(5 * time.Second))
	e.clock.Advance(5 * time.Second)
	e.eventually("run now enqueued", func() bool { return count() == 1 })
	e.eventually("the request consumed", func() bool {
		s := e.schedule("report")
		return !s.RunRequested && s.LastTask != 0 && s.Outcome == "enqueued"
	})
	if err := e.db.ResumeSchedule(bg, ns, "reports", "report"); err != nil {
		t.Fatal(err)
	}
	for e.clock.Now().Before(t0.Add(2 * time.Minute)) {
		e.armed(e.clock.Now().Add(5 * time.Second))
		e.clock.Advance(5 * time.Second)
	}
	e.eventually("the resumed tick enqueued", func() bool { return count() == 2 })
	ls, err := e.q("reports").List(bg, engine.ListOptions{State: engine.Ready})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, tk := range ls.Tasks {
		keys = append(keys, tk.IdempotencyKey)
	}
	if len(keys) != 3 || !strings.Contains(strings.Join(keys, " "), "periodic:report:run:") {
		t.Fatalf("tasks = %v", keys)
	}
}

// keepsPresence is an API whose RemoveWorker does nothing, as when a
// process dies before it can remove its presence.
type keepsPresence struct{ *engine.DB }

func (keepsPresence) RemoveWorker(context.Context, engine.Namespace, string) error { return nil }

// However quickly a Worker stops, its last report says it was draining.
func TestPresenceLastReportIsDraining(t *testing.T) {
	for range 20 {
		e := newEnv(t)
		w := worker.New(keepsPresence{e.db}, worker.Options{Owner: "w1", Clock: e.clock, PresenceEvery: 5 * time.Second})
		w.HandleFunc(ns, "q", func(context.Context, *worker.Task) error { return nil }, worker.QueueOptions{})
		e.start(w)
		if err := w.Stop(bg); err != nil {
			t.Fatal(err)
		}
		if ws := e.workers(); len(ws) != 1 || !ws[0].Draining {
			t.Fatalf("after stop: %+v", ws)
		}
	}
}
