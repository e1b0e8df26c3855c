package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/docketdb/docket/engine/internal/machine"
	"github.com/docketdb/docket/internal/flock"
	"github.com/docketdb/docket/internal/fsync"
	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/snapshot"
	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/internal/vlog"
	"github.com/docketdb/docket/wal"
)

// DB is an open docket directory (or an in-memory instance). It is safe for
// concurrent use. A DB returned by As is a view of the same engine acting for
// a caller; closing any view closes the engine.
type DB struct {
	c      *core
	caller *Caller
	// bad, when set, is the error every call of the view returns: a view
	// made by As on a view, or for an invalid caller id.
	bad error
}

// core is the engine shared by every view of a DB.
type core struct {
	opts  Options
	clock Clock
	// entropy seeds a batch's lease secrets. A replicated planner replaces
	// it with the seed its log entry carries.
	entropy func() uint64
	// repl is the replicated log a DB opened with OpenReplicated commits
	// through (nil standalone); seeds is then the entropy this node stamps
	// on the claims it submits, and applySeed the seed of the command being
	// applied (guarded by mu).
	repl      Replicator
	seeds     func() uint64
	applySeed uint64
	dir       string
	lock      vfs.File
	log       *wal.Log // nil in memory and read-only
	// vals is the value log large values are kept in (values.go), nil
	// where every value stays in memory.
	vals *values
	// readOnly refuses every write (OpenReadOnly).
	readOnly bool

	mu     sync.Mutex // the commit path: everything below is guarded by it
	store  *index.Store
	enc    *index.Encoder
	batch  index.Batch
	plan   planner
	mstate machine.State // what c.plan reads (core.state)
	failed error
	closed bool
	// waiters holds, per queue with a parked ClaimWait, the parked calls
	// and how many of them commits have woken (wake.go).
	waiters   map[index.QueueKey]*waitq
	parking   parking  // parked ClaimWait calls, for WaitParked (parked.go)
	watch     watchSet // lease watches (watch.go), with their own lock
	sinceSnap int64
	stats     Stats
	// open is the sync round commits in flight join (pipeline.go); kick
	// tells the pipeline goroutine it has one, and slots bounds the commits
	// in flight (Options.MaxInFlight).
	open  *syncRound
	kick  chan struct{}
	slots chan struct{}

	snapMu   sync.Mutex // one snapshot at a time
	snapping bool       // a background snapshot is running (guarded by mu)
	bg       sync.WaitGroup
	piped    sync.WaitGroup // the pipeline goroutine (pipeline.go)
	stopBg   chan struct{}
	// dead writes the log lines about dead-lettered tasks, gathered per
	// queue (deadlog.go).
	dead *deadLog
	// budget is Options.MaxMemory resolved (0: none), and memWarn the
	// state of its warnings, guarded by mu (memory.go).
	budget  int64
	memWarn memWarn
	// quotas holds the namespaces' quotas as last parsed, guarded by mu
	// (quota.go).
	quotas map[index.Namespace]quotaCache
}

// Open opens (creating if needed) the docket data directory dir, recovering
// its state from the newest valid snapshot and the log after it. A directory
// can be open in one DB at a time; a second Open returns ErrLocked. An empty
// dir is ErrInvalid (an unset variable must not silently give a DB that
// keeps nothing): use OpenInMemory for that.
func Open(dir string, opts Options) (*DB, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: empty data directory (use OpenInMemory for a DB that keeps nothing)", ErrInvalid)
	}
	return open(dir, opts)
}

// OpenInMemory returns a DB that keeps everything in memory: no log, no
// snapshots, nothing survives Close.
func OpenInMemory(opts Options) (*DB, error) { return open("", opts) }

