package dockettype

import (
	"slices"
)

// DependencyPolicy says what a waiting task does when a task it depends on
// is dead-lettered or cancelled.
//
// A task enqueued with Task.DependsOn (ids) or Task.DependsOnSibling
// (earlier tasks of the same call) waits, in state Waiting, until every
// task it depends on has completed; it is then ready, or scheduled when
// its Delay or At (counted from the enqueue) has not come yet. Tasks of
// any queue of the namespace can depend on each other. Each dependency is
// a record of its own (index.Dep), indexed by parent and by dependent, and
// the index counts how many parents each waiting task still waits for: a
// parent's completion touches its dependents only (one record deleted
// each, and an update for those it releases), and a task waiting on
// thousands of parents is released by the one completion that brings its
// count to zero, without a rescan.
//
// At enqueue, each id is resolved against the state of the commit:
//
//   - an id no task has ever had (at or past the next id) is ErrInvalid;
//   - an id no task has now (it completed and was deleted, was cancelled,
//     or its retained completion was forgotten) counts as completed, as
//     does the id of a task of another namespace (to this namespace it is
//     a task that does not exist), a retained completed task, and the task
//     the commit itself completes (a follow-up depending on its parent);
//   - a task dead at the time of the commit follows the policy: with
//     CancelOnFailure the enqueue is refused with ErrConflict (nothing of
//     the commit is applied), with WaitOnFailure the task waits for it to be
//     redriven and complete, with RunOnFailure it counts as done;
//   - any other task (waiting, ready, scheduled, in flight, or enqueued
//     earlier in the same commit) is waited for.
//
// A task whose dependencies are all satisfied at enqueue is enqueued as if
// it had none. Repeated ids are waited for once. A deduplicated enqueue
// (an idempotency key, or Unique content) changes nothing, dependencies
// included: the task it names keeps its own, and a sibling reference to
// the duplicate stands for that task. A unique task that is waiting blocks
// its content whatever its Unique.States. Because a task
// can only depend on tasks that exist before it, dependencies never form a
// cycle.
//
// When a task a waiting task depends on is dead-lettered or cancelled, the
// waiting task follows its OnParentFailure: CancelOnFailure cancels it, and
// its own dependents follow theirs in turn (in the same commit); with
// WaitOnFailure it keeps waiting for a dead parent (Redrive it, and its
// completion releases the dependents) but is cancelled with a cancelled
// one, which can never complete; with RunOnFailure the failed parent counts
// as done. Time alone kills a task whose last lease expires: the commit
// that stores that death applies the policies, and every commit first
// stores the deaths of tasks others wait for (housekeeping), so their
// dependents follow without waiting for a claim on the dead task's queue.
//
// A released task is ready like any other: on a paused queue no claim
// leases it until Resume (a ClaimWait parked there is not woken by the
// release), and the queue's in-flight bound and rate limit count it as
// they count every task.
type DependencyPolicy uint8

// Dependency policies. Part of the log's format: do not renumber.
const (
	// CancelOnFailure cancels the waiting task, and, in turn, the tasks
	// that wait for it by their own policies. The default.
	CancelOnFailure DependencyPolicy = iota
	// WaitOnFailure keeps the task waiting for a dead parent, until the
	// parent is redriven and completes (or is cancelled, which cancels the
	// task).
	WaitOnFailure
	// RunOnFailure counts a dead or cancelled parent as done.
	RunOnFailure
)

var policyNames = [...]string{"cancel", "wait", "run"}

func (p DependencyPolicy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return "invalid"
}

// ParsePolicy returns the policy its String names.
func ParsePolicy(s string) (DependencyPolicy, error) {
	if i := slices.Index(policyNames[:], s); i >= 0 {
		return DependencyPolicy(i), nil
	}
	return 0, invalid("dependency policy %q (want cancel, wait or run)", s)
}
