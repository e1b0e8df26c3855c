package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/docketdb/docket/engine/internal/view"
	"github.com/docketdb/docket/internal/index"
)

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

// count adds committed events to the counters. Call with mu held.
func (c *core) count(events []TaskEvent) { view.Count(&c.stats, events) }

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
	defer c.unlockOnPanic()
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
	defer func() {
		if p := recover(); p != nil {
			panic(c.fail(fmt.Errorf("a commit panicked, the state may be half changed: %v", p)))
		}
	}()
	b := &c.batch
	b.Seq = c.store.Seq() + 1
	if c.vals != nil {
		if err := c.vals.OutOfLine(b); err != nil {
			return 0, c.fail(err)
		}
	}
	if err := c.store.Check(b); err != nil {
		// The planner checks what it asserts; reaching this is a bug, and the
		// state is unchanged, so refuse the call rather than fail the engine.
		return 0, fmt.Errorf("%w: %w", ErrConflict, err)
	}
	var data []byte
	if c.st.logged() || c.opts.tap != nil {
		var err error
		if data, err = c.enc.Batch(b); err != nil {
			return 0, c.fail(err)
		}
	}
	n, err := c.st.append(b.Seq, data)
	if err != nil {
		return 0, c.fail(err)
	}
	c.sinceSnap += n
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
	err := c.st.durable(seq, gathered)
	if errStorageClosed(err) {
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
	if ok {
		if err := c.st.sync(seq); err != nil {
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
