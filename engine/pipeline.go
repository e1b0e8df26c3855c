package engine

import (
	"context"
	"sync"

	"github.com/docketdb/docket/engine/internal/machine"
	"github.com/docketdb/docket/engine/internal/ticket"
)

// This file is the pipelined commit path of EnqueueAsync (see the package
// doc): no goroutine is started per commit, and nothing is reported
// durable before the log says it is.

// DefaultMaxInFlight is Options.MaxInFlight when it is not set.
const DefaultMaxInFlight = 1024

// Pending is an asynchronous enqueue in flight (Queue.EnqueueAsync). Its
// outcome is known once Done is closed: Wait returns it. A Pending that
// reports success is as durable as Enqueue's answer would be.
type Pending = ticket.Pending

var settledPending = ticket.Settled

// NewPending returns a Pending and the function that settles it, for an
// implementation of Queue other than a DB's (a network client) to return
// from EnqueueAsync. Only the first call of settle counts.
func NewPending() (*Pending, func(Enqueued, error)) { return ticket.New() }

// syncRound is the commits in flight that one wait for the log settles:
// a Deferred, whose wait the pipeline makes, and the Pendings it settles.
type syncRound struct {
	*ticket.Round
	d Deferred
	n int // commits in the round, each holding a slot
}

// roundReport is what a commit of the round leaves to tell the Observer
// and the log once its outcome is known.
type roundReport struct {
	rep stepReport
	err error
}

// EnqueueAsync is Enqueue without the wait for durability: it validates,
// plans, logs and applies the enqueue as Enqueue does and returns a
// Pending at once; Pending.Wait returns what Enqueue would have. With a
// context from DeferDurable, on a DB whose waits it defers, that is
// Enqueue's answer with the wait left to the Deferred: the Pending is
// settled when it is returned, and holds once Deferred.Wait returns nil,
// so that a caller with many enqueues to make (the server's EnqueueEach)
// makes them all and then leads one sync of the log itself. At most
// Options.MaxInFlight enqueues are in flight on a DB: the next one waits
// for a slot, or for ctx to end (its Pending then reports ctx's error and
// nothing was enqueued). ctx bounds only that wait. A DB of its own commits
// its enqueues in the order of the calls. On a replicated DB the command
// is submitted to the replicated log from a goroutine of its own, one per
// commit in flight (Replicator.Submit waits for the log), still at most
// MaxInFlight, so enqueues in flight together may reach the log in any
// order: wait for one's Pending before an enqueue that must come after
// it (the same idempotency key, a KV assertion on what it wrote).
func (q *queue) EnqueueAsync(ctx context.Context, t Task, ops ...Op) *Pending {
	cmd, err := q.enqueueCommand(&t, ops)
	if err != nil {
		return settledPending(Enqueued{}, err)
	}
	p := q.db.c.execAsync(ctx, &cmd)
	if q.db.c.repl == nil { // planned: execAsync submits a replicated command later
		machine.Enqueues.Put(cmd.Args.(*machine.Enqueue))
	}
	return p
}

// execAsync runs a validated enqueue command and returns its Pending.
func (c *core) execAsync(ctx context.Context, cmd *command) *Pending {
	if err := ctx.Err(); err != nil {
		return settledPending(Enqueued{}, err)
	}
	if !c.acquire(ctx) {
		return settledPending(Enqueued{}, ctx.Err())
	}
	if c.repl != nil {
		return c.submitAsync(ctx, cmd)
	}
	var res cmdResult
	c.mu.Lock()
	if err := c.writable(); err != nil {
		c.mu.Unlock()
		c.release(1)
		return settledPending(Enqueued{}, err)
	}
	seq, rep, err := c.step(c.now(), func(p *planner) error { return c.planCmd(p, cmd, &res) })
	if rep.housekept != nil {
		c.mu.Unlock()
		c.release(1)
		return settledPending(Enqueued{}, rep.housekept)
	}
	startSnap := err == nil && c.shouldSnapshot()
	if startSnap {
		c.bg.Add(1) // under mu, as in commit
	}
	var p *Pending
	if !c.st.logged() || err != nil && !rep.refused {
		// Nothing to wait for: in memory, or a failure that logged nothing.
		c.mu.Unlock()
		c.release(1)
		c.report(&rep, err)
		p = settledPending(res.Enq, err)
	} else if d := c.deferredOf(ctx); d != nil {
		// The wait is the Deferred's: settled now, as Enqueue would
		// answer with ctx, and held only once d.Wait returns nil.
		c.mu.Unlock()
		c.release(1)
		d.add(seq, rep, err)
		p = settledPending(res.Enq, err)
	} else {
		// A refusal waits too: it may rest on batches not durable yet.
		r := c.open
		if r == nil {
			r = &syncRound{Round: ticket.NewRound(), d: Deferred{c: c}}
			c.open = r
		}
		r.n++
		r.d.add(seq, rep, err)
		c.mu.Unlock()
		select {
		case c.kick <- struct{}{}:
		default: // the pipeline is told already
		}
		p = r.Pending(res.Enq, err)
	}
	if startSnap {
		go func() {
			defer c.bg.Done()
			c.snapshotNow(false)
		}()
	}
	return p
}

