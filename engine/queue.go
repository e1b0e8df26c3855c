package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/docketdb/docket/engine/internal/machine"
	"github.com/docketdb/docket/engine/internal/readable"
	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/engine/internal/view"
	"github.com/docketdb/docket/internal/index"
)

var (
	timeOf = view.TimeOf
	micros = view.Micros
	infoOf = view.Info
)

// queue is the in-process Queue.
type queue struct {
	db   *DB
	ns   Namespace
	name string
}

// Queue returns a handle on the queue name in namespace ns.
func (d *DB) Queue(ns Namespace, name string) Queue {
	return &queue{db: d, ns: ns, name: name}
}

// Name returns the queue's name.
func (q *queue) Name() string { return q.name }

// Namespace returns the queue's namespace.
func (q *queue) Namespace() Namespace { return q.ns }

func (q *queue) key() index.QueueKey {
	return index.QueueKey{Namespace: idxNS(q.ns), Name: q.name}
}

// check validates the handle's names and the caller's permissions.
func (q *queue) check(perms Perm) error {
	if err := checkNS(q.ns); err != nil {
		return err
	}
	if err := validate.Name("queue name", q.name); err != nil {
		return err
	}
	return q.db.authorize(q.ns, perms)
}

// Enqueue adds t to the queue. ops (KV writes, assertions, more enqueues)
// commit in the same batch, or nothing does: a failed assertion returns
// ErrConflict.
func (q *queue) Enqueue(ctx context.Context, t Task, ops ...Op) (Enqueued, error) {
	cmd, err := q.enqueueCommand(&t, ops)
	if err != nil {
		return Enqueued{}, err
	}
	var res cmdResult
	err = q.db.c.exec(ctx, &cmd, &res)
	if machine.Enqueues.Put(cmd.Args.(*machine.Enqueue)); err != nil {
		return Enqueued{}, err
	}
	return res.Enq, nil
}

// enqueueCommand validates an enqueue of t with ops and checks the
// caller's permissions.
func (q *queue) enqueueCommand(t *Task, ops []Op) (command, error) {
	maxPayload := q.db.c.opts.MaxPayloadBytes
	s, err := validate.Task(t, maxPayload, q.db.c.borrows(t.Payload))
	if err != nil {
		return command{}, err
	}
	vops, err := q.enqueueOps([]spec{s}, s.Size, ops)
	if err != nil {
		return command{}, err
	}
	a := machine.Enqueues.Get()
	a.Task, a.Ops = s, vops
	return q.cmd(a), nil
}

// enqueueOps validates the ops of an enqueue of specs, of about size
// bytes, and checks the caller's permissions.
func (q *queue) enqueueOps(specs []spec, size int, ops []Op) ([]vop, error) {
	vops, perms, opSize, err := validate.UserSpace.Ops(ops, q.db.c.opts.MaxPayloadBytes, nil)
	if err != nil {
		return nil, err
	}
	if size+opSize > MaxCommitBytes {
		return nil, invalid("commit of about %d bytes, over the limit of %d", size+opSize, MaxCommitBytes)
	}
	if err := validate.Siblings(specs, vops); err != nil {
		return nil, err
	}
	return vops, q.check(PermEnqueue | perms)
}

// EnqueueBatch adds tasks in one commit, with ops as in Enqueue. The results
// are in the order of tasks.
func (q *queue) EnqueueBatch(ctx context.Context, tasks []Task, ops ...Op) ([]Enqueued, error) {
	if len(tasks) > MaxBatch {
		return nil, invalid("%d tasks in one batch, over the limit of %d", len(tasks), MaxBatch)
	}
	maxPayload := q.db.c.opts.MaxPayloadBytes
	sp := getSpecs(len(tasks))
	specs := *sp
	if q.db.c.repl == nil {
		// A local commit has planned the specs when exec returns; a
		// replicated one may still hold them after its caller gave up.
		defer putSpecs(sp)
	}
	size := 0
	for i := range tasks {
		s, err := validate.Task(&tasks[i], maxPayload, q.db.c.borrows(tasks[i].Payload))
		if err != nil {
			if len(tasks) > 1 {
				err = fmt.Errorf("task %d: %w", i, err)
			}
			return nil, err
		}
		specs[i] = s
		size += s.Size
	}
	vops, err := q.enqueueOps(specs, size, ops)
	if err != nil {
		return nil, err
	}
	cmd := q.cmd(&machine.EnqueueBatch{Tasks: specs, Ops: vops})
	// Allocated here, outside the engine lock; a replicated apply allocates
	// it as it plans.
	res := cmdResult{Enqs: make([]Enqueued, len(tasks), len(tasks)+len(vops))}
	if err := q.db.c.exec(ctx, &cmd, &res); err != nil {
		return nil, err
	}
	return res.Enqs, nil
}