// OpenReadOnly opens the existing docket data directory dir to read it: it
// runs the recovery Open runs over the files as they are (a torn tail is not
// read, and not cut), creates and changes nothing, and takes the directory's
// lock shared, so it fails with ErrLocked while a DB has the directory open
// for writing and keeps one from opening it meanwhile. A directory that is
// not a docket data directory is ErrInvalid. Every write returns
// ErrReadOnly; Close releases the lock.
func OpenReadOnly(dir string, opts Options) (*DB, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: empty data directory", ErrInvalid)
	}
	fsys := vfs.Or(opts.fs)
	if err := isDocketDir(fsys, dir); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if opts.Authorizer == nil {
		opts.Authorizer = denyAll{}
	}
	var lock vfs.File
	if f, err := fsys.Open(filepath.Join(dir, "LOCK")); err == nil {
		if err := fsys.Lock(f, false); err != nil {
			f.Close()
			if errors.Is(err, flock.ErrHeld) {
				return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
			}
			return nil, err
		}
		lock = f
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	b, _, err := recoverInPlace(fsys, dir, opts.Logger, false)
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		return nil, err
	}
	c := &core{
		opts:     opts,
		clock:    opts.Clock,
		dir:      dir,
		lock:     lock,
		readOnly: true,
		store:    b.store,
		enc:      index.NewEncoder(),
		waiters:  make(map[index.QueueKey]*waitq),
		stopBg:   make(chan struct{}),
		slots:    make(chan struct{}, opts.MaxInFlight),
	}
	c.dead = newDeadLog(opts.Logger, opts.Clock, c.stopBg)
	return &DB{c: c}, nil
}

func open(dir string, opts Options) (*DB, error) {
	opts = opts.withDefaults()
	if opts.Durability < SyncAlways || opts.Durability > SyncNever {
		return nil, fmt.Errorf("%w: durability %d", ErrInvalid, opts.Durability)
	}
	if opts.Authorizer == nil {
		opts.Authorizer = denyAll{}
	}
	c := &core{
		opts:    opts,
		clock:   opts.Clock,
		entropy: newEntropy(),
		dir:     dir,
		store:   index.NewStore(),
		enc:     index.NewEncoder(),
		waiters: make(map[index.QueueKey]*waitq),
		stopBg:  make(chan struct{}),
		kick:    make(chan struct{}, 1),
		slots:   make(chan struct{}, opts.MaxInFlight),
		budget:  budgetOf(opts.MaxMemory),
	}
	c.dead = newDeadLog(opts.Logger, opts.Clock, c.stopBg)
	if dir != "" {
		if err := c.openDir(); err != nil {
			return nil, err
		}
		if opts.Durability == SyncInterval {
			c.bg.Add(1)
			go c.syncLoop()
		}
		c.piped.Add(1)
		go c.pipeline()
	}
	return &DB{c: c}, nil
}

func (c *core) snapDir() string { return filepath.Join(c.dir, "snap") }
func (c *core) walDir() string  { return filepath.Join(c.dir, "wal") }

// fs is the file system the DB's files are on.
func (c *core) fs() vfs.FS { return vfs.Or(c.opts.fs) }

