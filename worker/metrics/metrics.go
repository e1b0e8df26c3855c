package metrics

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

// Options configure a Collector. The zero value is fine.
type Options struct {
	// Prefix starts every metric name. Default "docket".
	Prefix string
	// ConstLabels are added to every metric (an instance name, say).
	ConstLabels prometheus.Labels
	// DurationBuckets are the upper bounds, in seconds, of the handler
	// duration, task latency and snapshot duration histograms. Default: 1 ms
	// doubling to about 65 s.
	DurationBuckets []float64
	// FsyncBuckets are the upper bounds, in seconds, of the log fsync
	// histogram. Default: 50 µs doubling to about 1.6 s.
	FsyncBuckets []float64
	// ScrapeTimeout bounds the read of the DB's queues at scrape time.
	// Default 5 s.
	ScrapeTimeout time.Duration
	// Logger receives the warning, once per Collector, that a wiring step
	// is missing (see the package documentation). Default slog.Default().
	Logger *slog.Logger
}

// counters kept per queue, in the order of counterNames.
const (
	cEnqueued = iota
	cClaimed
	cCompleted
	cFailed
	cRetried
	cDead
	cLeaseLost
	cReclaimed
	cCancelled
	cRedriven
	numCounters
)

var counterNames = [numCounters][2]string{
	{"tasks_enqueued_total", "Tasks enqueued (deduplicated enqueues are not counted)."},
	{"tasks_claimed_total", "Tasks leased to a worker."},
	{"tasks_completed_total", "Tasks completed."},
	{"tasks_failed_total", "Handler runs that returned an error or panicked (counted by the worker middleware)."},
	{"tasks_retried_total", "Failed attempts scheduled to be retried."},
	{"tasks_dead_lettered_total", "Tasks moved to the dead-letter queue."},
	{"tasks_lease_lost_total", "Completions, failures and heartbeats refused because the lease was lost."},
	{"tasks_reclaimed_total", "Expired leases taken back to ready."},
	{"tasks_cancelled_total", "Tasks cancelled."},
	{"tasks_redriven_total", "Dead tasks moved back to ready."},
}

var eventCounter = map[engine.EventKind]int{
	engine.EvEnqueued:  cEnqueued,
	engine.EvClaimed:   cClaimed,
	engine.EvCompleted: cCompleted,
	engine.EvRetried:   cRetried,
	engine.EvDead:      cDead,
	engine.EvLeaseLost: cLeaseLost,
	engine.EvReclaimed: cReclaimed,
	engine.EvCancelled: cCancelled,
	engine.EvRedriven:  cRedriven,
}

// states in the order of engine.Counts' fields, with their label values.
var stateNames = [...]string{"ready", "scheduled", "in_flight", "dead", "completed"}

type queueKey struct {
	ns    engine.Namespace
	queue string
}

// queueStats is what a Collector keeps for one queue.
type queueStats struct {
	counts  [numCounters]atomic.Uint64
	latency prometheus.Observer
	touched atomic.Bool // an event since the last scrape

	mu      sync.Mutex
	handler map[worker.Outcome]prometheus.Observer
}

// Collector gathers docket metrics; see the package documentation for
// how to plug it in and what it exports. It is safe for concurrent use.
type Collector struct {
	opts Options
	api  atomic.Pointer[watched]

	// What the Collector has seen of its wiring, to warn of a missing step.
	observed  atomic.Bool // the engine called the Observer
	middle    atomic.Bool // Middleware was taken
	timed     atomic.Bool // the middleware timed a run
	claimed   atomic.Bool // the engine leased a task
	warnedFor sync.Map    // the warnings given, by text

	mu     sync.RWMutex
	queues map[queueKey]*queueStats
	// nsQueues counts the queues of each namespace in queues: refused
	// calls are counted per namespace only for those (see deny).
	nsQueues map[engine.Namespace]int
	denied   map[engine.Namespace]*atomic.Uint64
	// deniedElsewhere counts refused calls naming any other namespace.
	deniedElsewhere atomic.Uint64

	counterDescs                [numCounters]*prometheus.Desc
	deniedDesc, tasksDesc       *prometheus.Desc
	commitsDesc, logBytesDesc   *prometheus.Desc
	logSyncsDesc, snapshotsDesc *prometheus.Desc
	recordsDesc                 *prometheus.Desc
	memoryDesc, budgetDesc      *prometheus.Desc
	valueLogDesc, valueLiveDesc *prometheus.Desc
	unreadableDesc              *prometheus.Desc
	latency, handler            *prometheus.HistogramVec
	fsync, group, snapshot      prometheus.Histogram
	snapshotBytes               prometheus.Gauge
	snapshotFailures            prometheus.Counter
}