// submitAsync is execAsync on a replicated DB: the command is submitted to
// the log on a goroutine that holds the slot the caller took until the log
// answers.
func (c *core) submitAsync(ctx context.Context, cmd *command) *Pending {
	p, settle := NewPending()
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer c.release(1)
		var res cmdResult
		err := c.submit(ctx, cmd, &res)
		settle(res.Enq, err)
	}()
	return p
}

// acquire takes a slot for a commit in flight, waiting until one is free
// or ctx ends.
func (c *core) acquire(ctx context.Context) bool {
	select {
	case c.slots <- struct{}{}:
		return true
	default:
	}
	select {
	case c.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// release frees n slots.
func (c *core) release(n int) {
	for range n {
		<-c.slots
	}
}

// pipeline settles the sync rounds of EnqueueAsync, one after another,
// until Close; then it settles the last.
func (c *core) pipeline() {
	defer c.piped.Done()
	for {
		select {
		case <-c.kick:
			c.settleRound()
		case <-c.stopBg:
			// Close marked the engine closed before it closed stopBg: no
			// commit joins a round after this one.
			c.settleRound()
			return
		}
	}
}

// settleRound waits for the log to make the open round durable and settles
// its commits.
func (c *core) settleRound() {
	c.mu.Lock()
	r := c.open
	c.open = nil
	c.mu.Unlock()
	if r == nil {
		return
	}
	_, seq, reports := r.d.take()
	rerr := c.durable(seq)
	c.release(r.n) // before the outcomes: a caller that saw one may enqueue again at once
	r.Settle(rerr)
	c.reportAll(reports, rerr)
}

// deferKey marks a context whose commits leave their wait for durability
// to a Deferred.
type deferKey struct{}

// Deferred is the wait for durability of the commits made with a context
// from DeferDurable, left for Wait to do once for all of them. It is the
// engine's one way of committing now and waiting later: EnqueueAsync's
// sync rounds and a run of enqueues (EnqueueRun) wait through one too.
type Deferred struct {
	mu      sync.Mutex
	c       *core
	seq     uint64 // the newest batch a deferred commit wrote or saw
	reports []roundReport
}

// DeferDurable returns a context whose commits on a DB of its own
// (standalone, with a directory) answer as soon as they are logged and
// applied, without waiting for the log to make them durable, and the
// Deferred whose Wait then waits for all of them at once: commits made
// together this way share one sync of the log instead of each leading or
// joining a round of its own. Nothing those calls returned may be acted
// on or passed on before Wait has returned nil: until then it may not
// survive a crash. A replicated DB (whose log waits inside each call), a
// DB in memory (nothing to wait for) and a call that wrote and saw nothing
// needing a wait are not deferred. The Observer hears of a deferred commit
// once Wait knows its outcome.
func DeferDurable(ctx context.Context) (context.Context, *Deferred) {
	d := &Deferred{}
	return context.WithValue(ctx, deferKey{}, d), d
}

// deferredOf returns the Deferred that ctx leaves c's waits to, if any.
func (c *core) deferredOf(ctx context.Context) *Deferred {
	if !c.st.logged() {
		return nil // nothing to wait for, or a log that waits inside each call
	}
	d, _ := ctx.Value(deferKey{}).(*Deferred)
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c == nil {
		d.c = c
	}
	if d.c != c {
		return nil // another DB's: this one waits as usual
	}
	return d
}

// add records a commit that saw or wrote batch seq and left its wait and
// its report to d.
func (d *Deferred) add(seq uint64, rep stepReport, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seq = max(d.seq, seq)
	if rep.events != nil || rep.dead != nil || rep.hkEvents != nil || rep.hkDead != nil {
		d.reports = append(d.reports, roundReport{rep: rep, err: err})
	}
}

// Wait returns once every commit deferred to d so far is as durable as
// the DB's options promise, or with the error that stops it from being
// (the log failed, the DB closed): then none of those calls' answers
// holds. Commits deferred after Wait has begun are left to the next call.
func (d *Deferred) Wait() error { return d.wait(true) }

// wait is Wait; gathered is durableGathered's: false for a caller whose
// commits may not all be in.
func (d *Deferred) wait(gathered bool) error {
	c, seq, reports := d.take()
	if c == nil || seq == 0 && reports == nil {
		return nil
	}
	err := c.durableGathered(seq, gathered)
	c.reportAll(reports, err)
	return err
}

// take returns what was deferred to d so far (its DB, the newest batch, the
// reports) and leaves d empty.
func (d *Deferred) take() (*core, uint64, []roundReport) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, seq, reports := d.c, d.seq, d.reports
	d.seq, d.reports = 0, nil
	return c, seq, reports
}

// reportAll reports deferred commits once their wait ended with err.
func (c *core) reportAll(reports []roundReport, err error) {
	for i := range reports {
		rr := &reports[i]
		rerr := rr.err
		if err != nil {
			rerr = err
		}
		c.report(&rr.rep, rerr)
	}
}
