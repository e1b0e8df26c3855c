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