// New returns a Collector with no DB to watch yet.
func New(opts Options) *Collector {
	if opts.Prefix == "" {
		opts.Prefix = "docket"
	}
	if opts.DurationBuckets == nil {
		opts.DurationBuckets = prometheus.ExponentialBuckets(0.001, 2, 17)
	}
	if opts.FsyncBuckets == nil {
		opts.FsyncBuckets = prometheus.ExponentialBuckets(0.00005, 2, 16)
	}
	if opts.ScrapeTimeout <= 0 {
		opts.ScrapeTimeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Collector{opts: opts, queues: make(map[queueKey]*queueStats), nsQueues: make(map[engine.Namespace]int),
		denied: make(map[engine.Namespace]*atomic.Uint64)}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(opts.Prefix+"_"+name, help, labels, opts.ConstLabels)
	}
	for i, n := range counterNames {
		c.counterDescs[i] = desc(n[0], n[1], "project", "scope", "queue")
	}
	c.deniedDesc = desc("calls_denied_total", "Calls refused for lack of permission.", "project", "scope")
	c.tasksDesc = desc("tasks", "Tasks by queue and state, read at scrape time.", "project", "scope", "queue", "state")
	c.commitsDesc = desc("commits_total", "Batches committed since the DB was opened.")
	c.logBytesDesc = desc("log_bytes_total", "Bytes written to the log since the DB was opened.")
	c.logSyncsDesc = desc("log_syncs_total", "Fsyncs of the log since the DB was opened.")
	c.snapshotsDesc = desc("snapshots_total", "Snapshots written since the DB was opened.")
	c.recordsDesc = desc("task_records", "Task records held in memory.")
	c.memoryDesc = desc("memory_bytes", "What the state takes as the memory budget counts it.")
	c.budgetDesc = desc("memory_budget_bytes", "The memory budget (Options.MaxMemory; 0: none).")
	c.valueLogDesc = desc("value_log_bytes", "The value log's files on disk (values of Options.ValueThreshold bytes or more).")
	c.valueLiveDesc = desc("value_live_bytes", "The bytes of the values in the value log that tasks still hold.")
	c.unreadableDesc = desc("unreadable_values_total", "Reads of a value in the value log that failed (damage or an I/O error; docket verify lists the damage).")

	hopts := func(name, help string, buckets []float64) prometheus.HistogramOpts {
		return prometheus.HistogramOpts{Namespace: opts.Prefix, Name: name, Help: help,
			ConstLabels: opts.ConstLabels, Buckets: buckets}
	}
	c.latency = prometheus.NewHistogramVec(hopts("task_latency_seconds",
		"Time from a task's creation to its completion.", opts.DurationBuckets), []string{"project", "scope", "queue"})
	c.handler = prometheus.NewHistogramVec(hopts("handler_duration_seconds",
		"Wall time of handler runs, by how they ended.", opts.DurationBuckets), []string{"project", "scope", "queue", "outcome"})
	c.fsync = prometheus.NewHistogram(hopts("wal_fsync_duration_seconds",
		"Duration of fsyncs of the log.", opts.FsyncBuckets))
	c.group = prometheus.NewHistogram(hopts("wal_fsync_group_size",
		"Commits made durable by one fsync of the log.", prometheus.ExponentialBuckets(1, 2, 12)))
	c.snapshot = prometheus.NewHistogram(hopts("snapshot_duration_seconds",
		"Time to write a snapshot.", opts.DurationBuckets))
	c.snapshotBytes = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: opts.Prefix, Name: "snapshot_bytes",
		Help: "Size of the last snapshot written.", ConstLabels: opts.ConstLabels})
	c.snapshotFailures = prometheus.NewCounter(prometheus.CounterOpts{Namespace: opts.Prefix,
		Name: "snapshot_failures_total", Help: "Snapshots that failed.", ConstLabels: opts.ConstLabels})
	return c
}

// watched is the API a Collector reads at scrape time.
type watched struct {
	api engine.API
	// stats reads the engine's counters: an in-process DB's Stats, or a
	// network client's Stats(ctx); nil if api has neither.
	stats func(context.Context) (engine.Stats, error)
	// local is set when the engine runs in this process (Stats without a
	// context), so that it should be calling the Collector as its Observer.
	local bool
}