// specSlices holds the spec slices of EnqueueBatch for reuse: a batch's
// specs are garbage once it is planned, and made anew they were the larger
// part of what a batch enqueue allocated.
var specSlices = sync.Pool{New: func() any { return new([]spec) }}

func getSpecs(n int) *[]spec {
	sp := specSlices.Get().(*[]spec)
	*sp = slices.Grow((*sp)[:0], n)[:n]
	return sp
}

// maxPooledSpecs bounds the slices the pool keeps (about 200 KiB each):
// a larger batch makes its own, as every batch did before.
const maxPooledSpecs = 1024

// putSpecs returns a slice of getSpecs to the pool, cleared so that the
// pool holds on to no payload.
func putSpecs(sp *[]spec) {
	if cap(*sp) > maxPooledSpecs {
		return
	}
	clear(*sp)
	*sp = (*sp)[:0]
	specSlices.Put(sp)
}

// Claim leases up to max tasks to owner for lease, highest priority first
// and FIFO within a priority, from every task ready now: stored ready, due
// timers, and expired leases with attempts left (an expired lease on its
// last attempt is dead-lettered). It returns at once, with no tasks if none
// is due. A task whose payload or progress cannot be read from the value
// log is not handed out: the engine fails it (unreadable.go) and returns
// the other leases.
func (q *queue) Claim(ctx context.Context, owner string, lease time.Duration, max int) ([]Lease, error) {
	if err := validate.Claim(owner, lease, max); err != nil {
		return nil, err
	}
	if err := q.check(PermWork); err != nil {
		return nil, err
	}
	out, _, err := q.claim(ctx, owner, lease.Microseconds(), max, false, nil)
	return out, err
}

// claim leases up to max tasks. A ClaimWait passes the sleeper it parked
// as last time (nil the first time): it is back to claim. With wait set
// and nothing to lease, the call parks again and claim returns the new
// sleeper. If the claim never planned (an error before it), prev is
// returned as it was, for the caller to leave.
func (q *queue) claim(ctx context.Context, owner string, lease int64, max int, wait bool, prev *sleeper) ([]Lease, *sleeper, error) {
	a := machine.Claims.Get()
	defer machine.Claims.Put(a)
	a.Owner, a.Lease, a.Max, a.Wait = owner, lease, max, wait
	cmd := q.cmd(a)
	var res cmdResult
	s := prev
	qk := q.key()
	c := q.db.c
	if c.repl != nil {
		return c.claimReplicated(ctx, &cmd, wait, prev)
	}
	for round := 1; ; round++ {
		var ws []want
		res = cmdResult{}
		_, err := c.commit(ctx, func(p *planner) error {
			if s != nil {
				c.arrive(s)
				s = nil
			}
			err := c.planCmd(p, &cmd, &res)
			if len(res.Leases) == 0 && wait {
				s = c.park(qk, res.Due)
			}
			if err == nil && c.vals != nil && len(res.Leases) > 0 {
				ws = c.leaseWants(res.Leases, ws)
			}
			return err
		})
		if err != nil || len(ws) == 0 {
			return res.Leases, s, err
		}
		out, err := c.fillLeases(ctx, res.Leases, ws)
		if err != nil || len(out) > 0 || round == claimRounds || ctx.Err() != nil {
			return out, s, err
		}
		// Every task leased had a value that cannot be read, and is failed
		// now: claim again, for the tasks behind them.
	}
}

// claimRounds bounds the claims one call makes when every task each leased
// had a value that cannot be read (each round fails those tasks): the call
// then returns no lease, as if none were due, and the next carries on.
const claimRounds = 4

