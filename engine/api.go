package engine

import (
	"context"
	"time"
)

// API is what docket offers a program: queues, key-value entries with
// transactions, and a view over every queue. *DB implements it in process;
// the client package implements it over the network, with the same option
// types and the same sentinel errors, so code written against API (the
// worker runtime, a dashboard, a program's own handlers) runs on either.
type API interface {
	// Queue returns a handle on the queue name in namespace ns. Handles are
	// cheap; names are checked on each call.
	Queue(ns Namespace, name string) Queue
	// KV returns a handle on the key-value entries of namespace ns.
	KV(ns Namespace) KV
	// Queues lists every queue that holds tasks or has settings (see
	// Queue.Settings), in namespace and name order. A caller sees only the
	// namespaces it may read.
	Queues(ctx context.Context) ([]QueueInfo, error)
	// Clock returns the clock the engine reads, so code built on it (a
	// worker runtime, a test) shares one notion of time.
	Clock() Clock
	// Close releases the handle. On a DB it closes the engine.
	Close() error
}

// Queue is a handle on one queue of a namespace.
type Queue interface {
	// Namespace returns the queue's namespace.
	Namespace() Namespace
	// Name returns the queue's name.
	Name() string

	// Enqueue adds t to the queue. ops (KV writes, assertions, more
	// enqueues) commit in the same batch, or nothing does: a failed
	// assertion returns ErrConflict.
	Enqueue(ctx context.Context, t Task, ops ...Op) (Enqueued, error)
	// EnqueueBatch adds tasks in one commit, with ops as in Enqueue. The
	// results are in the order of tasks.
	EnqueueBatch(ctx context.Context, tasks []Task, ops ...Op) ([]Enqueued, error)
	// EnqueueAsync is Enqueue that does not wait for its commit to be
	// durable: it returns a Pending as soon as the commit is under way, so
	// that one caller can have many commits in flight, and Pending.Wait
	// returns what Enqueue would have, once it is known. Commits in flight
	// are bounded (Options.MaxInFlight on a DB): the call waits for a slot,
	// or until ctx ends.
	EnqueueAsync(ctx context.Context, t Task, ops ...Op) *Pending

	// Claim leases up to max ready tasks to owner for lease, highest
	// priority first, FIFO within a priority. A due timer and an expired
	// lease with attempts left are ready (in their place in that order, so
	// no task is served while one of higher priority is due); an expired
	// lease on its last attempt is dead-lettered. It returns at once, with
	// no leases if nothing is due.
	Claim(ctx context.Context, owner string, lease time.Duration, max int) ([]Lease, error)
	// ClaimWait is Claim that, when nothing is due, waits until a task is
	// enqueued, a timer comes due or a lease expires, or ctx ends. On a
	// paused queue it waits for Resume; at the queue's in-flight bound,
	// for a task to leave flight; with no rate-limit token, for the next
	// one.
	ClaimWait(ctx context.Context, owner string, lease time.Duration, max int) ([]Lease, error)

	// Complete acknowledges a leased task: it is deleted (or kept as
	// completed with its result when RetainCompleted is on), d.Ops are
	// applied and d.FollowUps enqueued, all in one commit fenced by the
	// lease's token. The result has one Enqueued per Enqueue op of d.Ops,
	// then one per follow-up, in order; each task enqueued records the
	// completed task as its Parent. A stale lease, or one past its deadline,
	// returns ErrLeaseLost and changes nothing.
	Complete(ctx context.Context, l Lease, d Done) (TxResult, error)
	// CompleteBatch completes plain leases (no result, ops or follow-ups) in
	// one commit. Each lease is fenced on its own: errs[i] is nil or
	// ErrLeaseLost for leases[i], and the others still complete.
	CompleteBatch(ctx context.Context, leases []Lease) (errs []error, err error)
	// CompleteAndClaim is Complete and Claim in one commit: it completes l
	// with d and leases up to max tasks of the queue to owner for lease. A
	// worker draining a queue pays one commit per task. If the lease is
	// lost, or d is refused, nothing is completed and nothing claimed.
	CompleteAndClaim(ctx context.Context, l Lease, d Done, owner string, lease time.Duration, max int) (TxResult, []Lease, error)
	// Fail records a failed attempt: the task is retried after its backoff,
	// or dead-lettered when its attempts are spent or f.Permanent is set.
	// Fenced like Complete.
	Fail(ctx context.Context, l Lease, f Failure) error
	// Heartbeat extends the lease l points to until now+extend and, if
	// progress is not nil, records it (empty or JSON). On success it updates
	// l.Deadline (and l.Progress) so the caller holds the current lease.
	// Fenced like Complete.
	Heartbeat(ctx context.Context, l *Lease, extend time.Duration, progress []byte) error
	// HeartbeatBatch extends every lease of leases until now+extend in one
	// commit, updating each one's Deadline. Each lease is fenced on its
	// own: errs[i] is nil or ErrLeaseLost for leases[i], and the others are
	// still extended.
	HeartbeatBatch(ctx context.Context, leases []*Lease, extend time.Duration) (errs []error, err error)
	// Snooze puts a leased task back to wait for d without counting the
	// attempt (d == 0 releases it to be claimed again at once). Fenced like
	// Complete.
	Snooze(ctx context.Context, l Lease, d time.Duration) error

	// Cancel deletes a task in any state. A worker holding its lease gets
	// ErrLeaseLost on its next call.
	Cancel(ctx context.Context, id uint64) error
	// Redrive makes a dead task ready again with a fresh attempt budget.
	Redrive(ctx context.Context, id uint64) error
	// RedriveAll redrives every dead task of the queue and says how many.
	RedriveAll(ctx context.Context) (int, error)
	// RunNow makes a scheduled task (a timer, or a retry waiting out its
	// backoff) due now; a ready task is left as it is. ErrNotFound if the
	// queue has no such task, ErrInvalid if it is in flight, dead or
	// completed.
	RunNow(ctx context.Context, id uint64) error
	// Reschedule moves a ready, scheduled or waiting task to a new due
	// time and/or priority (Reschedule); claims follow the new order at
	// once, and a waiting task keeps waiting for its dependencies. It needs
	// the permission RunNow does. ErrNotFound if the queue has no such
	// task, ErrConflict (naming the state) if it is in flight, dead or
	// completed, ErrInvalid for a time outside the years 1970-9999 or
	// nothing to change; an error changes nothing.
	Reschedule(ctx context.Context, id uint64, r Reschedule) error

	// Get returns a task of the queue, ErrNotFound if there is none. Reads
	// report the state as of the clock's now: a due timer is ready, an
	// expired lease ready again (or dead on its last attempt), a retained
	// completion past its retention gone, whether or not a commit has
	// stored that yet.
	Get(ctx context.Context, id uint64) (TaskInfo, error)
	// List returns a page of the queue's tasks in one state, as of now.
	List(ctx context.Context, o ListOptions) (Page, error)
	// Search returns a page of the queue's tasks that a Filter selects
	// (state, kind, error text, partition, header, id range, enqueue
	// time), over the whole queue in id order, and on request how many
	// it selects in all. It needs PermRead.
	Search(ctx context.Context, o SearchOptions) (SearchPage, error)
	// Bulk retries, cancels, runs now or deletes every task of the queue
	// that f selects, in commits of a bounded size, and says how many it
	// acted on and how many it skipped, and why. It needs PermAdmin.
	Bulk(ctx context.Context, f Filter, a BulkAction) (BulkResult, error)
	// Counts returns how many tasks the queue holds in each state, as of
	// now.
	Counts(ctx context.Context) (Counts, error)

	// Pause stops the queue's claims until Resume: Claim leases nothing
	// and ClaimWait waits, while enqueues and every other call go on. It
	// is durable and needs PermAdmin; the queue keeps it while it holds no
	// task.
	Pause(ctx context.Context) error
	// Resume ends a pause; ClaimWait calls parked on the queue wake.
	Resume(ctx context.Context) error
	// SetLimits replaces the queue's limits (a bound on its tasks in
	// flight, a rate limit), leaving its pause state; the zero Limits
	// removes them. They hold across every claimer and apply from the next
	// claim on. PermAdmin.
	SetLimits(ctx context.Context, l Limits) error
	// Settings returns the queue's pause state and limits. PermRead.
	Settings(ctx context.Context) (QueueSettings, error)
	// Partitions lists a page of the queue's partitions (Task.Partition)
	// that hold a task, in key order, with their tasks by state. PermRead.
	Partitions(ctx context.Context, o PartitionListOptions) (PartitionPage, error)
}

// KV is a handle on the key-value entries of one namespace.
type KV interface {
	// Namespace returns the handle's namespace.
	Namespace() Namespace
	// Get returns the entry for key, ErrNotFound if there is none.
	Get(ctx context.Context, key string) (Entry, error)
	// Scan returns entries in key order.
	Scan(ctx context.Context, o ScanOptions) ([]Entry, error)
	// Commit applies ops atomically: assertions are checked against the
	// state before the commit; if any fails, nothing is applied and the call
	// returns ErrConflict.
	Commit(ctx context.Context, ops ...Op) (TxResult, error)
}

var _ API = (*DB)(nil)
