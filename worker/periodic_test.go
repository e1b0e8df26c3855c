package worker_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/enginetest"
	"github.com/docketdb/docket/worker"
)

func tickKey(name string, at time.Time) string {
	return "periodic:" + name + ":" + strconv.FormatInt(at.Unix(), 10)
}

func at(hhmm string) time.Time {
	t, err := time.Parse("15:04", hhmm)
	if err != nil {
		panic(err)
	}
	return time.Date(t0.Year(), t0.Month(), t0.Day(), t.Hour(), t.Minute(), 0, 0, time.UTC)
}

// TestPeriodicTwoRuntimesOneTaskPerTick: two Workers run one schedule on
// one engine; every tick is enqueued once.
func TestPeriodicTwoRuntimesOneTaskPerTick(t *testing.T) {
	e := newEnv(t)
	var ws []*worker.Worker
	for _, owner := range []string{"a", "b"} {
		w := e.worker(worker.Options{Owner: owner})
		if err := w.Periodic(ns, "reports", "*/5 * * * *", engine.Task{Kind: "report", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		e.start(w)
		ws = append(ws, w)
	}
	count := func() int { c, _ := e.q("reports").Counts(bg); return c.Ready }
	if n := count(); n != 0 {
		t.Fatalf("first start enqueued %d tasks for past ticks", n)
	}
	e.clock.Advance(3 * time.Minute) // 10:05
	e.eventually("tick 1", func() bool { return count() == 1 })
	for k := 2; k <= 4; k++ {
		e.clock.Advance(5 * time.Minute)
		e.eventually("tick "+strconv.Itoa(k), func() bool { return count() >= k })
	}
	e.clock.Advance(time.Minute) // no tick at 10:21
	for _, w := range ws {
		e.stop(w)
	}
	page, err := e.q("reports").List(bg, engine.ListOptions{State: engine.Ready})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, ti := range page.Tasks {
		keys = append(keys, ti.IdempotencyKey)
		if ti.Kind != "report" || ti.Headers[worker.PeriodicTickHeader] == "" {
			t.Fatalf("task %+v", ti)
		}
	}
	want := []string{tickKey("report", at("10:05")), tickKey("report", at("10:10")),
		tickKey("report", at("10:15")), tickKey("report", at("10:20"))}
	if !slices.Equal(keys, want) {
		t.Fatalf("ticks %v, want %v", keys, want)
	}
	if v, err := e.db.SystemKV(ns).Get(bg, worker.PeriodicKeyPrefix+"reports/report"); err != nil ||
		string(v.Value) != strconv.FormatInt(at("10:20").Unix(), 10) {
		t.Fatalf("last tick: %v %q", err, v.Value)
	}
}

// TestPeriodicRestartCatchesUpOnce: a schedule that was down for several
// ticks enqueues only the latest missed one on restart, and a restart with
// nothing missed enqueues nothing, even with idempotency keys forgotten at
// once.
func TestPeriodicRestartCatchesUpOnce(t *testing.T) {
	dir := t.TempDir()
	clock := newTestClock(t0)
	logs := &logRecorder{}
	var mu sync.Mutex
	var ticks []time.Time
	got := make(chan struct{}, 10)
	sig := &signal{}
	clock.sig = sig
	logs.sig = sig
	var e *env
	run := func() (*engine.DB, *worker.Worker) {
		t.Helper()
		opts := engine.Options{Clock: clock, IdempotencyTTL: -1}
		enginetest.Tap(&opts, func(uint64, []byte) { sig.notify() })
		db, err := engine.Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		e = &env{t: t, clock: clock, db: db, logs: logs, sig: sig}
		w := e.worker(worker.Options{})
		if err := w.Periodic(ns, "reports", "*/5 * * * *", engine.Task{Kind: "report"}); err != nil {
			t.Fatal(err)
		}
		w.HandleFunc(ns, "reports", func(ctx context.Context, tk *worker.Task) error {
			s, _ := strconv.ParseInt(tk.Headers[worker.PeriodicTickHeader], 10, 64)
			mu.Lock()
			ticks = append(ticks, time.Unix(s, 0).UTC())
			mu.Unlock()
			got <- struct{}{}
			return nil
		}, worker.QueueOptions{})
		e.start(w)
		return db, w
	}
	shutdown := func(db *engine.DB, w *worker.Worker) {
		t.Helper()
		if err := w.Stop(bg); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(want ...string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		var ws []time.Time
		for _, s := range want {
			ws = append(ws, at(s))
		}
		if !slices.Equal(ticks, ws) {
			t.Fatalf("ticks %v, want %v", ticks, ws)
		}
	}

	// handled waits until the task a handler just took is completed: a
	// clock moved past its lease first would end the lease, and the task
	// would run again.
	var db *engine.DB
	handled := func() {
		t.Helper()
		recv(t, got)
		e.eventually("the completion", func() bool {
			c, err := db.Queue(ns, "reports").Counts(bg)
			return err == nil && c == (engine.Counts{})
		})
	}
	db, w := run() // 10:02
	clock.Advance(3 * time.Minute)
	handled()
	clock.Advance(5 * time.Minute)
	handled()
	shutdown(db, w)
	expect("10:05", "10:10")

	clock.Advance(22 * time.Minute) // down over 10:15, 10:20, 10:25, 10:30
	db, w = run()
	handled() // the catch-up was enqueued before Start returned
	shutdown(db, w)
	expect("10:05", "10:10", "10:30")

	db, w = run()                           // nothing missed
	if st := db.Stats(); st.Enqueued != 0 { // Start enqueues the catch-up before it returns
		t.Fatalf("a restart without downtime enqueued a tick: %+v", st)
	}
	clock.Advance(3 * time.Minute)
	handled()
	shutdown(db, w)
	expect("10:05", "10:10", "10:30", "10:35")
}

func TestPeriodicRegistration(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{})
	if err := w.Periodic(ns, "q", "not a spec", engine.Task{}); err == nil {
		t.Fatal("bad spec accepted")
	}
	if err := w.Periodic(ns, "q", "@hourly", engine.Task{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Periodic(ns, "q", "@daily", engine.Task{Kind: "k"}); err == nil {
		t.Fatal("duplicate name accepted")
	}
	if err := w.Periodic(ns, "q", "@daily", engine.Task{Kind: "k", IdempotencyKey: "k-daily"}); err != nil {
		t.Fatalf("distinct name refused: %v", err)
	}
	if err := w.Periodic(ns, "other", "@daily", engine.Task{Kind: "k"}); err != nil {
		t.Fatalf("same name on another queue refused: %v", err)
	}
}

// TestPeriodicStateOutOfReachOfKVWriters: a schedule's last tick lives in
// the namespace's system area. A caller holding only kv-read and kv-write
// cannot read, change or even see it (the attack that set the tick to 2^40
// and silenced the schedule), the schedule keeps ticking, and a runtime
// whose caller lacks PermSystem is refused at Start instead of failing
// quietly at the first tick.
func TestPeriodicStateOutOfReachOfKVWriters(t *testing.T) {
	e := newEnv(t, func(o *engine.Options) {
		o.Authorizer = engine.Policy{
			"runner": {{Project: "*", Scope: "*", Perms: engine.PermEnqueue | engine.PermSystem}},
			"tenant": {{Project: "*", Scope: "*", Perms: engine.PermKVRead | engine.PermKVWrite}},
			"plain":  {{Project: "*", Scope: "*", Perms: engine.PermEnqueue | engine.PermKVRead | engine.PermKVWrite}},
		}
	})
	w := worker.New(e.db.As(engine.Caller{ID: "runner"}), worker.Options{Clock: e.clock, Owner: "w"})
	t.Cleanup(func() { w.Stop(bg) })
	if err := w.Periodic(ns, "reports", "*/5 * * * *", engine.Task{Kind: "report"}); err != nil {
		t.Fatal(err)
	}
	e.start(w)
	key := worker.PeriodicKeyPrefix + "reports/report"
	tenant := e.db.As(engine.Caller{ID: "tenant"})
	silence := engine.Set(key, []byte(strconv.FormatInt(1<<40, 10)))
	if _, err := tenant.KV(ns).Commit(bg, silence); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("a kv-write caller set the schedule's state: %v", err)
	}
	if _, err := tenant.KV(ns).Get(bg, key); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("a kv-read caller read the schedule's state: %v", err)
	}
	if _, err := tenant.SystemKV(ns).Commit(bg, silence); !errors.Is(err, engine.ErrPermission) {
		t.Fatalf("a kv-write caller reached the system area: %v", err)
	}
	if es, err := tenant.KV(ns).Scan(bg, engine.ScanOptions{}); err != nil || len(es) != 0 {
		t.Fatalf("the scan shows %v (%v)", es, err)
	}
	if v, err := e.db.SystemKV(ns).Get(bg, key); err != nil || string(v.Value) != strconv.FormatInt(at("10:00").Unix(), 10) {
		t.Fatalf("the schedule's state: %q %v", v.Value, err)
	}
	e.clock.Advance(3 * time.Minute) // 10:05
	e.eventually("the 10:05 tick", func() bool { c, _ := e.q("reports").Counts(bg); return c.Ready == 1 })
	e.stop(w)

	plain := worker.New(e.db.As(engine.Caller{ID: "plain"}), worker.Options{Clock: e.clock, Owner: "w"})
	if err := plain.Periodic(ns, "reports", "*/5 * * * *", engine.Task{Kind: "report"}); err != nil {
		t.Fatal(err)
	}
	if err := plain.Start(bg); !errors.Is(err, engine.ErrPermission) {
		t.Fatalf("a runtime without the system permission started: %v", err)
	}
}

// TestPeriodicNeedsASystemArea: an API that offers no system area (one
// that does not implement engine.SystemAPI) cannot keep a schedule's state
// out of the tenant's keys, so Periodic refuses it.
func TestPeriodicNeedsASystemArea(t *testing.T) {
	e := newEnv(t)
	w := worker.New(struct{ engine.API }{e.db}, worker.Options{Clock: e.clock, Owner: "w"})
	if err := w.Periodic(ns, "q", "@hourly", engine.Task{Kind: "k"}); err == nil || !strings.Contains(err.Error(), "SystemAPI") {
		t.Fatalf("periodic on an API without a system area: %v", err)
	}
}
