package metrics_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/enginetest"
	"github.com/docketdb/docket/worker"
	"github.com/docketdb/docket/worker/metrics"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	bg = context.Background()
	t0 = time.Date(2030, 1, 2, 10, 0, 0, 0, time.UTC)
	ns = engine.NS("acme", "prod")
)

// TestCollectorAfterKnownWork runs a known mix of outcomes through a
// durable engine and a worker, then scrapes.
func TestCollectorAfterKnownWork(t *testing.T) {
	clock := engine.NewManualClock(t0)
	c := metrics.New(metrics.Options{})
	commits := make(chan struct{}, 1) // a batch was committed since the last look
	opts := engine.Options{Clock: clock}
	enginetest.Tap(&opts, func(uint64, []byte) {
		select {
		case commits <- struct{}{}:
		default:
		}
	})
	db, err := c.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)

	orders := db.Queue(ns, "orders")
	ids := map[string]uint64{}
	for _, kind := range []string{"ok", "bad", "flaky"} {
		res, err := orders.Enqueue(bg, engine.Task{Kind: kind, BackoffBase: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		ids[kind] = res.ID
	}
	if _, err := db.Queue(ns, "emails").Enqueue(bg, engine.Task{}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.As(engine.Caller{ID: "eve"}).Queue(ns, "orders").Enqueue(bg, engine.Task{}); !errors.Is(err, engine.ErrPermission) {
		t.Fatalf("denied enqueue: %v", err)
	}
	clock.Advance(2 * time.Second) // the completed task's latency

	mux := worker.NewMux()
	mux.HandleFunc("ok", func(context.Context, *worker.Task) error { return nil })
	mux.HandleFunc("bad", func(context.Context, *worker.Task) error { return worker.Permanent(errors.New("bad")) })
	mux.HandleFunc("flaky", func(context.Context, *worker.Task) error { return errors.New("flaky") })
	w := worker.New(db, worker.Options{Clock: clock, Owner: "w"})
	c.Instrument(w)
	w.Handle(ns, "orders", mux, worker.QueueOptions{Concurrency: 3})
	if err := w.Start(bg); err != nil {
		t.Fatal(err)
	}
	// Counts change only by commits: look again after each one.
	limit := time.NewTimer(5 * time.Second)
	defer limit.Stop()
	for {
		n, err := orders.Counts(bg)
		if err != nil {
			t.Fatal(err)
		}
		if n == (engine.Counts{Scheduled: 1, Dead: 1}) {
			break
		}
		select {
		case <-commits:
		case <-limit.C:
			t.Fatalf("outcomes not reached: %+v", n)
		}
	}
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.Checkpoint(bg); err != nil {
		t.Fatal(err)
	}

	const want = `
# HELP docket_calls_denied_total Calls refused for lack of permission.
# TYPE docket_calls_denied_total counter
docket_calls_denied_total{project="acme",scope="prod"} 1
# HELP docket_tasks Tasks by queue and state, read at scrape time.
# TYPE docket_tasks gauge
docket_tasks{project="acme",queue="emails",scope="prod",state="completed"} 0
docket_tasks{project="acme",queue="emails",scope="prod",state="dead"} 0
docket_tasks{project="acme",queue="emails",scope="prod",state="in_flight"} 0
docket_tasks{project="acme",queue="emails",scope="prod",state="ready"} 1
docket_tasks{project="acme",queue="emails",scope="prod",state="scheduled"} 0
docket_tasks{project="acme",queue="orders",scope="prod",state="completed"} 0
docket_tasks{project="acme",queue="orders",scope="prod",state="dead"} 1
docket_tasks{project="acme",queue="orders",scope="prod",state="in_flight"} 0
docket_tasks{project="acme",queue="orders",scope="prod",state="ready"} 0
docket_tasks{project="acme",queue="orders",scope="prod",state="scheduled"} 1
# HELP docket_tasks_claimed_total Tasks leased to a worker.
# TYPE docket_tasks_claimed_total counter
docket_tasks_claimed_total{project="acme",queue="emails",scope="prod"} 0
docket_tasks_claimed_total{project="acme",queue="orders",scope="prod"} 3
# HELP docket_tasks_completed_total Tasks completed.
# TYPE docket_tasks_completed_total counter
docket_tasks_completed_total{project="acme",queue="emails",scope="prod"} 0
docket_tasks_completed_total{project="acme",queue="orders",scope="prod"} 1
# HELP docket_tasks_dead_lettered_total Tasks moved to the dead-letter queue.
# TYPE docket_tasks_dead_lettered_total counter
docket_tasks_dead_lettered_total{project="acme",queue="emails",scope="prod"} 0
docket_tasks_dead_lettered_total{project="acme",queue="orders",scope="prod"} 1
# HELP docket_tasks_enqueued_total Tasks enqueued (deduplicated enqueues are not counted).
# TYPE docket_tasks_enqueued_total counter
docket_tasks_enqueued_total{project="acme",queue="emails",scope="prod"} 1
docket_tasks_enqueued_total{project="acme",queue="orders",scope="prod"} 3
# HELP docket_tasks_failed_total Handler runs that returned an error or panicked (counted by the worker middleware).
# TYPE docket_tasks_failed_total counter
docket_tasks_failed_total{project="acme",queue="emails",scope="prod"} 0
docket_tasks_failed_total{project="acme",queue="orders",scope="prod"} 2
# HELP docket_tasks_lease_lost_total Completions, failures and heartbeats refused because the lease was lost.
# TYPE docket_tasks_lease_lost_total counter
docket_tasks_lease_lost_total{project="acme",queue="emails",scope="prod"} 0
docket_tasks_lease_lost_total{project="acme",queue="orders",scope="prod"} 0
# HELP docket_tasks_retried_total Failed attempts scheduled to be retried.
# TYPE docket_tasks_retried_total counter
docket_tasks_retried_total{project="acme",queue="emails",scope="prod"} 0
docket_tasks_retried_total{project="acme",queue="orders",scope="prod"} 1
# HELP docket_snapshots_total Snapshots written since the DB was opened.
# TYPE docket_snapshots_total counter
docket_snapshots_total 1
`
	names := []string{"docket_calls_denied_total", "docket_tasks", "docket_tasks_claimed_total",
		"docket_tasks_completed_total", "docket_tasks_dead_lettered_total", "docket_tasks_enqueued_total",
		"docket_tasks_failed_total", "docket_tasks_lease_lost_total", "docket_tasks_retried_total",
		"docket_snapshots_total"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}

	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	hist := func(name string, labels map[string]string) *dto.Histogram {
		t.Helper()
		for _, f := range fams {
			if f.GetName() != name {
				continue
			}
		next:
			for _, m := range f.GetMetric() {
				for _, lp := range m.GetLabel() {
					if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
						continue next
					}
				}
				return m.GetHistogram()
			}
		}
		t.Fatalf("no %s %v", name, labels)
		return nil
	}
	if h := hist("docket_task_latency_seconds", map[string]string{"queue": "orders"}); h.GetSampleCount() != 1 || h.GetSampleSum() != 2 {
		t.Errorf("latency: %d samples, sum %v; want 1, 2 s", h.GetSampleCount(), h.GetSampleSum())
	}
	for _, o := range []string{"completed", "permanent", "failed"} {
		if h := hist("docket_handler_duration_seconds", map[string]string{"queue": "orders", "outcome": o}); h.GetSampleCount() != 1 {
			t.Errorf("handler %s: %d samples", o, h.GetSampleCount())
		}
	}
	fs, gs := hist("docket_wal_fsync_duration_seconds", nil), hist("docket_wal_fsync_group_size", nil)
	if fs.GetSampleCount() == 0 || gs.GetSampleCount() != fs.GetSampleCount() || gs.GetSampleSum() < float64(gs.GetSampleCount()) {
		t.Errorf("fsyncs: %d timed, %d groups of %v commits", fs.GetSampleCount(), gs.GetSampleCount(), gs.GetSampleSum())
	}
	if h := hist("docket_snapshot_duration_seconds", nil); h.GetSampleCount() != 1 {
		t.Errorf("snapshots timed: %d", h.GetSampleCount())
	}
	if n, err := testutil.GatherAndCount(reg, "docket_snapshot_bytes"); err != nil || n != 1 {
		t.Errorf("snapshot bytes: %d %v", n, err)
	}
	for _, f := range fams {
		if f.GetName() == "docket_snapshot_bytes" && f.GetMetric()[0].GetGauge().GetValue() <= 0 {
			t.Errorf("snapshot bytes %v", f.GetMetric()[0].GetGauge().GetValue())
		}
		if f.GetName() == "docket_log_syncs_total" && f.GetMetric()[0].GetCounter().GetValue() < float64(fs.GetSampleCount()) {
			t.Errorf("log syncs %v < %d fsyncs observed", f.GetMetric()[0].GetCounter().GetValue(), fs.GetSampleCount())
		}
	}
}

// TestCollectorWithoutDB: a Collector that watches no DB, or a closed one,
// still scrapes what it observed.
func TestCollectorWithoutDB(t *testing.T) {
	c := metrics.New(metrics.Options{Prefix: "q", ConstLabels: prometheus.Labels{"instance": "a"}})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if n, err := testutil.GatherAndCount(reg, "q_tasks", "q_commits_total"); err != nil || n != 0 {
		t.Fatalf("scrape without a DB: %d %v", n, err)
	}
	db, err := engine.OpenInMemory(engine.Options{Observer: c})
	if err != nil {
		t.Fatal(err)
	}
	c.Watch(db)
	if _, err := db.Queue(ns, "q").Enqueue(bg, engine.Task{}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	const want = `
# HELP q_tasks_enqueued_total Tasks enqueued (deduplicated enqueues are not counted).
# TYPE q_tasks_enqueued_total counter
q_tasks_enqueued_total{instance="a",project="acme",queue="q",scope="prod"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "q_tasks_enqueued_total"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "q_tasks"); err != nil || n != 0 {
		t.Fatalf("gauges of a closed DB: %d %v", n, err)
	}
}

func BenchmarkObserverTaskEvents(b *testing.B) {
	c := metrics.New(metrics.Options{})
	evs := []engine.TaskEvent{{Kind: engine.EvClaimed, Namespace: ns, Queue: "q"},
		{Kind: engine.EvCompleted, Namespace: ns, Queue: "q", Latency: time.Millisecond}}
	b.ReportAllocs()
	for b.Loop() {
		c.TaskEvents(evs)
	}
}
