package engine

import (
	"context"
	"errors"
	"sync"

	"github.com/docketdb/docket/engine/internal/admit"
	"github.com/docketdb/docket/engine/internal/machine"
)

// This file commits a run of enqueues in one step: the server's session
// runs every call of a read in order, and most of them are enqueues, each
// of which was a commit of its own (the engine lock taken, housekeeping,
// a batch planned, encoded, logged, applied, waiters woken, the lock
// released). A run takes the lock once, housekeeps once, plans each
// enqueue on its own with its own outcome into one batch, and logs and
// applies that batch as one record: one apply, one wake-up, one wait for
// durability for the run.
//
// Each enqueue's outcome is the one it would have had as a call of its
// own, made after the enqueues before it. What an enqueue's plan reads
// that those before it in the batch changed is either seen by the planner
// (the task ids they took; the idempotency keys and unique contents they
// enqueued: a task new in the batch is ready, scheduled or waiting, so it
// blocks a duplicate as it would once applied), or the batch is logged
// and applied first (a flush), so that the enqueue is planned on the
// state the calls one by one would have left:
//   - an enqueue with ops (KV writes, assertions, more enqueues) or with
//     dependencies, which read what the batch may have written, is
//     planned alone, in a batch of its own;
//   - the memory budget and the namespace's quota: an enqueue is admitted
//     into the batch only if it would be with everything the batch holds
//     counted at no less than what it adds to the state; otherwise the
//     batch is applied first and the enqueue admitted, or refused, on the
//     state as it is then;
//   - a batch at the size limit of one commit (MaxCommitBytes).
//
// The log holds fewer records than the calls one by one would have
// written, so what follows its sequence numbers differs from what they
// would have given: the versions of KV entries a run's enqueue writes,
// and where a claim's rotation over a queue's partitions starts.

// RunEnqueue is one enqueue of a run (DB.EnqueueRun): its arguments,
// and, once the run has returned, its outcome.
type RunEnqueue struct {
	Namespace Namespace
	Queue     string
	Task      Task
	Ops       []Op

	Enqueued Enqueued // the outcome, when Err is nil
	Err      error
}

// MaxRunStep bounds the enqueues one step of a run plans under the engine
// lock, so that a long run does not keep other committers waiting: a
// longer run takes the lock again for the next ones.
const MaxRunStep = 256

// EnqueueRun makes the enqueues of run, in order, each with the outcome
// Queue(Namespace, Queue).Enqueue(ctx, Task, Ops...) would have had called
// after the ones before it, and sets it in the item: an enqueue that is
// invalid or refused changes nothing and does not stop the others. On a
// DB of its own the run is committed in as few steps as it can be (one
// engine lock hold, one log record and one wait for durability for up to
// MaxRunStep enqueues; see the file's comment for what splits it). With a
// context from DeferDurable the wait is the Deferred's, as for Enqueue.
// A replicated DB makes the enqueues one by one.
func (d *DB) EnqueueRun(ctx context.Context, run []RunEnqueue) {
	c := d.c
	if c.repl != nil {
		for i := range run {
			r := &run[i]
			r.Enqueued, r.Err = d.Queue(r.Namespace, r.Queue).Enqueue(ctx, r.Task, r.Ops...)
		}
		return
	}
	rs := getRunState(len(run))
	defer putRunState(rs)
	for i := range run {
		r := &run[i]
		r.Enqueued, r.Err = Enqueued{}, nil
		q := queue{db: d, ns: r.Namespace, name: r.Queue}
		rs.cmds[i], r.Err = q.enqueueCommand(&r.Task, r.Ops)
	}
	c.enqueueRun(ctx, rs, run)
}

// runState is the commands of a run and the scratch of its steps, kept
// for reuse.
type runState struct {
	cmds []command
	step runStep
	rep  stepReport
	own  Deferred // the run's wait, when ctx leaves it to no Deferred
}

var runStates = sync.Pool{New: func() any { return new(runState) }}

func getRunState(n int) *runState {
	rs := runStates.Get().(*runState)
	if cap(rs.cmds) < n {
		rs.cmds = make([]command, n)
	}
	rs.cmds = rs.cmds[:n]
	return rs
}

func putRunState(rs *runState) {
	if cap(rs.cmds) > 4*MaxRunStep {
		return
	}
	for i := range rs.cmds { // the run is over: nothing holds its arguments
		if a, ok := rs.cmds[i].Args.(*machine.Enqueue); ok {
			machine.Enqueues.Put(a)
		}
	}
	clear(rs.cmds) // hold on to no payload
	rs.step.pend.Reset()
	rs.step = runStep{in: rs.step.in[:0], pend: rs.step.pend}
	rs.rep = stepReport{}
	rs.own.c, rs.own.seq, rs.own.reports = nil, 0, nil
	runStates.Put(rs)
}

