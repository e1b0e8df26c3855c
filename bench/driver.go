package bench

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/docketdb/docket/engine"
)

// Driver is a queue the load generator drives: docket itself, or a peer
// (the peers module implements it for goqite and NATS JetStream). J is the
// queue's own handle on a claimed job. A Driver is used from many
// goroutines at once.
type Driver[J any] interface {
	// Enqueue durably adds one task (as durable as the queue's mode
	// promises) before it returns.
	Enqueue(ctx context.Context, payload []byte) error
	// EnqueueBatch adds the tasks in one commit, or as close to one as the
	// queue allows.
	EnqueueBatch(ctx context.Context, payloads [][]byte) error
	// Claim leases up to max jobs. Without wait it returns at once, possibly
	// with none; with wait it blocks until it has at least one or ctx ends,
	// and then returns ctx's error.
	Claim(ctx context.Context, max int, wait bool) ([]J, error)
	// Complete acknowledges a claimed job; it is gone once this returns.
	Complete(ctx context.Context, j *J) error
	// Payload returns the payload a job was enqueued with.
	Payload(j *J) []byte
	// Close releases the queue and its files.
	Close() error
}

// BatchCompleter is a Driver that can acknowledge several claimed jobs in
// one commit. The drain and steady-state workloads use it for claims of more
// than one job.
type BatchCompleter[J any] interface {
	CompleteBatch(ctx context.Context, js []J) error
}

// Counters are a queue's own running totals, for drivers that can report
// them (by having a method Counters() Counters).
type Counters struct {
	Commits  uint64
	Fsyncs   uint64
	LogBytes uint64
	// SyncTime is the time spent in those fsyncs; zero where the queue
	// does not say.
	SyncTime time.Duration
	// Groups counts fsyncs by the commits each covered, in the buckets of
	// engine.Stats.LogGroups; zero where the queue does not say.
	Groups [engine.LogGroupBuckets]uint64
	// Gathers and GatherMisses are engine.Stats.LogGathers and
	// LogGatherMisses; zero where the queue does not say.
	Gathers, GatherMisses uint64
}

// Opener opens a fresh, empty queue for one run of cfg, keeping its files
// under dir (which the run removes afterwards).
type Opener[J any] func(ctx context.Context, cfg Config, dir string) (Driver[J], error)

// docketDriver drives one docket queue, in process or through the
// client.
type docketDriver struct {
	// q takes the enqueues, wq the claims and completions: the same queue
	// in process; through two clients in remote mode.
	q, wq engine.Queue
	// db is the DB in this process: the one called, or the one a server
	// started here serves. Nil against a server elsewhere.
	db *engine.DB
	// counters reads the queue's totals; nil when there are none.
	counters func() (Counters, bool)
	// server is the `docket serve` process a run started; nil otherwise.
	server *Process
	close  func() error
}

// ServerCPU is the CPU time the server process has used so far.
func (d *docketDriver) ServerCPU() (time.Duration, bool) {
	if d.server == nil {
		return 0, false
	}
	return d.server.CPU(), true
}

// ServerCPUer is a Driver whose server runs in a process of its own and
// can say how much CPU time it has used; a run's Result.ServerCPU is its
// share of it.
type ServerCPUer interface {
	ServerCPU() (time.Duration, bool)
}

var benchNS = engine.NS("bench", "load")

// openDocket opens docket for cfg: in memory, or in dir with cfg's
// durability.
func openDocket(cfg Config, dir string, tweak func(*engine.Options)) (*docketDriver, error) {
	db, err := openDB(cfg, dir, tweak)
	if err != nil {
		return nil, err
	}
	q := db.Queue(benchNS, "tasks")
	return &docketDriver{q: q, wq: q, db: db, counters: dbCounters(db), close: db.Close}, nil
}

func openDB(cfg Config, dir string, tweak func(*engine.Options)) (*engine.DB, error) {
	opts := engine.Options{Durability: cfg.Durability, ValueThreshold: cfg.ValueThreshold, MaxMemory: cfg.MaxMemory}
	if tweak != nil {
		tweak(&opts)
	}
	if cfg.InMemory {
		return engine.OpenInMemory(opts)
	}
	return engine.Open(dir, opts)
}

func dbCounters(db *engine.DB) func() (Counters, bool) {
	return func() (Counters, bool) {
		s := db.Stats()
		return Counters{Commits: s.Commits, Fsyncs: s.LogSyncs, LogBytes: s.LogBytes, Groups: s.LogGroups, SyncTime: s.LogSyncTime,
			Gathers: s.LogGathers, GatherMisses: s.LogGatherMisses}, true
	}
}

