package engine

import (
	"fmt"
	"sync"

	"github.com/docketdb/docket/engine/internal/admit"
	"github.com/docketdb/docket/engine/internal/machine"
	"github.com/docketdb/docket/engine/internal/recovery"
	"github.com/docketdb/docket/engine/internal/valuelog"
	"github.com/docketdb/docket/engine/internal/view"
	"github.com/docketdb/docket/internal/index"
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
	// st is where committed batches go: the directory's log, nowhere in
	// memory, or the replicated log (storage.go).
	st storage
	// vals is the value log large values are kept in (values.go), nil
	// where every value stays in memory.
	vals *values

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
	// unread logs the values that cannot be read (package valuelog),
	// with its own lock.
	unread valuelog.Notes
	// liveChecks counts the batches of records whose liveness a value
	// log compaction asked under mu (valueHost.Live).
	liveChecks int
	// open is the sync round commits in flight join (pipeline.go); kick
	// tells the pipeline goroutine it has one, and slots bounds the commits
	// in flight (Options.MaxInFlight).
	open  *syncRound
	kick  chan struct{}
	slots chan struct{}

	snapMu sync.Mutex // one snapshot at a time
	// compactor is the goroutine that compacts the value log.
	compactor sync.WaitGroup
	snapping  bool // a background snapshot is running (guarded by mu)
	bg        sync.WaitGroup
	piped     sync.WaitGroup // the pipeline goroutine (pipeline.go)
	stopBg    chan struct{}
	// dead writes the log lines about dead-lettered tasks, gathered per
	// queue (deadlog.go).
	dead *deadLog
	// adm admits commands against the memory budget and the quotas,
	// guarded by mu (package admit).
	adm admit.Admitter
}

// wrapStorage marks errors from the storage packages with the engine's
// sentinels (see recovery.WrapStorage).
func wrapStorage(err error) error { return recovery.WrapStorage(err) }

// writable reports why the engine cannot take a write. Call with mu held.
func (c *core) writable() error {
	if err := c.usable(); err != nil {
		return err
	}
	return c.st.writable()
}

// usable reports why the engine cannot take a call. Call with mu held.
func (c *core) usable() error {
	if c.closed {
		return ErrClosed
	}
	return c.failed
}

// unlockOnPanic, deferred where mu is held around planning and applying,
// lets a panic (a bug) go on with mu released, not held for every later
// call; one raised while applying failed the engine first (logAndApply).
func (c *core) unlockOnPanic() {
	if p := recover(); p != nil {
		c.mu.Unlock()
		panic(p)
	}
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
	c.compactor.Wait()
	c.piped.Wait()
	c.dead.close()
	var err error
	if c.st.snapshots() && !failed {
		err = c.snapshotNow(true)
	}
	if cerr := c.st.close(failed); err == nil && cerr != nil && !failed {
		err = cerr
	}
	return err
}

// Clock returns the clock the DB reads, so code built on it (a worker
// runtime, a test) can share one notion of time.
func (d *DB) Clock() Clock { return d.c.clock }

// MaxPayloadBytes is the most a payload, result, progress record or KV
// value may hold (Options.MaxPayloadBytes): a server refuses a longer one
// before it decodes the request.
func (d *DB) MaxPayloadBytes() int { return d.c.opts.MaxPayloadBytes }

// Verify checks every index against the primary records.
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
	view.Stats(c.store, &s)
	s.MemoryBudget = c.adm.Budget
	c.mu.Unlock()
	c.st.stats(&s)
	if c.vals != nil {
		s.ValueLogBytes = c.vals.Bytes()
	}
	return s
}