// ClaimWait is Claim that blocks until at least one task can be leased: it
// parks until a task is enqueued, a timer comes due or a lease expires, or
// ctx ends (then it returns ctx's error). A paused queue's claims park
// until its Resume commits, however much work arrives; one at its
// in-flight bound until a task leaves flight or a lease expires; one with
// no rate-limit token until the moment the next comes (a timer, no
// polling). A commit wakes only as many parked calls as it made tasks
// claimable, within the queue's controls (wake.go). The caller's
// permission is checked again each time it wakes, so a revoked grant ends
// the wait with ErrPermission.
func (q *queue) ClaimWait(ctx context.Context, owner string, lease time.Duration, max int) ([]Lease, error) {
	if err := validate.Claim(owner, lease, max); err != nil {
		return nil, err
	}
	if err := q.check(PermWork); err != nil {
		return nil, err
	}
	c := q.db.c
	var s *sleeper
	for {
		out, next, err := q.claim(ctx, owner, lease.Microseconds(), max, true, s)
		s = next
		if err != nil || len(out) > 0 {
			if s != nil {
				c.leave(s)
			}
			return out, err
		}
		if s == nil {
			// The claim leased tasks and failed them all, their values
			// unreadable (claimRounds): there may be more behind them.
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			continue
		}
		var timeout <-chan time.Time
		var t Timer
		if s.due != 0 {
			// A timer or a lease comes due then: claim again even if nothing
			// is enqueued meanwhile. The wait is measured from a fresh
			// reading, so time that passed since the claim is not waited
			// twice.
			wait := micros(s.due - c.clock.Now().UnixMicro())
			if wait < time.Microsecond {
				wait = time.Microsecond
			}
			t = c.clock.NewTimer(wait)
			timeout = t.C()
		}
		unpark := c.parking.park(q.key(), s, t)
		select {
		case <-s.ch:
		case <-timeout:
		case <-ctx.Done():
		}
		unpark()
		if t != nil {
			t.Stop()
		}
		if err := ctx.Err(); err != nil {
			c.leave(s)
			return nil, err
		}
		// The grant may have been revoked while the claim was parked: a
		// call is authorized for each claim it makes, not once.
		if err := q.db.authorize(q.ns, PermWork); err != nil {
			c.leave(s)
			return nil, err
		}
	}
}

// Complete acknowledges a leased task: it is deleted (or kept as completed
// with its result when RetainCompleted is on), d.Ops are applied and
// d.FollowUps enqueued, all in one commit fenced by the lease's token. A
// stale lease, or one past its deadline, returns ErrLeaseLost and changes
// nothing.
func (q *queue) Complete(ctx context.Context, l Lease, d Done) (TxResult, error) {
	a := machine.Completes.Get()
	defer machine.Completes.Put(a)
	if err := q.completeCommand(a, l, d); err != nil {
		return TxResult{}, err
	}
	cmd, res := q.cmd(a), cmdResult{}
	if err := q.db.c.exec(ctx, &cmd, &res); err != nil {
		return TxResult{}, err
	}
	return TxResult{Version: res.Seq, Enqueued: res.Enqs}, nil
}

// completeCommand validates a completion of l with d and checks the
// caller's permissions.
func (q *queue) completeCommand(a *machine.Complete, l Lease, d Done) error {
	c := q.db.c
	ops, err := validate.Done(&d, c.opts.MaxPayloadBytes)
	if err != nil {
		return err
	}
	vops, perms, _, err := validate.UserSpace.Ops(ops, c.opts.MaxPayloadBytes, nil)
	if err == nil {
		err = validate.Siblings(nil, vops)
	}
	if err == nil {
		err = q.check(PermWork | perms)
	}
	if err == nil {
		err = q.owns(&l)
	}
	a.Fence, a.Result, a.Ops = l, validate.Clone(d.Result), vops
	return err
}

// cmd is the command of operation a on the queue.
func (q *queue) cmd(a machine.Args) command { return command{NS: q.ns, Queue: q.name, Args: a} }

// owns refuses a lease of another queue presented to this queue's handle
// (see Lease.CheckQueue).
func (q *queue) owns(l *Lease) error { return l.CheckQueue(q.ns, q.name) }

