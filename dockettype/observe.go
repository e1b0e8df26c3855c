package dockettype

import (
	"time"
)

// EventKind names what happened to tasks.
type EventKind uint8

// Task events.
const (
	EvEnqueued  EventKind = iota + 1 // new tasks (deduplicated enqueues are not counted)
	EvClaimed                        // leased to an owner
	EvCompleted                      // acknowledged
	EvRetried                        // failed with attempts left, scheduled again
	EvDead                           // moved to the dead-letter queue (failure or lease expiry)
	EvReclaimed                      // an expired lease taken over by a claim
	EvLeaseLost                      // a stale complete/fail/heartbeat was refused
	EvCancelled                      // removed by Cancel
	EvRedriven                       // moved from dead back to ready
	EvDenied                         // a call refused for lack of permission (Queue is empty)
)

var eventNames = [...]string{"", "enqueued", "claimed", "completed", "retried", "dead", "reclaimed",
	"lease_lost", "cancelled", "redriven", "denied"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "invalid"
}

// TaskEvent reports tasks of one queue reaching a point of their life.
type TaskEvent struct {
	Kind      EventKind
	Namespace Namespace
	Queue     string
	// Latency is, for EvCompleted, the time from creation to completion.
	Latency time.Duration
}

// SnapshotEvent reports a snapshot written (or failed).
type SnapshotEvent struct {
	Seq      uint64
	Bytes    int64
	Duration time.Duration
	Err      error
}

// Observer is told what the engine does, for metrics and tracing. Methods run
// on the committing goroutine after the engine lock is released, so they see
// only acknowledged work; they must be fast and must not call back into the
// DB. With no Observer set the engine pays nothing for this.
type Observer interface {
	TaskEvents(events []TaskEvent)
	// Synced reports one fsync of the log covering records commits.
	Synced(d time.Duration, records int)
	Snapshot(ev SnapshotEvent)
}

// Stats are counters since Open plus current sizes.
type Stats struct {
	Seq   uint64 // last committed batch
	Tasks int    // task records held
	// Memory is what the state takes as the memory budget counts it (see
	// Options.MaxMemory), MemoryBudget that budget (0: none).
	Memory, MemoryBudget int64
	// ValueLogBytes is the size of the value log's files on disk (values
	// of Options.ValueThreshold bytes or more), ValueLiveBytes the bytes of
	// the values in them that tasks still hold; the rest is reclaimed by
	// compaction (DB.CompactValues).
	ValueLogBytes, ValueLiveBytes int64
	Commits                       uint64
	Enqueued                      uint64
	Claimed                       uint64
	Completed                     uint64
	Retried                       uint64
	DeadLettered                  uint64
	Reclaimed                     uint64
	LeaseLost                     uint64
	Denied                        uint64
	LogSyncs                      uint64        // fsyncs of the log
	LogSyncTime                   time.Duration // time spent in them
	LogBytes                      uint64        // bytes written to the log
	Snapshots                     uint64
	// LogGroups counts the fsyncs of the log that made batches durable by
	// how many each covered (one batch per commit, housekeeping aside):
	// LogGroups[i] those of a size LogGroupRange(i).
	LogGroups [LogGroupBuckets]uint64
	// LogGathers counts the fsyncs whose leader first waited, for at most
	// half an fsync, for committers the fsync before had released (group
	// commit); LogGatherMisses those whose committers did not all come
	// within that bound: committers that do not commit again as soon as
	// their commit returns (a producer at a fixed rate).
	LogGathers, LogGatherMisses uint64
	// UnreadableValues counts the reads of a value in the value log (a
	// payload, progress record or result) that failed: damage (a bad
	// checksum, a file cut short or missing) or an I/O error. A claim
	// fails such a task instead of leasing it, and Get, List and Search
	// return it without the value (TaskInfo.Unreadable). Anything but 0
	// calls for `docket verify`.
	UnreadableValues uint64
}

// LogGroupBuckets is the number of buckets of Stats.LogGroups: one per
// group size up to 16, then one per power of two, the last open-ended.
const LogGroupBuckets = 24

// Clock is the engine's source of time. Every commit reads it once; blocking
// claims use its timers to wake when a timer or a lease comes due.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer created by a Clock.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}