func (c *core) openDir() (err error) {
	fsys := c.fs()
	if err := fsync.MkdirAllFS(fsys, c.dir, 0o755); err != nil {
		return err
	}
	lock, err := fsys.OpenFile(filepath.Join(c.dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	if err := fsys.Lock(lock, true); err != nil {
		lock.Close()
		if errors.Is(err, flock.ErrHeld) {
			return fmt.Errorf("%w: %s", ErrLocked, c.dir)
		}
		return err
	}
	c.lock = lock
	defer func() {
		if err != nil {
			if c.log != nil {
				c.log.Close()
				c.log = nil
			}
			if c.vals != nil {
				c.vals.log.Close()
				c.vals = nil
			}
			lock.Close()
		}
	}()
	if err := fsync.MkdirAllFS(fsys, c.snapDir(), 0o755); err != nil {
		return err
	}
	if err := snapshot.RemoveTempFS(fsys, c.snapDir()); err != nil {
		return err
	}
	// Validating the log reads every record of it, which takes about as
	// long as loading a large snapshot: do both at once, validating from
	// where the newest snapshot ends. Should that one not be the snapshot
	// used (it does not read), wal.Open validates again from the right
	// place.
	from := uint64(1)
	if infos, err := snapshot.ListFS(fsys, c.snapDir()); err == nil && len(infos) > 0 {
		from = infos[0].Seq + 1
	}
	validated := make(chan *wal.Validation, 1)
	go func() { validated <- wal.ValidateFS(fsys, c.walDir(), from) }()
	b, err := loadBase(fsys, c.snapDir(), c.opts.Logger, false)
	v := <-validated // read no file after Open returns
	if err != nil {
		return err
	}
	wopts := wal.Options{FS: fsys, SegmentSize: c.opts.SegmentBytes, Failpoint: c.opts.failpoint, From: b.from(), Validated: v}
	if c.opts.Durability == SyncNever {
		// Spare space makes fsyncs cheaper; with none on the commit path,
		// writing it ahead would only double the bytes written.
		wopts.Preallocate = -1
	}
	if obs := c.opts.Observer; obs != nil {
		wopts.OnSync = obs.Synced
	}
	log, err := wal.Open(c.walDir(), wopts)
	if err != nil {
		return wrapStorage(err)
	}
	c.log = log
	c.logRepairs(log.Repaired())
	if err := b.decide(log.FirstSeq(), log.LastSeq(), c.opts.Logger); err != nil {
		return err
	}
	if err := b.replay(log.Replay); err != nil {
		return err
	}
	store := b.store
	if b.refused > 0 {
		c.opts.Logger.Info("docket: replay refused batches whose assertions no longer held", "refused", b.refused)
	}
	c.store = store
	return c.openValues()
}

// replay applies logged batches to store in order: records is a log reader
// (wal.Log.Replay, wal.Scan) that calls its argument for every record from
// store.Seq()+1 on. It returns how many batches were refused (a refusal is
// an outcome, not damage); an error means the log does not fit the state.
// Open, Check and anything else that rebuilds state from a log call it, and
// it applies through applyBatch like the live commit path, so they cannot
// disagree about what a log means.
func replay(store *index.Store, records func(func(seq uint64, data []byte) error) error) (refused int, err error) {
	dec := index.NewDecoder(store)
	var b index.Batch
	err = records(func(seq uint64, data []byte) error {
		out, err := applyLogged(store, dec, &b, seq, data)
		if err != nil {
			return err
		}
		if out.Refused != "" {
			refused++
		}
		return nil
	})
	return refused, err
}

// applyLogged decodes data, the bytes logged as record seq, into b (reused)
// with dec and applies it to store: exactly what was logged. The outcome says whether the batch applied or was
// refused (and why); an error (wrapping index.ErrCorrupt) means the record
// is damaged or does not follow store, and store must then be discarded.
func applyLogged(store *index.Store, dec *index.Decoder, b *index.Batch, seq uint64, data []byte) (index.Outcome, error) {
	if err := dec.Batch(data, b); err != nil {
		return index.Outcome{Seq: seq}, fmt.Errorf("log record %d: %w", seq, err)
	}
	return applyBatch(store, seq, b)
}

// applyBatch applies batch b, logged as record seq, to store: the one step
// by which any batch, live or replayed, reaches the indexes. The record's
// sequence number, the batch's and the store's must line up.
func applyBatch(store *index.Store, seq uint64, b *index.Batch) (index.Outcome, error) {
	if b.Seq != seq {
		return index.Outcome{Seq: seq}, fmt.Errorf("%w: log record %d holds batch %d", index.ErrCorrupt, seq, b.Seq)
	}
	if seq != store.Seq()+1 {
		return index.Outcome{Seq: seq}, fmt.Errorf("%w: log record %d does not follow batch %d", index.ErrCorrupt, seq, store.Seq())
	}
	out, err := store.Apply(b)
	if err != nil {
		return out, fmt.Errorf("log record %d: %w", seq, err)
	}
	return out, nil
}

// logRepairs tells the operator what opening the log did to the directory.
func (c *core) logRepairs(rep wal.RepairReport) {
	if cut := rep.Cut; cut != nil {
		c.opts.Logger.Warn("docket: cut a torn tail off the log (a write the crash interrupted, never acknowledged)",
			"file", cut.File, "offset", cut.Offset, "bytes", cut.Size, "reason", cut.Reason, "copy", rep.Broken)
	}
	for _, d := range rep.Covered {
		c.opts.Logger.Warn("docket: damaged log record before the snapshot ignored (the snapshot holds its effect)",
			"file", d.File, "offset", d.Offset, "reason", d.Reason)
	}
}

func readSnapshot(fsys vfs.FS, path string) (*index.Store, error) {
	return loadSnapshot(path, func(fn func([]byte) error) (uint64, error) {
		seq, _, err := snapshot.ReadFS(fsys, path, fn)
		return seq, err
	})
}

// loadSnapshot builds a store from the snapshot named name, whose records
// read streams to its argument, returning the snapshot's seq.
//
// It runs as a pipeline of three goroutines handing records over in
// chunks: one reads and checks the records (read), copying them out of
// the reader's buffer; one decodes them; and the calling one loads them
// into the store. Each of the three takes a good part of a restore's
// time, and the chunks in flight absorb the moments one of them is held
// up (by the garbage collector, mostly), so on two cores a restore takes
// about as long as its longest stage. The result, and the first error,
// are those of doing all three in one loop: the records before a damaged
// one are loaded, and checked, first.
func loadSnapshot(name string, read func(fn func(rec []byte) error) (uint64, error)) (*index.Store, error) {
	const (
		chunk    = 1024      // records a chunk holds at most
		rawBytes = 256 << 10 // bytes of records a raw chunk holds, unless one record is larger
		inFlight = 4         // chunks queued between two stages
	)
	// raw is a chunk of records as read: record i is buf[ends[i-1]:ends[i]].
	type raw struct {
		buf  []byte
		ends []int
	}
	// A record is handed to the loader as its task, or, for the few records
	// of other kinds, as a Record (which is large) of its own.
	type item struct {
		task *index.Task
		rec  *index.Record
	}
	raws := make(chan *raw, inFlight)
	freeRaws := make(chan *raw, inFlight+2)
	chunks := make(chan []item, inFlight)
	free := make(chan []item, inFlight+2)
	stop := make(chan struct{}) // a later stage failed: read and decode no further
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }) }

	var seq uint64
	var readErr, decErr error
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(raws)
		r := &raw{buf: make([]byte, 0, rawBytes)}
		send := func() bool {
			select {
			case raws <- r:
			case <-stop:
				return false
			}
			select {
			case r = <-freeRaws:
			default:
				r = &raw{buf: make([]byte, 0, rawBytes)}
			}
			return true
		}
		seq, readErr = read(func(rec []byte) error {
			if len(r.ends) > 0 && (len(r.ends) == chunk || len(r.buf)+len(rec) > cap(r.buf)) && !send() {
				return errStopped
			}
			r.buf = append(r.buf, rec...)
			r.ends = append(r.ends, len(r.buf))
			return nil
		})
		if len(r.ends) > 0 {
			send()
		}
	}()
	go func() {
		defer close(chunks)
		dec := index.NewDecoder(nil)
		buf := make([]item, 0, chunk)
		send := func() bool {
			select {
			case chunks <- buf:
			case <-stop:
				return false
			}
			select {
			case buf = <-free:
			default:
				buf = make([]item, 0, chunk)
			}
			return true
		}
		for r := range raws {
			prev := 0
			for _, end := range r.ends {
				rec := r.buf[prev:end]
				prev = end
				it := item{}
				if t, ok := dec.Task(rec); ok {
					it.task = t
				} else {
					x, err := dec.Record(rec)
					if err != nil {
						decErr = err
						halt()
						return
					}
					it.rec = &x
				}
				if buf = append(buf, it); len(buf) == chunk && !send() {
					return
				}
			}
			if cap(r.buf) == rawBytes { // not grown for a large record
				r.buf, r.ends = r.buf[:0], r.ends[:0]
				select {
				case freeRaws <- r:
				default:
				}
			}
		}
		if len(buf) > 0 {
			send()
		}
	}()
	store := index.NewStore()
	header := false
	var err error
	for recs := range chunks {
		for i := 0; i < len(recs) && err == nil; i++ {
			it := recs[i]
			switch {
			case header == (it.task == nil && it.rec.Kind == index.RecHeader):
				err = fmt.Errorf("%w: snapshot header not (only) first", index.ErrCorrupt)
			case it.task != nil:
				err = store.LoadTask(it.task)
			default:
				header = true
				err = store.Load(*it.rec)
			}
		}
		if err != nil {
			halt()
		}
		clear(recs)
		select {
		case free <- recs[:0]:
		default:
		}
	}
	<-readDone // the decoder is done: chunks is closed
	if err == nil {
		err = decErr
	}
	if err == nil {
		err = readErr
	}
	if err == nil && (!header || seq != store.Seq()) {
		err = fmt.Errorf("%w: snapshot %s header does not match", index.ErrCorrupt, name)
	}
	if err == nil {
		err = store.Loaded()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return store, nil
}