// CompleteBatch acknowledges many leased tasks in one commit, each fenced by
// its own token: a stale lease gets ErrLeaseLost in its place of the
// returned slice and the others complete. The error return is for the call
// as a whole (bad input, permissions, a closed or failed DB); then nothing
// was completed.
func (q *queue) CompleteBatch(ctx context.Context, leases []Lease) ([]error, error) {
	if len(leases) > MaxBatch {
		return nil, invalid("%d leases in one batch, over the limit of %d", len(leases), MaxBatch)
	}
	if err := q.check(PermWork); err != nil {
		return nil, err
	}
	for i := range leases {
		if err := q.owns(&leases[i]); err != nil {
			return nil, err
		}
	}
	cmd := q.cmd(&machine.CompleteBatch{Fences: leases, Dup: machine.RepeatedLeases(leases)})
	var res cmdResult
	if err := q.db.c.exec(ctx, &cmd, &res); err != nil {
		return nil, err
	}
	return res.Errs, nil
}

// Fail records a failed attempt of a leased task: it is retried after
// exponential backoff (or f.RetryAfter), or dead-lettered when its attempts
// are spent or f.Permanent is set. Fenced like Complete.
func (q *queue) Fail(ctx context.Context, l Lease, f Failure) error {
	if err := validate.Duration("retry after", f.RetryAfter, true); err != nil {
		return err
	}
	if err := q.check(PermWork); err != nil {
		return err
	}
	msg := ErrorText(f.Err)
	if err := q.owns(&l); err != nil {
		return err
	}
	cmd := q.cmd(&machine.Fail{Fence: l, ErrMsg: msg, Permanent: f.Permanent, Delay: f.RetryAfter.Microseconds()})
	var res cmdResult
	return q.db.c.exec(ctx, &cmd, &res)
}

func (q *queue) Heartbeat(ctx context.Context, l *Lease, extend time.Duration, progress []byte) error {
	if l == nil {
		return invalid("nil lease")
	}
	if err := validate.LeaseTime("extend", extend); err != nil {
		return err
	}
	if err := validate.JSON("progress", progress, q.db.c.opts.MaxPayloadBytes); err != nil {
		return err
	}
	if err := q.check(PermWork); err != nil {
		return err
	}
	prog := validate.Clone(progress)
	if err := q.owns(l); err != nil {
		return err
	}
	cmd := q.cmd(&machine.Heartbeat{Fence: *l, Lease: extend.Microseconds(), Progress: prog, HasProg: progress != nil})
	var res cmdResult
	if err := q.db.c.exec(ctx, &cmd, &res); err != nil {
		return err
	}
	l.Deadline = timeOf(res.Deadline)
	if progress != nil {
		l.Progress = validate.Clone(prog)
	}
	return nil
}

// Snooze puts a leased task back to wait for d without counting the attempt
// (d == 0 releases it to be claimed again at once, as a worker shutting down
// does). Fenced like Complete.
func (q *queue) Snooze(ctx context.Context, l Lease, d time.Duration) error {
	if err := validate.Duration("snooze", d, true); err != nil {
		return err
	}
	if err := q.check(PermWork); err != nil {
		return err
	}
	if err := q.owns(&l); err != nil {
		return err
	}
	cmd := q.cmd(&machine.Snooze{Fence: l, Delay: d.Microseconds()})
	var res cmdResult
	return q.db.c.exec(ctx, &cmd, &res)
}

// Cancel removes a task in any state. A worker holding it gets ErrLeaseLost
// when it completes. ErrNotFound if the queue has no such task.
func (q *queue) Cancel(ctx context.Context, id uint64) error {
	err := q.onTask(ctx, &machine.Cancel{ID: id})
	if err == nil {
		q.db.c.watch.fire(id)
	}
	return err
}

// Redrive moves a dead task back to ready with a fresh attempt budget.
// ErrNotFound if there is no such task; ErrConflict if it is not dead.
func (q *queue) Redrive(ctx context.Context, id uint64) error {
	return q.onTask(ctx, &machine.Redrive{ID: id})
}

// RunNow makes a scheduled task (a timer, or a retry waiting out its
// backoff) ready at once, keeping its attempts; a ready task is left as it
// is. ErrNotFound if the queue has no such task; ErrInvalid, naming the
// state, for a task in flight, dead or completed.
func (q *queue) RunNow(ctx context.Context, id uint64) error {
	return q.onTask(ctx, &machine.RunNow{ID: id})
}