// Watch makes scrapes read the number of tasks per queue and state from
// api, and the engine's counters if api has them: an *engine.DB (or
// anything with its Stats() method), or a network client of a server
// (client.Client, whose Stats(ctx) asks the server, and needs admin on
// */* when the server has tokens; a scrape whose call fails exports no
// engine counters). A caller's view (db.As) or a client sees only the
// namespaces the caller may read; give the DB as opened to export every
// queue. Per-queue series of a queue api no longer lists (it holds no task)
// disappear at the next scrape without events for it.
func (c *Collector) Watch(api engine.API) {
	w := &watched{api: api}
	switch st := api.(type) {
	case interface{ Stats() engine.Stats }:
		w.stats = func(context.Context) (engine.Stats, error) { return st.Stats(), nil }
		w.local = true
	case interface {
		Stats(context.Context) (engine.Stats, error)
	}:
		w.stats = st.Stats
	}
	c.api.Store(w)
}

// Observe returns opts with the Collector as its Observer, next to an
// Observer already set (both are told everything).
func (c *Collector) Observe(opts engine.Options) engine.Options {
	if opts.Observer == nil || opts.Observer == engine.Observer(c) {
		opts.Observer = c
	} else {
		opts.Observer = tee{opts.Observer, c}
	}
	return opts
}

// Open opens the docket directory dir (engine.Open) with the Collector as
// an Observer and watches it: the engine's side of the wiring in one call.
func (c *Collector) Open(dir string, opts engine.Options) (*engine.DB, error) {
	db, err := engine.Open(dir, c.Observe(opts))
	if err == nil {
		c.Watch(db)
	}
	return db, err
}

// OpenInMemory is Open for engine.OpenInMemory.
func (c *Collector) OpenInMemory(opts engine.Options) (*engine.DB, error) {
	db, err := engine.OpenInMemory(c.Observe(opts))
	if err == nil {
		c.Watch(db)
	}
	return db, err
}

// Instrument adds the Collector's Middleware to each Worker: the workers'
// side of the wiring.
func (c *Collector) Instrument(ws ...*worker.Worker) {
	for _, w := range ws {
		w.Use(c.Middleware())
	}
}

// tee is two Observers.
type tee [2]engine.Observer

func (t tee) TaskEvents(evs []engine.TaskEvent) { t[0].TaskEvents(evs); t[1].TaskEvents(evs) }
func (t tee) Synced(d time.Duration, n int)     { t[0].Synced(d, n); t[1].Synced(d, n) }
func (t tee) Snapshot(ev engine.SnapshotEvent)  { t[0].Snapshot(ev); t[1].Snapshot(ev) }

// warn logs a missing wiring step once.
func (c *Collector) warn(msg string) {
	if _, done := c.warnedFor.LoadOrStore(msg, true); !done {
		c.opts.Logger.Warn("docket metrics: " + msg)
	}
}