// errStopped ends a snapshot read whose records are no longer wanted.
var errStopped = errors.New("docket: snapshot load stopped")

// wrapStorage marks errors from the storage packages with the engine's
// sentinels.
func wrapStorage(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, wal.ErrCorrupt), errors.Is(err, snapshot.ErrCorrupt), errors.Is(err, index.ErrCorrupt):
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	case errors.Is(err, wal.ErrFailed):
		return fmt.Errorf("%w: %w", ErrFailed, err)
	}
	return err
}

// writable reports why the engine cannot take a write. Call with mu held.
func (c *core) writable() error {
	if err := c.usable(); err != nil {
		return err
	}
	if c.readOnly {
		return ErrReadOnly
	}
	return nil
}

// usable reports why the engine cannot take a call. Call with mu held.
func (c *core) usable() error {
	if c.closed {
		return ErrClosed
	}
	return c.failed
}

// fail puts the engine into the failed state. Call with mu held.
func (c *core) fail(err error) error {
	if c.failed == nil {
		c.failed = fmt.Errorf("%w: %w", ErrFailed, err)
		c.opts.Logger.Error("docket: engine stopped accepting writes", "err", err)
		c.wakeAll()
	}
	return c.failed
}

// count adds committed events to the counters. Call with mu held.
func (c *core) count(events []TaskEvent) {
	s := &c.stats
	for i := range events {
		switch events[i].Kind {
		case EvEnqueued:
			s.Enqueued++
		case EvClaimed:
			s.Claimed++
		case EvCompleted:
			s.Completed++
		case EvRetried:
			s.Retried++
		case EvDead:
			s.DeadLettered++
		case EvReclaimed:
			s.Reclaimed++
		case EvLeaseLost:
			s.LeaseLost++
		}
	}
}