// enqueueRun commits the valid commands of run (those whose item has no
// Err yet), MaxRunStep at a time, and waits once for their durability.
func (c *core) enqueueRun(ctx context.Context, rs *runState, run []RunEnqueue) {
	d := c.deferredOf(ctx)
	own := d == nil
	if own {
		d = &rs.own
		d.c = c
	}
	for i := 0; i < len(run); {
		if err := ctx.Err(); err != nil {
			failRest(run[i:], err)
			break
		}
		c.mu.Lock()
		if err := c.writable(); err != nil {
			c.mu.Unlock()
			failRest(run[i:], err)
			break
		}
		rs.rep = stepReport{}
		rep := &rs.rep
		now := c.now()
		if err := c.housekeep(now, rep); err != nil {
			c.mu.Unlock()
			failRest(run[i:], err)
			break
		}
		end := min(len(run), i+MaxRunStep)
		s := &rs.step
		s.c, s.cmds, s.run, s.rep, s.waits, s.logged = c, rs.cmds, run, rep, false, false
		s.plan(now, i, end)
		s.rep = nil
		startSnap := s.logged && c.shouldSnapshot()
		if startSnap {
			c.bg.Add(1) // under mu, as in commit
		}
		c.mu.Unlock()
		if startSnap {
			go func() {
				defer c.bg.Done()
				c.snapshotNow(false)
			}()
		}
		if s.waits {
			d.add(s.seq, *rep, nil)
		} else {
			c.report(rep, nil)
		}
		i = end
	}
	if !own {
		return
	}
	if werr := d.wait(false); werr != nil {
		for i := range run {
			if r := &run[i]; r.Err == nil || restsOnLog(r.Err) {
				r.Enqueued, r.Err = Enqueued{}, werr
			}
		}
	}
}

// restsOnLog reports whether an enqueue's error is a refusal that rests
// on the state the log holds, answered only once that is durable.
func restsOnLog(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrConflict)
}

// failRest gives err to every item of run without an outcome yet.
func failRest(run []RunEnqueue, err error) {
	for i := range run {
		if run[i].Err == nil {
			run[i].Err = err
		}
	}
}

// runStep is one step of a run: the enqueues it plans under one hold of
// the engine lock.
type runStep struct {
	c      *core
	cmds   []command
	run    []RunEnqueue
	rep    *stepReport
	p      *planner
	now    int64
	seq    uint64 // the newest batch the step wrote or saw
	waits  bool   // an outcome rests on the log
	logged bool   // a batch was logged

	in   []int         // the items the open batch holds
	size int           // about what the open batch's commands weigh
	pend admit.Pending // what the open batch adds to the state, at most
}

// plan plans, logs and applies the items [from, to) of the run. Call with
// mu held.
func (s *runStep) plan(now int64, from, to int) {
	c := s.c
	defer c.unlockOnPanic()
	s.now = now
	s.seq = c.store.Seq()
	s.begin()
	for k := from; k < to; k++ {
		r := &s.run[k]
		if r.Err != nil {
			continue
		}
		if err := c.usable(); err != nil {
			r.Err = err
			continue
		}
		cmd := &s.cmds[k]
		a := cmd.Args.(*machine.Enqueue)
		alone := len(a.Ops) > 0 || len(a.Task.Deps) > 0 || len(a.Task.Sibs) > 0
		if len(s.in) > 0 && (alone || s.size+a.Task.Size > MaxCommitBytes) {
			s.flush()
		}
		if len(s.in) > 0 && !s.fits(cmd) {
			s.flush()
		}
		s.planOne(k, cmd)
		if alone {
			s.flush()
		}
	}
	s.flush()
}

// begin starts the open batch.
func (s *runStep) begin() {
	s.p = s.c.plan.Begin(s.c.state(), &s.c.batch, s.now)
	s.in = s.in[:0]
	s.size = 0
	s.pend.Reset()
}

// planOne plans item k into the open batch, or gives it the error that
// refuses it, leaving the batch as it was.
func (s *runStep) planOne(k int, cmd *command) {
	c, p, b := s.c, s.p, &s.c.batch
	nm, na, ne := len(b.Mutations), len(b.Assertions), len(p.Events)
	var res cmdResult
	err := c.planCmd(p, cmd, &res)
	if err != nil {
		b.Mutations, b.Assertions, p.Events = b.Mutations[:nm], b.Assertions[:na], p.Events[:ne]
		if len(s.in) == 0 {
			// A plan that wrote nothing leaves no queue it looked up behind.
			c.store.DropEmpty()
			s.begin() // nothing the plan noted outlives it
		}
		if restsOnLog(err) {
			s.waits = true
		}
		s.run[k].Err = err
		return
	}
	s.run[k].Enqueued = res.Enq
	s.waits = true // a deduplicated enqueue rests on the batch it found
	if len(b.Mutations) == nm {
		return // deduplicated: nothing to log
	}
	s.in = append(s.in, k)
	s.size += cmd.Args.(*machine.Enqueue).Task.Size
	s.pend.Add(idxNS(cmd.NS), b.Mutations[nm:])
}

// fits reports whether cmd is admitted (memory budget, namespace quota)
// with what the open batch adds counted: if so, it would be admitted
// after the batch is applied too, so it is planned into it. Otherwise the
// batch is applied first, and cmd admitted or refused on that state.
func (s *runStep) fits(cmd *command) bool {
	return s.c.adm.Fits(s.c.store, cmd, s.c.threshold(), &s.pend)
}

// flush logs and applies the open batch, if it holds anything, and begins
// the next. If that fails, every item of the batch gets the failure.
func (s *runStep) flush() {
	c := s.c
	if len(s.in) == 0 {
		if len(c.batch.Mutations) == 0 {
			s.begin()
		}
		return
	}
	seq, err := c.logAndApply()
	if err != nil {
		for _, k := range s.in {
			s.run[k].Enqueued, s.run[k].Err = Enqueued{}, err
		}
		s.p.Events = s.p.Events[:0]
		c.store.DropEmpty()
	} else {
		s.seq, s.logged = seq, true
		c.count(s.p.Events)
		if c.opts.Observer != nil && len(s.p.Events) > 0 {
			s.rep.events = append(s.rep.events, s.p.Events...)
		}
	}
	s.begin()
}