// queue returns the stats of a queue, creating them on first use.
func (c *Collector) queue(k queueKey) *queueStats {
	c.mu.RLock()
	qs := c.queues[k]
	c.mu.RUnlock()
	if qs != nil {
		return qs
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if qs = c.queues[k]; qs == nil {
		qs = &queueStats{latency: c.latency.WithLabelValues(k.ns.Project, k.ns.Scope, k.queue)}
		c.queues[k] = qs
		c.nsQueues[k.ns]++
	}
	return qs
}

// TaskEvents implements engine.Observer.
func (c *Collector) TaskEvents(events []engine.TaskEvent) {
	if !c.observed.Load() {
		c.observed.Store(true)
	}
	var qs *queueStats
	var last queueKey
	for i := range events {
		ev := &events[i]
		if ev.Kind == engine.EvDenied {
			c.deny(ev.Namespace)
			continue
		}
		idx, ok := eventCounter[ev.Kind]
		if !ok {
			continue
		}
		if k := (queueKey{ev.Namespace, ev.Queue}); qs == nil || k != last {
			qs, last = c.queue(k), k
			if !qs.touched.Load() {
				qs.touched.Store(true)
			}
		}
		if idx == cClaimed && !c.claimed.Load() {
			c.claimed.Store(true)
		}
		qs.counts[idx].Add(1)
		if ev.Kind == engine.EvCompleted {
			qs.latency.Observe(ev.Latency.Seconds())
		}
	}
}

// deny counts a refused call. A refused call's namespace is whatever the
// caller named, possibly invented: it gets a series of its own only if the
// Collector keeps a queue of that namespace (work happened there), and is
// otherwise counted in the series with empty project and scope. So refused
// calls leave no state per name, and the series per namespace go when its
// queues do.
func (c *Collector) deny(ns engine.Namespace) {
	c.mu.RLock()
	n := c.denied[ns]
	known := c.nsQueues[ns] > 0
	c.mu.RUnlock()
	if n == nil && known {
		c.mu.Lock()
		if n = c.denied[ns]; n == nil && c.nsQueues[ns] > 0 {
			n = new(atomic.Uint64)
			c.denied[ns] = n
		}
		c.mu.Unlock()
	}
	if n == nil {
		c.deniedElsewhere.Add(1)
		return
	}
	n.Add(1)
}

// Synced implements engine.Observer.
func (c *Collector) Synced(d time.Duration, records int) {
	c.observed.Store(true)
	c.fsync.Observe(d.Seconds())
	c.group.Observe(float64(records))
}

// Snapshot implements engine.Observer.
func (c *Collector) Snapshot(ev engine.SnapshotEvent) {
	if ev.Err != nil {
		c.snapshotFailures.Inc()
		return
	}
	c.snapshot.Observe(ev.Duration.Seconds())
	c.snapshotBytes.Set(float64(ev.Bytes))
}

// failed reports the outcomes counted as failed attempts.
func failed(o worker.Outcome) bool {
	switch o {
	case worker.OutcomeFailed, worker.OutcomePanicked, worker.OutcomePermanent,
		worker.OutcomeRetryAfter, worker.OutcomeTimedOut:
		return true
	}
	return false
}

// Middleware returns worker middleware that times every handler run by
// queue and outcome (worker.OutcomeOf) and counts failed runs. Durations
// are wall time, whatever clock the Worker uses. Add it with Worker.Use,
// outside any middleware whose time should count.
func (c *Collector) Middleware() worker.Middleware {
	c.middle.Store(true)
	return func(next worker.Handler) worker.Handler {
		return worker.HandlerFunc(func(ctx context.Context, t *worker.Task) error {
			start := time.Now()
			err := next.Work(ctx, t)
			d := time.Since(start)
			o := worker.OutcomeOf(ctx, err)
			if !c.timed.Load() {
				c.timed.Store(true)
			}
			qs := c.queue(queueKey{t.Namespace, t.Queue})
			qs.touched.Store(true)
			c.handlerObserver(qs, t, o).Observe(d.Seconds())
			if failed(o) {
				qs.counts[cFailed].Add(1)
			}
			return err
		})
	}
}

func (c *Collector) handlerObserver(qs *queueStats, t *worker.Task, o worker.Outcome) prometheus.Observer {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	obs := qs.handler[o]
	if obs == nil {
		if qs.handler == nil {
			qs.handler = make(map[worker.Outcome]prometheus.Observer)
		}
		obs = c.handler.WithLabelValues(t.Namespace.Project, t.Namespace.Scope, t.Queue, o.String())
		qs.handler[o] = obs
	}
	return obs
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.counterDescs {
		ch <- d
	}
	for _, d := range []*prometheus.Desc{c.deniedDesc, c.tasksDesc, c.commitsDesc, c.logBytesDesc,
		c.logSyncsDesc, c.snapshotsDesc, c.recordsDesc, c.memoryDesc, c.budgetDesc, c.valueLogDesc, c.valueLiveDesc,
		c.unreadableDesc} {
		ch <- d
	}
	c.latency.Describe(ch)
	c.handler.Describe(ch)
	c.fsync.Describe(ch)
	c.group.Describe(ch)
	c.snapshot.Describe(ch)
	c.snapshotBytes.Describe(ch)
	c.snapshotFailures.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	type entry struct {
		k  queueKey
		qs *queueStats
	}
	// Read the watched API first, so that queues it no longer lists can be
	// forgotten before their series are sent.
	wa := c.api.Load()
	var (
		qis       []engine.QueueInfo
		listed    bool
		stats     engine.Stats
		haveStats bool
	)
	if wa != nil {
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.ScrapeTimeout)
		// A closed or failed DB has no queues to show; the error is the
		// engine's to report, and a scrape should not fail because of it.
		// Nor should a server that does not answer or refuses Stats.
		var err error
		qis, err = wa.api.Queues(ctx)
		listed = err == nil
		if wa.stats != nil {
			stats, err = wa.stats(ctx)
			haveStats = err == nil
		}
		cancel()
	}
	c.checkWiring(wa, stats)
	if listed {
		c.forget(qis)
	}

	c.mu.RLock()
	queues := make([]entry, 0, len(c.queues))
	for k, qs := range c.queues {
		queues = append(queues, entry{k, qs})
	}
	denied := make(map[engine.Namespace]uint64, len(c.denied)+1)
	for ns, n := range c.denied {
		denied[ns] = n.Load()
	}
	if n := c.deniedElsewhere.Load(); n > 0 {
		denied[engine.Namespace{}] += n
	}
	c.mu.RUnlock()
	for _, e := range queues {
		for i, d := range c.counterDescs {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(e.qs.counts[i].Load()),
				e.k.ns.Project, e.k.ns.Scope, e.k.queue)
		}
	}
	for ns, n := range denied {
		ch <- prometheus.MustNewConstMetric(c.deniedDesc, prometheus.CounterValue, float64(n), ns.Project, ns.Scope)
	}
	c.latency.Collect(ch)
	c.handler.Collect(ch)
	c.fsync.Collect(ch)
	c.group.Collect(ch)
	c.snapshot.Collect(ch)
	c.snapshotBytes.Collect(ch)
	c.snapshotFailures.Collect(ch)

	if wa == nil {
		return
	}
	if haveStats {
		ch <- prometheus.MustNewConstMetric(c.commitsDesc, prometheus.CounterValue, float64(stats.Commits))
		ch <- prometheus.MustNewConstMetric(c.logBytesDesc, prometheus.CounterValue, float64(stats.LogBytes))
		ch <- prometheus.MustNewConstMetric(c.logSyncsDesc, prometheus.CounterValue, float64(stats.LogSyncs))
		ch <- prometheus.MustNewConstMetric(c.snapshotsDesc, prometheus.CounterValue, float64(stats.Snapshots))
		ch <- prometheus.MustNewConstMetric(c.recordsDesc, prometheus.GaugeValue, float64(stats.Tasks))
		ch <- prometheus.MustNewConstMetric(c.memoryDesc, prometheus.GaugeValue, float64(stats.Memory))
		ch <- prometheus.MustNewConstMetric(c.budgetDesc, prometheus.GaugeValue, float64(stats.MemoryBudget))
		ch <- prometheus.MustNewConstMetric(c.valueLogDesc, prometheus.GaugeValue, float64(stats.ValueLogBytes))
		ch <- prometheus.MustNewConstMetric(c.valueLiveDesc, prometheus.GaugeValue, float64(stats.ValueLiveBytes))
		ch <- prometheus.MustNewConstMetric(c.unreadableDesc, prometheus.CounterValue, float64(stats.UnreadableValues))
	}
	for _, qi := range qis {
		n := qi.Counts
		for i, v := range [...]int{n.Ready, n.Scheduled, n.InFlight, n.Dead, n.Completed} {
			ch <- prometheus.MustNewConstMetric(c.tasksDesc, prometheus.GaugeValue, float64(v),
				qi.Namespace.Project, qi.Namespace.Scope, qi.Name, stateNames[i])
		}
	}
}