func (c *core) countDenied() {
	c.mu.Lock()
	c.stats.Denied++
	c.mu.Unlock()
}

// commit runs plan under the engine lock, then logs and applies the batch it
// built, then waits for durability outside the lock. It is the only way state
// changes. plan must not change anything itself; if it returns an error,
// nothing is written.
func (c *core) commit(ctx context.Context, plan func(p *planner) error) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c.mu.Lock()
	if err := c.writable(); err != nil {
		c.mu.Unlock()
		return 0, err
	}
	seq, rep, err := c.step(c.now(), plan)
	if rep.housekept != nil {
		c.mu.Unlock()
		return 0, rep.housekept
	}
	startSnap := err == nil && c.shouldSnapshot()
	if startSnap {
		// Added under mu: Close marks the engine closed under mu before it
		// waits for bg, so it either waits for this snapshot or none starts.
		c.bg.Add(1)
	}
	c.mu.Unlock()
	if startSnap {
		go func() {
			defer c.bg.Done()
			c.snapshotNow(false)
		}()
	}
	if err == nil || rep.refused {
		// A commit without mutations (a deduplicated enqueue, an assertion
		// that held) and a refusal (not found, lease lost, conflict) still
		// wait: the answer may rest on batches that are not durable yet.
		if d := c.deferredOf(ctx); d != nil {
			d.add(seq, rep, err)
			if err != nil {
				return 0, err
			}
			return seq, nil
		}
		if derr := c.durable(seq); derr != nil {
			err = derr
		}
	}
	c.report(&rep, err)
	if err != nil {
		return 0, err
	}
	return seq, nil
}

// stepReport is what a step leaves to do once the engine lock is released.
type stepReport struct {
	// housekept is the error of the housekeeping batch that runs ahead of
	// the plan; the plan did not run.
	housekept error
	refused   bool        // the plan refused: not found, lease lost or conflict
	events    []TaskEvent // for the Observer (nil without one)
	dead      []deadTask  // tasks the batch dead-lettered, for the log
	// hkEvents and hkDead are the same for the housekeeping batch, which
	// is committed whatever the plan after it comes to.
	hkEvents []TaskEvent
	hkDead   []deadTask
}

// step is the heart of every commit, standalone or replicated: at time now,
// housekeeping in a batch of its own, then plan, then the batch it built
// logged (standalone) and applied, and the events counted. It returns the
// last batch the commit saw or wrote. Call with mu held; the caller reports
// rep after releasing it.
func (c *core) step(now int64, plan func(p *planner) error) (seq uint64, rep stepReport, err error) {
	if err := c.housekeep(now, &rep); err != nil {
		rep.housekept = err
		return 0, rep, err
	}
	p := c.plan.Begin(c.state(), &c.batch, now)
	err = plan(p)
	if err != nil || len(c.batch.Mutations) == 0 {
		// A plan that wrote nothing leaves no queue it looked up behind.
		c.store.DropEmpty()
	}
	rep.refused = err != nil && (errors.Is(err, ErrNotFound) || errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrConflict))
	if err != nil {
		// Only a refusal happened (if any); nothing else the plan saw did.
		p.Events = p.Events[:0]
		if errors.Is(err, ErrLeaseLost) {
			p.Event(EvLeaseLost, p.Lost, 0)
		}
	}
	seq = c.store.Seq()
	if err == nil && len(c.batch.Mutations) > 0 {
		seq, err = c.logAndApply()
	}
	if err == nil {
		rep.dead = c.deadLettered(p.Events)
	}
	if err == nil || errors.Is(err, ErrLeaseLost) {
		c.count(p.Events)
		if c.opts.Observer != nil && len(p.Events) > 0 {
			rep.events = append(rep.events, p.Events...)
		}
	}
	return seq, rep, err
}

