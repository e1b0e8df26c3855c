package dockettype

import "time"

// Done is what a completion commits together with the acknowledgement.
type Done struct {
	// Result is kept with the task when RetainCompleted is on. Empty or JSON.
	Result []byte
	// Ops are KV mutations and assertions in the task's namespace; a failed
	// assertion refuses the whole completion with ErrConflict.
	Ops []Op
	// FollowUps are enqueued in the same commit, on any queue of the task's
	// namespace. Their idempotency keys deduplicate as in Enqueue, with one
	// exception: a key held by the task being completed is not a duplicate
	// (that task ends in this commit), so the follow-up is enqueued and the
	// key moves to it.
	FollowUps []FollowUp
}

// FollowUp is a task to enqueue on a queue as part of another commit.
type FollowUp struct {
	Queue string
	Task  Task
}

// Failure describes a failed attempt.
type Failure struct {
	// Err is recorded as the task's last error: at most MaxErrorBytes of
	// it, without any bytes that are not UTF-8.
	Err string
	// Permanent sends the task to the dead-letter queue at once.
	Permanent bool
	// RetryAfter, if positive, replaces the exponential backoff for this
	// retry.
	RetryAfter time.Duration
}

// Counts are the number of tasks of a queue in each state.
type Counts struct {
	Ready, Scheduled, InFlight, Dead, Completed int
	Waiting                                     int
}

// QueueInfo names a queue and counts its tasks, as of the clock's now.
type QueueInfo struct {
	Namespace Namespace
	Name      string
	Counts    Counts
	// OldestReady is when the task that has been ready longest became
	// ready (a due timer at its time, an expired lease at its deadline);
	// zero when none is ready. Now minus it is the queue's wait.
	OldestReady time.Time
	// Totals count what happened to the queue's tasks: for rates.
	Totals Totals
	// Paused and Limits are the queue's settings (Queue.Settings).
	Paused bool
	Limits Limits
}

// Totals count what happened to a queue's tasks, as the log recorded it:
// they survive restarts (the log and snapshots hold them) and never go
// down. A queue that holds no task is not listed, but its totals are kept
// for 24 hours after its last task left, so a queue that drains and fills
// again counts on; after that they are forgotten and start again from 0.
// Only the 1,024 queues idle most recently keep theirs (older ones are
// forgotten sooner), so that queue names used once cost no memory.
// What time does without a write (a timer coming due, a lease expiring) is
// counted when a commit acts on it: a claim that takes an expired lease
// counts a retry and a claim, one that dead-letters it a dead letter.
type Totals struct {
	Enqueued     uint64 // tasks put on the queue
	Claimed      uint64 // leases handed out
	Completed    uint64 // tasks completed
	Retried      uint64 // failed attempts (a failure or an expired lease) after which the task waits to run again
	DeadLettered uint64 // tasks moved to the dead-letter queue
}

// ListOptions select a page of tasks.
type ListOptions struct {
	State State
	// Limit bounds the page; 0 means 100, at most MaxBatch.
	Limit int
	// Cursor continues after the page that returned it; "" starts at the
	// beginning.
	Cursor string
}

// Page is one page of a listing. Next is "" when there is nothing more.
type Page struct {
	Tasks []TaskInfo
	Next  string
}

// Entry is a KV entry. Version changes on every write of the key and never
// repeats: it is the engine-wide sequence number of the batch that wrote
// the key, which every commit of every namespace moves (see the security
// model in the README for what that lets a tenant observe).
type Entry struct {
	Key     string
	Value   []byte
	Version uint64
}

// ScanOptions select KV entries: those with Prefix, and with Start <= key <
// End where set, in key order, at most Limit (0 means 100, at most MaxBatch).
type ScanOptions struct {
	Prefix string
	Start  string
	End    string
	Limit  int
}

// TxResult is the outcome of a committed transaction.
type TxResult struct {
	// Version is the version every key written by the transaction now has:
	// the engine-wide sequence number of its batch, or, for a commit that
	// wrote nothing (only assertions, or a deduplicated enqueue), the
	// sequence number of the state it was checked against.
	Version uint64
	// Enqueued has one entry per Enqueue op, in order.
	Enqueued []Enqueued
}

// Fair scheduling by partition. A task may name a partition of its queue
// (Task.Partition: a customer, a tenant); the tasks that name none form
// one partition of their own, the default one. A claim of a queue whose
// tasks name partitions takes turns between the partitions that have
// claimable work: one task from each in rotation, then another round, so
// that a partition with a million ready tasks gets one turn in a round as
// one with ten does. Within a partition tasks are served as a queue's
// always are (higher priority first, then oldest); across partitions the
// rotation decides, not priority: a partition's priority-0 task is served
// in its turn before another partition's second, priority-10 task.
//
// Where a rotation starts is the partition of rank mix(seq) among those
// with work, seq being the last batch the state holds: a function of the
// state alone, the same on every node of a replicated log and after a
// restore, with no cursor to log. Over many claims every partition starts
// a rotation as often as any other.
//
// Limits.PartitionMaxInFlight bounds each partition's tasks in flight: a
// partition at its bound is passed over in the rotation. On a queue whose
// tasks name no partition it is a second bound on the queue's tasks in
// flight (the default partition holds them all).
//
// Limits.PartitionRate gives each partition a token bucket of its own
// (index.PartBucket), as Limits.Rate gives the queue one: a claim leases
// from a partition at most the tokens its bucket holds and takes them, and
// a partition out of tokens is passed over until its bucket gains one. On
// a queue whose tasks name no partition it is a second rate limit on the
// queue. A bucket is stored only while it is not full, as a record of the
// log and snapshots, so replicas and restarts plan the same claims.
// PartitionInfo is one partition of a queue, as Partitions lists it: its
// key ("" for the tasks that name none) and its tasks by state, as of now.
type PartitionInfo struct {
	Key    string
	Counts Counts
}

// PartitionListOptions select a page of a queue's partitions.
type PartitionListOptions struct {
	// Limit bounds the page; 0 means 100, at most MaxBatch.
	Limit int
	// Cursor continues after the page that returned it (PartitionPage.Next);
	// "" starts at the beginning.
	Cursor string
}

// PartitionPage is one page of Partitions. Next is the Cursor of the next
// page, "" when there is nothing more.
type PartitionPage struct {
	Partitions []PartitionInfo
	Next       string
}