// forget drops the series of queues that the watched API no longer lists
// and that saw no event since the previous scrape, so that the Collector
// keeps nothing for queues that are gone.
func (c *Collector) forget(qis []engine.QueueInfo) {
	live := make(map[queueKey]bool, len(qis))
	for _, qi := range qis {
		live[queueKey{qi.Namespace, qi.Name}] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, qs := range c.queues {
		if qs.touched.Swap(false) || live[k] {
			continue
		}
		delete(c.queues, k)
		if c.nsQueues[k.ns]--; c.nsQueues[k.ns] == 0 {
			delete(c.nsQueues, k.ns)
			delete(c.denied, k.ns)
		}
		c.latency.DeleteLabelValues(k.ns.Project, k.ns.Scope, k.queue)
		c.handler.DeletePartialMatch(prometheus.Labels{"project": k.ns.Project, "scope": k.ns.Scope, "queue": k.queue})
	}
}

// checkWiring warns, once each, of a wiring step that is missing.
func (c *Collector) checkWiring(wa *watched, st engine.Stats) {
	switch {
	case wa == nil:
		c.warn("no API watched (Collector.Watch, or Collector.Open): docket_tasks and the engine counters are not exported")
	case wa.local && st.Commits > 0 && !c.observed.Load():
		c.warn("the watched DB has committed work but never called the Collector: set it as engine.Options.Observer " +
			"(Collector.Open or Collector.Observe does): task counters and fsync and snapshot timings stay at zero")
	}
	if c.claimed.Load() && !c.middle.Load() {
		c.warn("tasks were claimed but the worker middleware is not installed (Collector.Instrument(w), or " +
			"w.Use(c.Middleware())): docket_handler_duration_seconds and docket_tasks_failed_total stay empty")
	}
}

var (
	_ engine.Observer      = (*Collector)(nil)
	_ prometheus.Collector = (*Collector)(nil)
)