// report tells the Observer and the log what a step did, once the commit's
// outcome err is known. Call with mu released.
func (c *core) report(rep *stepReport, err error) {
	if rep.hkEvents != nil {
		c.opts.Observer.TaskEvents(rep.hkEvents)
	}
	if rep.events != nil && (err == nil || errors.Is(err, ErrLeaseLost)) {
		c.opts.Observer.TaskEvents(rep.events)
	}
	dead := rep.hkDead
	if err == nil {
		dead = append(dead, rep.dead...)
	}
	c.dead.add(dead)
}

// deadTask is a task the committed batch moved to the dead-letter queue.
type deadTask struct {
	id       uint64
	ns       Namespace
	queue    string
	attempts uint32
	lastErr  string
}

// deadLettered lists the tasks the batch just applied made dead, for the
// log: an operator must hear of it even with no Observer. Call with mu held,
// after the batch is applied.
func (c *core) deadLettered(events []TaskEvent) []deadTask {
	n := 0
	for i := range events {
		if events[i].Kind == EvDead {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]deadTask, 0, n)
	for _, m := range c.batch.Mutations {
		if m.Kind != index.MutUpdateTask || m.Update.State != index.StateDead {
			continue
		}
		t, ok := c.store.Task(m.Update.ID)
		if !ok {
			continue
		}
		k := t.Queue.Key
		d := deadTask{id: t.ID, queue: k.Name, ns: Namespace{Project: k.Project, Scope: k.Scope}, attempts: t.Attempts}
		if t.Extra != nil {
			d.lastErr = t.Extra.LastError
		}
		out = append(out, d)
	}
	return out
}

// now is the time a plan uses: the clock's, but never earlier than the
// last applied batch's, so time does not go backwards across batches (a
// clock stepped back, a restart on a machine whose clock is behind). Call
// with mu held.
func (c *core) now() int64 {
	return max(c.clock.Now().UnixMicro(), c.store.Now())
}

// logAndApply appends the planned batch to the log and applies it. Call with
// mu held.
func (c *core) logAndApply() (uint64, error) {
	b := &c.batch
	b.Seq = c.store.Seq() + 1
	if c.vals != nil {
		if err := c.vals.outOfLine(b); err != nil {
			return 0, c.fail(err)
		}
	}
	if err := c.store.Check(b); err != nil {
		// The planner checks what it asserts; reaching this is a bug, and the
		// state is unchanged, so refuse the call rather than fail the engine.
		return 0, fmt.Errorf("%w: %w", ErrConflict, err)
	}
	var data []byte
	if c.log != nil || c.opts.tap != nil {
		var err error
		if data, err = c.enc.Batch(b); err != nil {
			return 0, c.fail(err)
		}
	}
	if c.log != nil {
		if err := c.log.Append(b.Seq, data); err != nil {
			return 0, c.fail(err)
		}
		c.sinceSnap += int64(len(data))
	}
	out, err := applyBatch(c.store, b.Seq, b)
	if err != nil {
		return 0, c.fail(err)
	}
	if c.opts.tap != nil {
		c.opts.tap(b.Seq, data)
	}
	if out.Refused != "" {
		// Check passed a moment ago under the same lock: unreachable, but
		// the batch is logged and replay refuses it the same way.
		return 0, fmt.Errorf("%w: %s", ErrConflict, out.Refused)
	}
	c.stats.Commits++
	c.wakeWaiters(b.Now)
	return b.Seq, nil
}

// durable waits until batch seq is as durable as the options promise.
func (c *core) durable(seq uint64) error { return c.durableGathered(seq, false) }

// durableGathered is durable; gathered says that the caller's commits
// are all in (a Deferred's), so that a sync it leads does not wait for
// other committers (wal.Log.SyncGathered).
func (c *core) durableGathered(seq uint64, gathered bool) error {
	if c.log == nil {
		return nil
	}
	if c.vals != nil {
		// The values a batch refers to are at least as durable as it.
		if err := c.vals.sync(); err != nil {
			if errors.Is(err, vlog.ErrClosed) {
				return ErrClosed
			}
			return c.failLocked(err)
		}
	}
	var err error
	switch {
	case c.opts.Durability != SyncAlways:
		err = c.log.FlushTo(seq)
	case gathered:
		err = c.log.SyncGathered(seq)
	default:
		err = c.log.Sync(seq)
	}
	if errors.Is(err, wal.ErrClosed) {
		return ErrClosed // a commit racing with Close
	}
	if err != nil {
		return c.failLocked(err)
	}
	return nil
}

