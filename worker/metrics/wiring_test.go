package metrics_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
	"github.com/docketdb/docket/worker/metrics"
)

// TestNamespacesWithSlashesDoNotCollide: ("a/b", "c") and ("a", "b/c")
// are different namespaces and give different series; the scrape works.
func TestNamespacesWithSlashesDoNotCollide(t *testing.T) {
	c := metrics.New(metrics.Options{})
	db, err := c.OpenInMemory(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	for _, n := range []engine.Namespace{engine.NS("a/b", "c"), engine.NS("a", "b/c")} {
		if _, err := db.Queue(n, "q").Enqueue(bg, engine.Task{}); err != nil {
			t.Fatal(err)
		}
	}
	const want = `
# HELP docket_tasks_enqueued_total Tasks enqueued (deduplicated enqueues are not counted).
# TYPE docket_tasks_enqueued_total counter
docket_tasks_enqueued_total{project="a",queue="q",scope="b/c"} 1
docket_tasks_enqueued_total{project="a/b",queue="q",scope="c"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "docket_tasks_enqueued_total"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "docket_tasks"); err != nil || n != 10 {
		t.Fatalf("gauges: %d %v", n, err)
	}
}

// TestSeriesDisappearWithTheQueue: once a queue holds no task, its gauges
// are gone at once and its counters and histograms at the first scrape
// that saw no event for it; the Collector keeps nothing for it.
func TestSeriesDisappearWithTheQueue(t *testing.T) {
	c := metrics.New(metrics.Options{})
	db, err := c.OpenInMemory(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	q := db.Queue(ns, "brief")
	if _, err := q.Enqueue(bg, engine.Task{}); err != nil {
		t.Fatal(err)
	}
	count := func(name string) int {
		t.Helper()
		n, err := testutil.GatherAndCount(reg, name)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if count("docket_tasks") != 5 || count("docket_tasks_enqueued_total") != 1 {
		t.Fatal("the queue's series are missing")
	}
	ls, err := q.Claim(bg, "w", time.Minute, 1)
	if err != nil || len(ls) != 1 {
		t.Fatalf("claim: %v", err)
	}
	if _, err := q.Complete(bg, ls[0], engine.Done{}); err != nil {
		t.Fatal(err)
	}
	if n := count("docket_tasks"); n != 0 {
		t.Fatalf("%d gauges of an empty queue", n)
	}
	// That scrape saw the completion; the next one sees nothing new.
	if n := count("docket_tasks_completed_total") + count("docket_task_latency_seconds"); n != 0 {
		t.Fatalf("%d series of a queue that is gone", n)
	}
	if _, err := q.Enqueue(bg, engine.Task{}); err != nil {
		t.Fatal(err)
	}
	if count("docket_tasks_enqueued_total") != 1 {
		t.Fatal("a queue that came back has no counters")
	}
}

// TestWatchAView: Watch takes any engine.API; a caller's view exports the
// queues the caller may read.
func TestWatchAView(t *testing.T) {
	c := metrics.New(metrics.Options{})
	db, err := engine.OpenInMemory(c.Observe(engine.Options{
		Authorizer: engine.Policy{"ops": {{Project: "acme", Scope: "*", Perms: engine.PermRead}}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c.Watch(db.As(engine.Caller{ID: "ops"}))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	for _, n := range []engine.Namespace{ns, engine.NS("other", "prod")} {
		if _, err := db.Queue(n, "q").Enqueue(bg, engine.Task{}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "docket_tasks"); err != nil || n != 5 {
		t.Fatalf("gauges through the view: %d %v", n, err)
	}
}

// TestWiringWarnings: each missing step is named once, in a warning; the
// full wiring gives none.
func TestWiringWarnings(t *testing.T) {
	type setup func(t *testing.T, c *metrics.Collector) (*engine.DB, *worker.Worker)
	open := func(t *testing.T, opts engine.Options) *engine.DB {
		db, err := engine.OpenInMemory(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	cases := []struct {
		name  string
		setup setup
		want  []string
	}{
		{"full", func(t *testing.T, c *metrics.Collector) (*engine.DB, *worker.Worker) {
			db, err := c.OpenInMemory(engine.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			w := worker.New(db, worker.Options{})
			c.Instrument(w)
			return db, w
		}, nil},
		{"no watch", func(t *testing.T, c *metrics.Collector) (*engine.DB, *worker.Worker) {
			db := open(t, c.Observe(engine.Options{}))
			w := worker.New(db, worker.Options{})
			c.Instrument(w)
			return db, w
		}, []string{"no API watched"}},
		{"no observer", func(t *testing.T, c *metrics.Collector) (*engine.DB, *worker.Worker) {
			db := open(t, engine.Options{})
			c.Watch(db)
			w := worker.New(db, worker.Options{})
			c.Instrument(w)
			return db, w
		}, []string{"engine.Options.Observer"}},
		{"no middleware", func(t *testing.T, c *metrics.Collector) (*engine.DB, *worker.Worker) {
			db, err := c.OpenInMemory(engine.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db, worker.New(db, worker.Options{})
		}, []string{"middleware is not installed"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logs := &lines{}
			c := metrics.New(metrics.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(c)
			db, w := tc.setup(t, c)
			done := make(chan struct{})
			w.HandleFunc(ns, "q", func(context.Context, *worker.Task) error { close(done); return nil }, worker.QueueOptions{})
			if _, err := db.Queue(ns, "q").Enqueue(bg, engine.Task{}); err != nil {
				t.Fatal(err)
			}
			if err := w.Start(bg); err != nil {
				t.Fatal(err)
			}
			<-done
			if err := w.Stop(bg); err != nil {
				t.Fatal(err)
			}
			for range 2 { // warned once, not at every scrape
				if _, err := reg.Gather(); err != nil {
					t.Fatal(err)
				}
			}
			got := logs.all()
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q, want %q", got, tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], "level=WARN") || !strings.Contains(got[i], w) {
					t.Fatalf("warning %q, want %q", got[i], w)
				}
			}
		})
	}
}

type lines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.TrimSpace(l.b.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// remoteAPI stands for a network client (client.Client): an engine.API
// whose engine counters come from Stats(ctx), asked of a server.
type remoteAPI struct {
	engine.API
	db  *engine.DB
	err error // what Stats answers instead, if set
}

func (r remoteAPI) Stats(ctx context.Context) (engine.Stats, error) {
	if r.err != nil {
		return engine.Stats{}, r.err
	}
	return r.db.Stats(), ctx.Err()
}

// TestWatchAClient: the engine counters of an API whose Stats takes a
// context (a client of a server) are exported, without the warning meant
// for an in-process DB that does not call the Collector (a server's engine
// is another process's); when the server refuses Stats, the scrape still
// exports the tasks, and no counters.
func TestWatchAClient(t *testing.T) {
	db, err := engine.OpenInMemory(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for range 3 {
		if _, err := db.Queue(ns, "q").Enqueue(bg, engine.Task{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		err     error
		commits int
	}{
		{"answers", nil, 1},
		{"refuses", engine.ErrPermission, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &lines{}
			c := metrics.New(metrics.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
			// As an engine.API field, the DB shows no Stats() of its own.
			c.Watch(remoteAPI{API: db, db: db, err: tc.err})
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(c)
			if n, err := testutil.GatherAndCount(reg, "docket_commits_total"); err != nil || n != tc.commits {
				t.Fatalf("docket_commits_total: %d series, %v; want %d", n, err, tc.commits)
			}
			if n, err := testutil.GatherAndCount(reg, "docket_tasks"); err != nil || n != 5 {
				t.Fatalf("docket_tasks: %d series, %v", n, err)
			}
			if tc.err == nil {
				want := "# HELP docket_task_records Task records held in memory.\n# TYPE docket_task_records gauge\ndocket_task_records 3\n"
				if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "docket_task_records"); err != nil {
					t.Fatal(err)
				}
			}
			if got := logs.all(); len(got) != 0 {
				t.Fatalf("warnings: %q", got)
			}
		})
	}
}