// Docket is the Opener of docket itself, as Run uses it: the DB in
// process, or through the client when cfg.Remote is set (see Remote).
func Docket(ctx context.Context, cfg Config, dir string) (Driver[engine.Lease], error) {
	if cfg.Remote || cfg.Server != "" {
		return openRemote(ctx, cfg, dir)
	}
	return openDocket(cfg, dir, nil)
}

func (d *docketDriver) Enqueue(ctx context.Context, payload []byte) error {
	_, err := d.q.Enqueue(ctx, engine.Task{Payload: payload})
	return err
}

// taskSlices holds the task slices of EnqueueBatch for reuse, as a
// producer that enqueues in batches would keep its own: the load
// generator's garbage is not the queue's.
var taskSlices = sync.Pool{New: func() any { return new([]engine.Task) }}

func (d *docketDriver) EnqueueBatch(ctx context.Context, payloads [][]byte) error {
	sp := taskSlices.Get().(*[]engine.Task)
	tasks := slices.Grow((*sp)[:0], len(payloads))[:len(payloads)]
	for i, p := range payloads {
		tasks[i] = engine.Task{Payload: p}
	}
	_, err := d.q.EnqueueBatch(ctx, tasks)
	clear(tasks)
	*sp = tasks[:0]
	taskSlices.Put(sp)
	return err
}

func (d *docketDriver) Claim(ctx context.Context, max int, wait bool) ([]engine.Lease, error) {
	if wait {
		return d.wq.ClaimWait(ctx, "bench", lease, max)
	}
	return d.wq.Claim(ctx, "bench", lease, max)
}

func (d *docketDriver) Complete(ctx context.Context, l *engine.Lease) error {
	_, err := d.wq.Complete(ctx, *l, engine.Done{})
	return err
}

func (d *docketDriver) CompleteBatch(ctx context.Context, ls []engine.Lease) error {
	errs, err := d.wq.CompleteBatch(ctx, ls)
	if err != nil {
		return err
	}
	return errors.Join(errs...)
}

func (d *docketDriver) Payload(l *engine.Lease) []byte { return l.Payload }

func (d *docketDriver) Close() error { return d.close() }

// Counters returns the totals of the DB behind the queue; zero when they
// cannot be read (a server elsewhere that refuses Stats).
func (d *docketDriver) Counters() Counters {
	c, _ := d.countersOK()
	return c
}

func (d *docketDriver) countersOK() (Counters, bool) {
	if d.counters == nil {
		return Counters{}, false
	}
	return d.counters()
}

func countersOf(d any) (Counters, bool) {
	switch c := d.(type) {
	case *docketDriver:
		return c.countersOK()
	case interface{ Counters() Counters }:
		return c.Counters(), true
	}
	return Counters{}, false
}

// window records the counters at the start of a measured window and fills
// the result's share of them at its end.
type window struct {
	d         any
	start     Counters
	ok        bool
	cpu       time.Duration
	serverCPU time.Duration
	server    ServerCPUer
}

func openWindow(d any) window {
	c, ok := countersOf(d)
	w := window{d: d, start: c, ok: ok, cpu: ProcessCPU()}
	if s, ok := d.(ServerCPUer); ok {
		if t, ok := s.ServerCPU(); ok {
			w.server, w.serverCPU = s, t
		}
	}
	return w
}

func (w window) close(r *Result) {
	if w.cpu > 0 {
		r.CPU = ProcessCPU() - w.cpu
	}
	if w.server != nil {
		if t, ok := w.server.ServerCPU(); ok {
			r.ServerCPU = t - w.serverCPU
			r.ServerMeasured = true
		}
	}
	if !w.ok {
		return
	}
	c, _ := countersOf(w.d)
	r.Commits = c.Commits - w.start.Commits
	r.Fsyncs = c.Fsyncs - w.start.Fsyncs
	r.LogBytes = c.LogBytes - w.start.LogBytes
	r.SyncTime = c.SyncTime - w.start.SyncTime
	r.Gathers, r.GatherMisses = c.Gathers-w.start.Gathers, c.GatherMisses-w.start.GatherMisses
	r.Groups = nil
	for i := range c.Groups {
		if n := c.Groups[i] - w.start.Groups[i]; n > 0 {
			lo, hi := engine.LogGroupRange(i)
			r.Groups = append(r.Groups, GroupCount{Min: lo, Max: hi, Fsyncs: n})
		}
	}
}