// Reschedule moves a ready, scheduled or waiting task to a new due time
// and/or priority.
func (q *queue) Reschedule(ctx context.Context, id uint64, r Reschedule) error {
	if err := q.check(PermAdmin); err != nil {
		return err
	}
	a := &machine.Reschedule{ID: id}
	if !r.At.IsZero() {
		if y := r.At.Year(); y < 1970 || y > 9999 || r.At.UnixMicro() <= 0 {
			return invalid("reschedule at %v is outside the years 1970-9999", r.At)
		}
		a.At = r.At.UnixMicro()
	}
	if r.Priority != nil {
		a.Prio, a.SetPrio = int64(*r.Priority), true
	}
	if err := a.Check(); err != nil {
		return err
	}
	cmd, res := q.cmd(a), cmdResult{}
	return q.db.c.exec(ctx, &cmd, &res)
}

// onTask runs an admin change of one task of the queue (a) in one commit:
// its plan finds the task (ErrNotFound if the queue has none).
func (q *queue) onTask(ctx context.Context, a machine.Args) error {
	if err := q.check(PermAdmin); err != nil {
		return err
	}
	cmd := q.cmd(a)
	var res cmdResult
	return q.db.c.exec(ctx, &cmd, &res)
}

// RedriveAll moves every dead task of the queue back to ready and returns
// how many it moved. Large dead-letter queues are moved in several commits.
func (q *queue) RedriveAll(ctx context.Context) (int, error) {
	if err := q.check(PermAdmin); err != nil {
		return 0, err
	}
	total := 0
	for {
		cmd := q.cmd(&machine.RedriveAll{})
		var res cmdResult
		err := q.db.c.exec(ctx, &cmd, &res)
		total += res.N
		if err != nil || res.N < MaxBatch {
			return total, err
		}
	}
}

// read runs fn under the engine lock for a read-only call, then waits until
// what it saw is durable: state is applied before its batch is fsynced, and a
// reader must not act on something a crash could take back.
func (c *core) read(ctx context.Context, fn func()) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.readBarrier(ctx); err != nil {
		return err
	}
	var seq uint64
	if err := c.locked(func() { fn(); seq = c.store.Seq() }); err != nil {
		return err
	}
	return c.durable(seq)
}

// locked runs fn under the engine lock, without read's barrier: for the
// pages of a read that made (or will make) it once.
func (c *core) locked(fn func()) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return err
	}
	fn()
	return nil
}

// Get returns the task with the given id, ErrNotFound if the queue has none.
// A value of the task that cannot be read from the value log is left out:
// Get returns the rest of the task with an error wrapping ErrCorrupt that
// names the damage (as TaskInfo.Unreadable does).
func (q *queue) Get(ctx context.Context, id uint64) (TaskInfo, error) {
	if err := q.check(PermRead); err != nil {
		return TaskInfo{}, err
	}
	var info TaskInfo
	qk := q.key()
	var terr error
	var ws []want
	c := q.db.c
	err := c.read(ctx, func() {
		now := c.now()
		var t *index.Task
		if t, terr = c.task(qk, id, now); terr == nil {
			info = infoOf(t, now)
			view.Deps(c.store, &info, true)
			ws = wants(ws, 0, t, true)
		}
	})
	if err == nil {
		err = terr
	}
	if err == nil && len(ws) > 0 {
		// A value that cannot be read leaves the record to return, with an
		// error naming the damage.
		infos := []TaskInfo{info}
		var bad []badValue
		bad, err = c.fillInfos(infos, ws)
		info = infos[0]
		if err == nil && len(bad) > 0 {
			err = bad[0].Err
		}
	}
	return info, err
}

// Counts returns the number of tasks of the queue in each state, as of the
// clock's now: a due timer counts as ready, an expired lease as ready (or
// dead on its last attempt), and a retained completion past its retention
// not at all, whether or not a commit has stored that yet. It costs
// O(log² n), not a walk over the queue.
func (q *queue) Counts(ctx context.Context) (Counts, error) {
	if err := q.check(PermRead); err != nil {
		return Counts{}, err
	}
	var n Counts
	qk := q.key()
	c := q.db.c
	err := c.read(ctx, func() {
		if iq := c.store.Queue(qk); iq != nil {
			now := c.now()
			n = view.Counts(iq, now, c.doneBefore(now))
		}
	})
	return n, err
}