// failLocked is fail for callers not holding mu.
func (c *core) failLocked(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fail(err)
}

func (c *core) syncLoop() {
	defer c.bg.Done()
	t := time.NewTicker(c.opts.SyncEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stopBg:
			return
		case <-t.C:
			c.syncInterval()
		}
	}
}

// syncInterval is one tick of syncLoop: it makes every commit so far
// durable. No commit waits for it, so the log's leader waits for no
// committers (SyncGathered).
func (c *core) syncInterval() {
	c.mu.Lock()
	seq, ok := c.store.Seq(), c.usable() == nil
	c.mu.Unlock()
	if ok && c.vals != nil {
		if err := c.vals.log.Sync(); err != nil {
			c.failLocked(err)
			return
		}
	}
	if ok {
		if err := c.log.SyncGathered(seq); err != nil {
			c.failLocked(err)
		}
	}
}

// housekeepBatch bounds how many expired entries one housekeeping commit
// removes, so a backlog is worked off without one huge batch.
const housekeepBatch = 256

// housekeep forgets expired idempotency keys and retained completed tasks,
// and stores the deaths of tasks others wait for whose last lease expired
// (their dependents follow their policies), in a batch of its own, ahead of
// the caller's. Call with mu held.
func (c *core) housekeep(now int64, rep *stepReport) error {
	retain := c.opts.RetainCompleted.Microseconds()
	cutoff := int64(0)
	if retain > 0 {
		cutoff = now - retain
	}
	if !c.store.Expired(now, cutoff) {
		return nil // the common case: no batch to build
	}
	p := c.plan.Begin(c.state(), &c.batch, now)
	n := 0
	c.store.ExpiredIdem(now, func(e index.Idem) bool {
		p.B.Mutations = append(p.B.Mutations, index.Mutation{Kind: index.MutDeleteIdem, Idem: e})
		n++
		return n < housekeepBatch
	})
	if retain > 0 {
		c.store.CompletedBefore(cutoff, func(t *index.Task) bool {
			p.B.Mutations = append(p.B.Mutations, index.Mutation{Kind: index.MutDeleteTask, Update: index.TaskUpdate{ID: t.ID}})
			n++
			return n < 2*housekeepBatch
		})
	}
	n += p.KillExpiredParents(housekeepBatch)
	if n == 0 {
		return nil
	}
	if _, err := c.logAndApply(); err != nil {
		return err
	}
	if len(p.Events) > 0 {
		c.count(p.Events)
		rep.hkDead = c.deadLettered(p.Events)
		if c.opts.Observer != nil {
			rep.hkEvents = slices.Clone(p.Events)
		}
	}
	return nil
}

// Close takes a final snapshot, closes the log and releases the directory.
// Blocked claims return ErrClosed. Later calls return ErrClosed.
func (d *DB) Close() error {
	if err := d.owner("Close"); err != nil {
		return err
	}
	c := d.c
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.closed = true
	failed := c.failed != nil
	c.wakeAll()
	c.mu.Unlock()
	close(c.stopBg)
	c.bg.Wait()
	c.piped.Wait()
	c.dead.close()
	var err error
	if c.log != nil {
		if !failed {
			err = c.snapshotNow(true)
		}
		closeLog := c.log.Close
		if failed {
			// What was appended and not written was not acknowledged, and
			// may refer to values the value log failed to write.
			closeLog = c.log.Abandon
		}
		if cerr := closeLog(); err == nil && cerr != nil && !failed {
			err = cerr
		}
	}
	if c.vals != nil {
		if cerr := c.vals.log.Close(); err == nil && cerr != nil && !failed {
			err = cerr
		}
	}
	if c.lock != nil {
		c.lock.Close()
	}
	return err
}

// Checkpoint writes a snapshot of the current state and truncates the log
// up to the older of the two newest snapshots. In memory it does nothing.
func (d *DB) Checkpoint(ctx context.Context) error {
	if err := d.owner("Checkpoint"); err != nil {
		return err
	}
	c := d.c
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	err := c.writable()
	c.mu.Unlock()
	if err != nil || c.log == nil {
		return err
	}
	return c.snapshotNow(true)
}

