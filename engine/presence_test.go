package engine

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func workerIDs(t *testing.T, db Presence, ns Namespace) []string {
	t.Helper()
	ws, err := db.Workers(ctx, ns)
	if err != nil {
		t.Fatalf("Workers: %v", err)
	}
	var ids []string
	for _, w := range ws {
		ids = append(ids, w.ID)
	}
	return ids
}

// A worker's presence is listed until its TTL after its last report, then
// not; the next report in the namespace deletes it; a restart keeps it
// only as long as its TTL says.
func TestPresenceTTL(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	start := e.clock.Now()
	p := WorkerPresence{ID: "w1", Host: "h", PID: 7, Version: "v1", Queues: []WorkerQueue{{Queue: "q", Concurrency: 4}},
		Running: []RunningTask{{Queue: "q", ID: 9, Kind: "k", Started: start}}}
	if err := e.db.ReportWorker(ctx, ns, p, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	ws, err := e.db.Workers(ctx, ns)
	if err != nil || len(ws) != 1 {
		t.Fatalf("Workers = %v, %v", ws, err)
	}
	w := ws[0]
	if w.Host != "h" || w.PID != 7 || w.Version != "v1" || len(w.Queues) != 1 || w.Queues[0].Concurrency != 4 ||
		len(w.Running) != 1 || w.Running[0].ID != 9 || !w.Heartbeat.Equal(start) || !w.Expires.Equal(start.Add(10*time.Second)) {
		t.Fatalf("worker = %+v", w)
	}
	// Another namespace sees nothing.
	if ids := workerIDs(t, e.db, NS("acme", "other")); len(ids) != 0 {
		t.Fatalf("other namespace lists %v", ids)
	}
	// Within the TTL, across a restart.
	e.clock.Advance(9 * time.Second)
	e.reopen()
	if ids := workerIDs(t, e.db, ns); len(ids) != 1 {
		t.Fatalf("after restart within the ttl: %v", ids)
	}
	e.clock.Advance(time.Second)
	if ids := workerIDs(t, e.db, ns); len(ids) != 0 {
		t.Fatalf("past the ttl: %v", ids)
	}
	// Still stored until the next report in the namespace deletes it.
	key := WorkerKeyPrefix + "w1"
	if _, err := e.db.SystemKV(ns).Get(ctx, key); err != nil {
		t.Fatalf("expired record before the next report: %v", err)
	}
	if err := e.db.ReportWorker(ctx, ns, WorkerPresence{ID: "w2"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.SystemKV(ns).Get(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("expired record after the next report: %v", err)
	}
	if ids := workerIDs(t, e.db, ns); len(ids) != 1 || ids[0] != "w2" {
		t.Fatalf("workers = %v", ids)
	}
	if err := e.db.RemoveWorker(ctx, ns, "w2"); err != nil {
		t.Fatal(err)
	}
	if ids := workerIDs(t, e.db, ns); len(ids) != 0 {
		t.Fatalf("after RemoveWorker: %v", ids)
	}
}

// Bad reports are refused with ErrInvalid and change nothing.
func TestPresenceRefusesBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	for name, c := range map[string]struct {
		p   WorkerPresence
		ttl time.Duration
	}{
		"no id":          {WorkerPresence{}, time.Minute},
		"ttl too short":  {WorkerPresence{ID: "w"}, time.Millisecond},
		"ttl too long":   {WorkerPresence{ID: "w"}, 48 * time.Hour},
		"long host":      {WorkerPresence{ID: "w", Host: strings.Repeat("h", 300)}, time.Minute},
		"negative pid":   {WorkerPresence{ID: "w", PID: -1}, time.Minute},
		"no queue name":  {WorkerPresence{ID: "w", Queues: []WorkerQueue{{}}}, time.Minute},
		"bad version":    {WorkerPresence{ID: "w", Version: "\xff"}, time.Minute},
		"record too big": {WorkerPresence{ID: "w", Running: make([]RunningTask, 2000)}, time.Minute},
	} {
		if name == "record too big" {
			for i := range c.p.Running {
				c.p.Running[i] = RunningTask{Queue: "q", ID: uint64(i), Kind: strings.Repeat("k", 40)}
			}
		}
		if err := e.db.ReportWorker(ctx, ns, c.p, c.ttl); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if ids := workerIDs(t, e.db, ns); len(ids) != 0 {
		t.Fatalf("refused reports stored %v", ids)
	}
	if err := e.db.ReportSchedule(ctx, ns, ScheduleInfo{Queue: "q"}, time.Minute); !errors.Is(err, ErrInvalid) {
		t.Errorf("schedule without a name: %v", err)
	}
}

// A namespace keeps at most MaxWorkers live workers: one more is refused,
// one that reports again is not, and an expired one makes room.
func TestPresenceBounded(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a thousand reports")
	}
	e := newEnv(t, true)
	for i := range MaxWorkers {
		if err := e.db.ReportWorker(ctx, ns, WorkerPresence{ID: "w" + strconv.Itoa(i)}, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	err := e.db.ReportWorker(ctx, ns, WorkerPresence{ID: "one-more"}, time.Minute)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("one more worker: %v", err)
	}
	if err := e.db.ReportWorker(ctx, ns, WorkerPresence{ID: "w0"}, 2*time.Minute); err != nil {
		t.Fatalf("a known worker again: %v", err)
	}
	e.clock.Advance(time.Minute)
	if err := e.db.ReportWorker(ctx, ns, WorkerPresence{ID: "one-more"}, time.Minute); err != nil {
		t.Fatalf("after the others expired: %v", err)
	}
	if ids := workerIDs(t, e.db, ns); len(ids) != 2 {
		t.Fatalf("workers = %v", ids)
	}
}

// Reporting needs work, listing read, controlling a schedule admin.
func TestPresencePermissions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, func(o *Options) {
		o.Authorizer = Policy{
			"worker": {{Project: "*", Scope: "*", Perms: PermWork}},
			"reader": {{Project: "*", Scope: "*", Perms: PermRead}},
			"admin":  {{Project: "*", Scope: "*", Perms: PermAdmin | PermRead}},
		}
	})
	worker, reader, admin := e.db.As(Caller{ID: "worker"}), e.db.As(Caller{ID: "reader"}), e.db.As(Caller{ID: "admin"})
	if err := reader.ReportWorker(ctx, ns, WorkerPresence{ID: "w"}, time.Minute); !errors.Is(err, ErrPermission) {
		t.Fatalf("reader reports: %v", err)
	}
	if err := worker.ReportWorker(ctx, ns, WorkerPresence{ID: "w"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := worker.Workers(ctx, ns); !errors.Is(err, ErrPermission) {
		t.Fatalf("worker lists: %v", err)
	}
	if ids := workerIDs(t, reader, ns); len(ids) != 1 {
		t.Fatalf("reader lists %v", ids)
	}
	if err := reader.RemoveWorker(ctx, ns, "w"); !errors.Is(err, ErrPermission) {
		t.Fatalf("reader removes: %v", err)
	}
	if err := worker.ReportSchedule(ctx, ns, ScheduleInfo{Queue: "q", Name: "n", Spec: "@hourly"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(Presence) error{
		"pause":  func(p Presence) error { return p.PauseSchedule(ctx, ns, "q", "n") },
		"resume": func(p Presence) error { return p.ResumeSchedule(ctx, ns, "q", "n") },
		"run":    func(p Presence) error { return p.RunSchedule(ctx, ns, "q", "n") },
	} {
		if err := f(reader); !errors.Is(err, ErrPermission) {
			t.Errorf("reader %s: %v", name, err)
		}
		if err := f(admin); err != nil {
			t.Errorf("admin %s: %v", name, err)
		}
	}
}

// Schedules are listed with their pause state and run-now request; control
// calls on a schedule no runtime reports are ErrNotFound.
func TestScheduleControls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	s := ScheduleInfo{Queue: "reports/daily", Name: "a/b", Spec: "@hourly", Kind: "report", Worker: "w1", Next: t0.Add(time.Hour)}
	if err := e.db.ReportSchedule(ctx, ns, s, time.Minute); err != nil {
		t.Fatal(err)
	}
	// A name and queue with "/" in them do not collide with another split.
	if err := e.db.ReportSchedule(ctx, ns, ScheduleInfo{Queue: "reports", Name: "daily/a/b", Spec: "@daily"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	list := func() []ScheduleInfo {
		t.Helper()
		ss, err := e.db.Schedules(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		return ss
	}
	if ss := list(); len(ss) != 2 || ss[1].Name != "a/b" || ss[1].Paused || ss[1].RunRequested || !ss[1].Next.Equal(t0.Add(time.Hour)) {
		t.Fatalf("schedules = %+v", ss)
	}
	if err := e.db.PauseSchedule(ctx, ns, "reports/daily", "a/b"); err != nil {
		t.Fatal(err)
	}
	if err := e.db.RunSchedule(ctx, ns, "reports/daily", "a/b"); err != nil {
		t.Fatal(err)
	}
	if ss := list(); !ss[1].Paused || !ss[1].RunRequested || ss[0].Paused || ss[0].RunRequested {
		t.Fatalf("after pause and run: %+v", ss)
	}
	if err := e.db.ResumeSchedule(ctx, ns, "reports/daily", "a/b"); err != nil {
		t.Fatal(err)
	}
	if ss := list(); ss[1].Paused {
		t.Fatalf("after resume: %+v", ss)
	}
	if err := e.db.PauseSchedule(ctx, ns, "reports", "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pause of an unknown schedule: %v", err)
	}
	e.clock.Advance(time.Minute)
	if ss := list(); len(ss) != 0 {
		t.Fatalf("past the ttl: %+v", ss)
	}
	if err := e.db.RunSchedule(ctx, ns, "reports/daily", "a/b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("run of an expired schedule: %v", err)
	}
}
