package worker

import (
	"context"
	"errors"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/docketdb/docket/engine"
)

// Presence defaults (Options.PresenceEvery, Options.PresenceTTL).
const (
	DefaultPresenceEvery = 5 * time.Second
	DefaultPresenceTTL   = 30 * time.Second
)

// presence reports the Worker's process and schedules through an API that
// keeps them (engine.Presence), every Options.PresenceEvery from Start
// until the Worker has stopped; while it stops, it reports itself
// draining, and when it has stopped it removes its presence. The same
// reports take the run-now requests of its schedules.
type presence struct {
	w       *Worker
	api     engine.Presence
	host    string
	pid     int
	version string
	started time.Time
	done    chan struct{}
	poke    chan struct{}

	mu   sync.Mutex
	runs map[*periodic]runRecord // the last task each schedule enqueued
}

type runRecord struct {
	tick time.Time
	id   uint64
	note string // "", or "skipped: paused"
}

func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// newPresence returns the Worker's presence, nil if its API keeps none or
// Options.PresenceEvery is negative.
func (w *Worker) newPresence(now time.Time) *presence {
	api, ok := w.db.(engine.Presence)
	if !ok || w.opts.PresenceEvery < 0 {
		return nil
	}
	host, _ := os.Hostname()
	if len(host) > 255 {
		host = host[:255]
	}
	v := w.opts.Version
	if v == "" {
		v = moduleVersion()
	}
	p := &presence{w: w, api: api, host: host, pid: os.Getpid(), version: v, started: now,
		done: make(chan struct{}), poke: make(chan struct{}, 1), runs: map[*periodic]runRecord{}}
	return p
}

func (p *presence) every() time.Duration {
	if d := p.w.opts.PresenceEvery; d > 0 {
		return d
	}
	return DefaultPresenceEvery
}

func (p *presence) ttl() time.Duration {
	if d := p.w.opts.PresenceTTL; d > 0 {
		return d
	}
	return max(DefaultPresenceTTL, 3*p.every())
}

// loop reports on the cadence until the Worker has stopped, then removes
// the presence.
func (p *presence) loop() {
	w := p.w
	defer close(p.done)
	stopping := w.claimCtx.Done()
	ctx := w.runCtx
	for {
		t := w.clock.NewTimer(p.every())
		select {
		case <-t.C():
			p.report(ctx, stopping == nil)
		case <-p.poke:
			t.Stop()
			p.report(ctx, stopping == nil)
		case <-stopping:
			t.Stop()
			stopping = nil
			p.reportLast(true)
		case <-w.finished:
			t.Stop()
			if stopping != nil {
				// Stopped before the loop saw it stopping: say so first,
				// for an API that keeps the last report (see remove).
				p.reportLast(true)
			}
			p.remove()
			return
		}
	}
}

// namespaces returns the namespaces the Worker works or runs schedules in,
// in order of registration.
func (w *Worker) namespaces() []engine.Namespace {
	var out []engine.Namespace
	for _, r := range w.runners {
		if !slices.Contains(out, r.q.Namespace()) {
			out = append(out, r.q.Namespace())
		}
	}
	for _, s := range w.periodics {
		if !slices.Contains(out, s.ns) {
			out = append(out, s.ns)
		}
	}
	return out
}

func (p *presence) report(ctx context.Context, draining bool) {
	w := p.w
	for _, ns := range w.namespaces() {
		rec := engine.WorkerPresence{ID: w.owner, Host: p.host, PID: p.pid, Version: p.version, Started: p.started,
			Draining: draining}
		for _, r := range w.runners {
			if r.q.Namespace() != ns {
				continue
			}
			rec.Queues = append(rec.Queues, engine.WorkerQueue{Queue: r.q.Name(), Concurrency: r.opts.Concurrency})
			rec.Running = append(rec.Running, r.running()...)
		}
		if len(rec.Running) > 500 {
			rec.Running = rec.Running[:500] // within engine.MaxPresenceBytes
		}
		if err := p.api.ReportWorker(ctx, ns, rec, p.ttl()); err != nil && ctx.Err() == nil {
			w.log.Warn("docket: reporting the worker's presence", logNS, ns.String(), "err", err)
		}
	}
	for _, s := range w.periodics {
		if !draining {
			p.takeRun(ctx, s)
		}
		p.reportSchedule(ctx, s)
	}
}

