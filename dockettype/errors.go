package dockettype

import "errors"

// Sentinel errors. Every error the engine returns wraps at most one of these
// with detail; test for them with errors.Is.
var (
	// ErrInvalid reports bad input: a field out of range, a malformed name or
	// payload. Nothing was written.
	ErrInvalid = errors.New("docket: invalid argument")
	// ErrNotFound reports a task or key that does not exist (in the caller's
	// namespace: tasks of other namespaces are never visible).
	ErrNotFound = errors.New("docket: not found")
	// ErrLeaseLost reports a complete, fail, heartbeat or snooze whose
	// fencing token is stale or whose task is no longer in flight. Nothing was
	// changed; the work must be abandoned.
	ErrLeaseLost = errors.New("docket: lease lost")
	// ErrConflict reports an assertion of a transaction that did not hold,
	// or an operation the task's current state does not allow. Nothing was
	// changed.
	ErrConflict = errors.New("docket: conflict")
	// ErrPermission reports a call the caller is not allowed to make.
	ErrPermission = errors.New("docket: permission denied")
	// ErrClosed reports a call on a closed DB.
	ErrClosed = errors.New("docket: closed")
	// ErrFailed reports that a write or fsync of the log failed earlier: the
	// DB refuses every call until it is reopened, because memory may be ahead
	// of disk.
	ErrFailed = errors.New("docket: failed")
	// ErrCorrupt reports on-disk data that does not verify; the message names
	// the file and offset.
	ErrCorrupt = errors.New("docket: corrupt")
	// ErrLocked reports a data directory already open in another DB or
	// process.
	ErrLocked = errors.New("docket: directory locked")
	// ErrFull reports a write refused because the state would pass its
	// memory budget (Options.MaxMemory): nothing was done. Writes that free
	// state (complete, fail, cancel, delete) are never refused for it.
	ErrFull = errors.New("docket: memory budget full")
	// ErrReadOnly reports a write to a DB opened with OpenReadOnly.
	ErrReadOnly = errors.New("docket: read-only")
	// ErrNotLeader reports a call a replicated DB could not take because
	// this node is not the cluster's leader (or there is none): nothing was
	// done, and the call may be made again on the leader.
	ErrNotLeader = errors.New("docket: not the leader")
	// ErrNotCaughtUp reports a Join to a cluster whose configuration change
	// committed, so that the node is a member, but that ended before the
	// node acknowledged holding that configuration (the wait's deadline
	// passed, the leader changed or stopped): the error also wraps that
	// cause. A Join of the member again waits for it anew.
	ErrNotCaughtUp = errors.New("docket: the node is a member but has not caught up")
	// ErrOutcomeUnknown reports a write a replicated DB submitted whose fate
	// it cannot know (the leader lost its leadership before the write
	// committed): it may or may not have taken effect.
	ErrOutcomeUnknown = errors.New("docket: outcome unknown")
)