// List returns a page of the queue's tasks in state o.State as of the
// clock's now, in the order they are served: ready by priority then age,
// scheduled by due time, in-flight by lease deadline, dead, completed and
// waiting by id. Like Counts it sees time pass without a write: ready includes due
// timers and expired leases (in their place in the serving order), dead
// includes expired last-attempt leases, and scheduled and in-flight leave
// them out. So a listing that takes several calls sees time move between
// them like any other change: a lease that expires between the ready and
// the in-flight listing is in neither (read with a clock that stands still
// to see one moment). A page costs O(Limit log n), except that a completed
// listing steps over retained completions past their retention that no
// commit has deleted yet.
func (q *queue) List(ctx context.Context, o ListOptions) (Page, error) {
	if !index.TaskState(o.State).Valid() {
		return Page{}, invalid("list state %d", o.State)
	}
	if err := validate.PageLimit("list limit", &o.Limit); err != nil {
		return Page{}, err
	}
	a, id, err := view.ParseCursor(o.Cursor)
	if err != nil {
		return Page{}, err
	}
	if err := q.check(PermRead); err != nil {
		return Page{}, err
	}
	var page Page
	var ws []want
	qk := q.key()
	c := q.db.c
	err = c.read(ctx, func() {
		iq := c.store.Queue(qk)
		if iq == nil {
			return
		}
		now := c.now()
		page.Next = view.List(c.store, iq, o.State, a, id, o.Cursor == "", o.Limit, now, c.doneBefore(now), func(t *index.Task) {
			page.Tasks = append(page.Tasks, infoOf(t, now))
			view.Deps(c.store, &page.Tasks[len(page.Tasks)-1], false)
			ws = wants(ws, len(page.Tasks)-1, t, true)
		})
	})
	if err == nil && len(ws) > 0 {
		_, err = c.fillInfos(page.Tasks, ws)
	}
	return page, err
}

// namespacePage is how many namespaces readableSpaces visits under one
// hold of the engine lock.
const namespacePage = readable.Page

// testHookNamespacePage, when set, is called after each page of
// namespaces readableSpaces visits under the lock, with their number.
var testHookNamespacePage func(n int)

// readableSpaces returns, in order, the namespaces that hold a queue (or
// a queue's settings) and that the caller may read (package readable).
func (d *DB) readableSpaces(ctx context.Context) ([]index.Namespace, error) {
	// The pages skip read's barrier: make it once, first, so that no
	// namespace committed before the call is missed.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := d.c.readBarrier(ctx); err != nil {
		return nil, err
	}
	visit := func(from index.Namespace, fn func(index.Namespace) bool) error {
		return d.c.locked(func() { d.c.store.NamespacesFrom(from, fn) })
	}
	return readable.Spaces(ctx, d.c.opts.Authorizer, *d.caller, visit, testHookNamespacePage)
}

// Queues lists every queue that holds tasks or has settings (paused, or
// limited: see Queue.Settings), in namespace and name order. A caller sees
// only the namespaces it may read: the namespaces are decided first, each
// with one question to the Authorizer asked outside the engine lock, and
// only the queues of readable namespaces are visited. The namespaces asked
// about are those the caller's grants name when the Authorizer lists them
// (GrantLister, as Policy does), and otherwise every namespace, a page at a
// time under the lock.
func (d *DB) Queues(ctx context.Context) ([]QueueInfo, error) {
	if d.bad != nil {
		return nil, d.bad
	}
	if d.caller == nil && d.c.opts.Secure {
		return nil, d.authorize(Namespace{}, PermRead)
	}
	var readable []index.Namespace // nil: every one (the program itself)
	if d.caller != nil {
		var err error
		if readable, err = d.readableSpaces(ctx); err != nil || len(readable) == 0 {
			return nil, err
		}
	}
	var out []QueueInfo
	err := d.c.read(ctx, func() {
		now := d.c.now()
		add := func(iq *index.Queue) bool {
			if info, ok := view.Queue(d.c.store, iq, now, d.c.doneBefore(now)); ok {
				out = append(out, info)
			}
			return true
		}
		if readable == nil {
			d.c.store.Queues(add)
		} else {
			for _, ns := range readable {
				d.c.store.QueuesIn(ns, add)
			}
		}
		out = view.WithSettings(d.c.store, out, readable)
	})
	if err != nil {
		return nil, err
	}
	view.SortQueues(out)
	return out, nil
}