// reportLast reports once more, on a context of its own: the Worker's
// may be cancelled by now.
func (p *presence) reportLast(draining bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.w.runCtx), 5*time.Second)
	defer cancel()
	p.report(ctx, draining)
}

func (p *presence) remove() {
	w := p.w
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.runCtx), 5*time.Second)
	defer cancel()
	for _, ns := range w.namespaces() {
		if err := p.api.RemoveWorker(ctx, ns, w.owner); err != nil {
			w.log.Warn("docket: removing the worker's presence", logNS, ns.String(), "err", err)
		}
	}
}

// running lists the tasks whose handlers run now.
func (r *runner) running() []engine.RunningTask {
	r.smu.Lock()
	slots := r.slots
	r.smu.Unlock()
	var out []engine.RunningTask
	for _, s := range slots {
		s.mu.Lock()
		if t := s.cur; t != nil {
			out = append(out, engine.RunningTask{Queue: t.Queue, ID: t.ID, Kind: t.Kind, Attempt: t.Attempt, Started: s.curStart})
		}
		s.mu.Unlock()
	}
	return out
}

// enqueued records what a schedule enqueued, for its next report.
func (p *presence) enqueued(s *periodic, tick time.Time, id uint64, note string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.runs[s] = runRecord{tick: tick, id: id, note: note}
	p.mu.Unlock()
	select {
	case p.poke <- struct{}{}:
	default:
	}
}

func (p *presence) reportSchedule(ctx context.Context, s *periodic) {
	w := p.w
	now := w.clock.Now()
	p.mu.Lock()
	run := p.runs[s]
	p.mu.Unlock()
	info := engine.ScheduleInfo{Queue: s.queue, Name: s.name, Spec: s.spec, Kind: s.task.Kind, Worker: w.owner,
		Next: s.next(now), Last: run.tick, LastTask: run.id, Outcome: run.note}
	if run.id != 0 && run.note == "" {
		info.Outcome = outcomeOfTask(ctx, w.db.Queue(s.ns, s.queue), run.id)
	}
	if err := p.api.ReportSchedule(ctx, s.ns, info, p.ttl()); err != nil && ctx.Err() == nil {
		w.log.Warn("docket: reporting a periodic schedule", logQueue, s.queue, "schedule", s.name, "err", err)
	}
}

// outcomeOfTask says what became of a task a schedule enqueued, as far as
// the Worker may read it.
func outcomeOfTask(ctx context.Context, q engine.Queue, id uint64) string {
	t, err := q.Get(ctx, id)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return "done"
	case err != nil:
		return "enqueued"
	}
	switch t.State {
	case engine.InFlight:
		return "running"
	case engine.Completed:
		return "completed"
	case engine.Dead:
		return "dead: " + t.LastError
	case engine.Scheduled:
		if t.LastError != "" {
			return "retrying: " + t.LastError
		}
	}
	return "enqueued"
}

// takeRun enqueues the schedule's task if a run-now request waits for it,
// consuming the request in the same commit.
func (p *presence) takeRun(ctx context.Context, s *periodic) {
	w := p.w
	key := engine.ScheduleRunPrefix + engine.ScheduleKey(s.queue, s.name)
	e, err := s.kv.Get(ctx, key)
	if err != nil {
		if !errors.Is(err, engine.ErrNotFound) && ctx.Err() == nil {
			w.log.Warn("docket: reading a periodic schedule's run-now request", logQueue, s.queue, "schedule", s.name, "err", err)
		}
		return
	}
	now := w.clock.Now()
	t := s.tickTask(now.Unix())
	t.IdempotencyKey = "periodic:" + s.name + ":run:" + strconv.FormatUint(e.Version, 10)
	res, err := s.kv.Commit(ctx, engine.IfVersion(key, e.Version), engine.Delete(key), engine.Enqueue(s.queue, t))
	switch {
	case errors.Is(err, engine.ErrConflict):
		return // taken by another runtime, or asked again: the next report looks again
	case err != nil:
		if ctx.Err() == nil {
			w.log.Warn("docket: running a periodic schedule now", logQueue, s.queue, "schedule", s.name, "err", err)
		}
		return
	}
	p.mu.Lock()
	p.runs[s] = runRecord{tick: now.UTC(), id: res.Enqueued[0].ID}
	p.mu.Unlock()
	w.log.Info("docket: periodic task run now", logQueue, s.queue, "schedule", s.name, logTask, res.Enqueued[0].ID)
}