// shouldSnapshot reports whether enough log was written to start a
// background snapshot, and marks one as started. Call with mu held.
func (c *core) shouldSnapshot() bool {
	if c.log == nil || c.opts.SnapshotBytes < 0 || c.sinceSnap < c.opts.SnapshotBytes || c.snapping || c.closed {
		return false
	}
	c.snapping = true
	return true
}

// snapshotNow writes a snapshot from a copy-on-write image of the state: the
// commit path pauses only to take the image. closing allows it to run after
// Close has marked the engine closed.
func (c *core) snapshotNow(closing bool) error {
	c.snapMu.Lock()
	defer c.snapMu.Unlock()
	start := time.Now()
	c.mu.Lock()
	if err := c.usable(); err != nil && !(closing && c.closed && c.failed == nil) {
		c.snapping = false
		c.mu.Unlock()
		return err
	}
	img := c.store.Copy()
	c.sinceSnap = 0
	c.mu.Unlock()
	info, err := c.writeSnapshot(img)
	c.mu.Lock()
	c.snapping = false
	if err == nil {
		c.stats.Snapshots++
	}
	c.mu.Unlock()
	if obs := c.opts.Observer; obs != nil {
		obs.Snapshot(SnapshotEvent{Seq: img.Seq, Bytes: info.Size, Duration: time.Since(start), Err: err})
	}
	if err != nil {
		c.opts.Logger.Warn("docket: snapshot failed", "err", err)
	}
	return err
}

func (c *core) writeSnapshot(img *index.Image) (snapshot.Info, error) {
	fsys := c.fs()
	infos, err := snapshot.ListFS(fsys, c.snapDir())
	if err != nil {
		return snapshot.Info{}, err
	}
	if len(infos) > 0 && infos[0].Seq == img.Seq {
		return infos[0], nil // nothing changed since
	}
	// The log must hold everything up to the image before the image exists:
	// otherwise a crash could leave a snapshot ahead of a shorter log, and the
	// next append would not follow the log's last record.
	if c.vals != nil {
		// Likewise the values it refers to.
		if err := c.vals.log.Sync(); err != nil {
			return snapshot.Info{}, c.failLocked(err)
		}
	}
	if err := c.log.SyncGathered(img.Seq); err != nil {
		return snapshot.Info{}, c.failLocked(err)
	}
	info, err := snapshot.Write(c.snapDir(), img.Seq, snapshot.Options{Failpoint: c.opts.failpoint, FS: fsys}, func(w *snapshot.Writer) error {
		return index.WriteImage(img, index.NewEncoder(), w.Add)
	})
	if err != nil {
		return info, err
	}
	// Keep two snapshots, and the log back to the older one, so that an
	// unreadable newest snapshot can fall back to the previous plus the log.
	infos, err = snapshot.ListFS(fsys, c.snapDir())
	if err != nil {
		return info, err
	}
	if len(infos) >= 2 {
		if err := c.log.TruncateFront(infos[1].Seq + 1); err != nil {
			return info, c.failLocked(err)
		}
	}
	return info, snapshot.PruneFS(fsys, c.snapDir(), 2)
}

// Clock returns the clock the DB reads, so code built on it (a worker
// runtime, a test) can share one notion of time.
func (d *DB) Clock() Clock { return d.c.clock }

// Verify checks every index against the primary records, and reads back
// every value the state keeps in the value log (verifyValues, vcheck.go).
func (d *DB) Verify() error {
	if err := d.owner("Verify"); err != nil {
		return err
	}
	c := d.c
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	err := c.store.Verify()
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.verifyValues()
}

// Stats returns the engine's counters. They span every namespace, so a
// caller view gets zero Stats.
func (d *DB) Stats() Stats {
	if d.caller != nil {
		return Stats{}
	}
	c := d.c
	c.mu.Lock()
	s := c.stats
	s.Seq = c.store.Seq()
	s.Tasks = c.store.Len()
	s.Memory, s.MemoryBudget = c.store.Usage().Bytes, c.budget
	c.mu.Unlock()
	if c.log != nil {
		ls := c.log.Stats()
		s.LogSyncs, s.LogBytes, s.LogGroups = ls.Syncs, ls.BytesWritten, ls.Groups
		s.LogSyncTime = time.Duration(ls.SyncNanos)
		s.LogGathers, s.LogGatherMisses = ls.Gathers, ls.GatherMisses
	}
	return s
}
