package dockettype

import (
	"time"
)

// Unique makes an enqueue unique by content (what River calls UniqueOpts
// with ByArgs and ByPeriod): within Window of a task's enqueue, enqueueing
// a task of the same kind with the same payload on the same queue, while
// the first is in one of States, enqueues nothing and returns the first
// task's id with Deduplicated set, as a duplicate idempotency key does.
// It is that machinery: the key is derived from the content and kept with
// the states and the window's end.
//
// Content is the task's Kind and its payload in canonical JSON: object
// members sorted by key (compared as UTF-8 bytes, duplicate keys kept in
// their order), no whitespace outside strings, strings written with the
// fewest escapes (only ", \ and control characters are escaped; \n, \r,
// \t, \b and \f by name, others as \u00XX; invalid UTF-8 reads as U+FFFD),
// numbers, true, false and null exactly as written (1 and 1.0 differ). So
// {"b": [1, 2], "a": "\u00e9"} and {"a":"é","b":[1,2]} are the same
// content. The key is "docket/unique/" and the hex SHA-256 of the kind, a
// NUL byte, and the canonical payload; TaskInfo.IdempotencyKey shows it.
//
// A task cannot have both Unique and an IdempotencyKey.
type Unique struct {
	// Window is how long after a task's enqueue its content blocks another
	// enqueue of the same content. Required: at least a microsecond, at
	// most MaxDuration.
	Window time.Duration
	// States are the states in which the existing task blocks it. They
	// must include Ready, Scheduled and InFlight (a task waiting or running
	// always blocks); Dead and Completed are optional. A task Waiting for
	// the tasks it depends on always blocks too, whether or not States
	// names Waiting (naming it changes nothing). A completed task blocks
	// for the rest of the window even once it is deleted (with
	// RetainCompleted off). A cancelled task never blocks, nor does one
	// cancelled because a task it depended on failed. None (nil or empty)
	// means Ready, Scheduled, InFlight and Completed (and Waiting).
	//
	// A unique task may have dependencies. A duplicate is deduplicated into
	// the first task whatever its own dependencies, which are then ignored
	// (as with an idempotency key): the first task keeps the dependencies
	// it was enqueued with.
	States []State
}
