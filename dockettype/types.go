package dockettype

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Namespace is the (project, scope) pair every task and key lives in.
type Namespace struct {
	Project string
	Scope   string
}

// NS returns the namespace (project, scope).
func NS(project, scope string) Namespace { return Namespace{Project: project, Scope: scope} }

// String prints the namespace as PROJECT/SCOPE, each part as it is unless
// it holds a '/', a '"', a character that does not print or bytes that are
// not UTF-8: then it is quoted as by strconv.Quote, so that no two
// namespaces print the same (NS("a/b", "c") is "\"a/b\"/c", NS("a", "b/c")
// is "a/\"b/c\""). ParseNamespace reads it back.
func (n Namespace) String() string { return quoteNSPart(n.Project) + "/" + quoteNSPart(n.Scope) }

// plainNSPart reports whether s prints as itself in Namespace.String.
func plainNSPart(s string) bool {
	for _, r := range s {
		if r == '/' || r == '"' || r == utf8.RuneError || !strconv.IsPrint(r) {
			// RuneError: bytes that are not UTF-8, or a U+FFFD, which
			// is quoted too to keep the test to one branch.
			return false
		}
	}
	return true
}

func quoteNSPart(s string) string {
	if plainNSPart(s) {
		return s
	}
	return strconv.Quote(s)
}

// ParseNamespace reads a namespace as Namespace.String prints it,
// PROJECT/SCOPE, where either part may be quoted as a Go string literal
// (and must be if it holds a '/' or a '"'). ParseNamespace(n.String())
// returns n for every namespace. It checks the syntax only: the engine
// checks the names where they are used.
func ParseNamespace(s string) (Namespace, error) {
	project, rest, err := nsPart(s, true)
	if err != nil {
		return Namespace{}, err
	}
	scope, _, err := nsPart(rest, false)
	if err != nil {
		return Namespace{}, err
	}
	return Namespace{Project: project, Scope: scope}, nil
}

// nsPart reads one part of a namespace from s: the project up to and past
// its '/', or the scope to the end.
func nsPart(s string, project bool) (part, rest string, err error) {
	what := "scope"
	if project {
		what = "project"
	}
	if strings.HasPrefix(s, `"`) {
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return "", "", invalid("namespace %s %.64q is not a complete quoted string", what, s)
		}
		if part, err = strconv.Unquote(q); err != nil {
			return "", "", invalid("namespace %s %.64q: %v", what, q, err)
		}
		rest = s[len(q):]
	} else {
		end := strings.IndexAny(s, `/"`)
		if end < 0 {
			end = len(s)
		}
		part, rest = s[:end], s[end:]
	}
	if project {
		r, ok := strings.CutPrefix(rest, "/")
		if !ok {
			return "", "", invalid("namespace %.64q: want PROJECT/SCOPE (quote a part that holds a '/' or a '\"')", s)
		}
		rest = r
	} else if rest != "" {
		return "", "", invalid("namespace scope: unexpected %.64q (quote a part that holds a '/' or a '\"')", rest)
	}
	return part, rest, nil
}

// State is where a task is in its life.
type State uint8

// Task states.
const (
	Ready     State = 1 // due, waiting to be claimed
	Scheduled State = 2 // waiting for its time (a timer, or a retry backoff)
	InFlight  State = 3 // leased to an owner
	Dead      State = 4 // in the dead-letter queue
	Completed State = 5 // done, kept because RetainCompleted is on
	Waiting   State = 6 // waiting for the tasks it depends on (Task.DependsOn)
)

var stateNames = [...]string{Ready: "ready", Scheduled: "scheduled", InFlight: "in-flight", Dead: "dead",
	Completed: "completed", Waiting: "waiting"}

func (s State) String() string {
	if s >= Ready && s <= Waiting {
		return stateNames[s]
	}
	return "invalid"
}

// Task describes a task to enqueue.
type Task struct {
	// Payload is empty or valid JSON, at most Options.MaxPayloadBytes.
	Payload []byte
	// Kind names what the task is, for routing to a handler. Optional.
	Kind string
	// Delay postpones the task: it becomes claimable after Delay (a timer).
	Delay time.Duration
	// At, if set, is the absolute time the task becomes claimable; it wins
	// over Delay.
	At time.Time
	// Priority: higher is served first; equal priorities are FIFO.
	Priority int
	// MaxAttempts is the attempt budget before the task is dead-lettered.
	// 0 means 5.
	MaxAttempts int
	// BackoffBase is the retry delay after the first failed attempt; it
	// doubles each attempt. 0 means 1 s.
	BackoffBase time.Duration
	// BackoffMax caps the retry delay. 0 means 60 s. Set together with
	// BackoffBase, it must be at least BackoffBase (ErrInvalid otherwise); a
	// BackoffBase over the default cap is capped at it.
	BackoffMax time.Duration
	// IdempotencyKey, if set, makes the enqueue idempotent within the queue:
	// while a task with this key exists (and for Options.IdempotencyTTL after
	// it ends) enqueueing it again returns the existing id. Keys under
	// ReservedPrefix are refused.
	IdempotencyKey string
	// Unique, if set, makes the enqueue unique by content within the queue
	// (see Unique); it excludes IdempotencyKey.
	Unique *Unique
	// Headers are small string pairs carried with the task (trace context,
	// tenant ids), in UTF-8. At most MaxHeaders.
	Headers map[string]string

	// DependsOn are ids of tasks of the namespace (on any of its queues)
	// this task waits for: it is Waiting until every one of them has
	// completed, then ready, or scheduled if its Delay or At has not come
	// yet (both count from the enqueue). DependencyPolicy says how each id
	// is resolved at enqueue. With DependsOnSibling, at most
	// MaxDependencies.
	DependsOn []uint64
	// DependsOnSibling are positions, among the tasks the same call
	// enqueues, of earlier ones this task waits for, as DependsOn: for
	// EnqueueBatch the tasks and then the Enqueue ops, for Enqueue the task
	// and then its Enqueue ops, for Complete the Enqueue ops of Done.Ops
	// and then Done.FollowUps, for KV.Commit its Enqueue ops. The results
	// of those calls list the tasks in this order.
	DependsOnSibling []int
	// OnParentFailure is what the task does when a task it waits for is
	// dead-lettered or cancelled. The zero value, CancelOnFailure, cancels
	// it too.
	OnParentFailure DependencyPolicy
	// Partition names the task's partition of its queue (a customer, a
	// tenant): claims take turns between the partitions that have work,
	// and Limits.PartitionMaxInFlight bounds each one. "" is no partition:
	// such tasks form one partition of their own. A name as for Kind.
	Partition string
}

// Enqueued is the outcome of one enqueue.
type Enqueued struct {
	ID uint64
	// Deduplicated is true when the idempotency key matched an existing task
	// and nothing was enqueued; ID is then that task's id.
	Deduplicated bool
}

// Lease is a claimed task. Present it to Complete, Fail, Heartbeat or
// Snooze; its Token fences out any earlier or later holder, and its Secret,
// a random value chosen when the task was claimed, makes it unforgeable:
// ids and tokens are small sequential numbers anyone can guess, so a call
// presenting the wrong secret gets ErrLeaseLost and changes nothing. Its
// Payload, Headers and Progress are the caller's own copies: changing them
// changes nothing stored. Its times are in UTC.
type Lease struct {
	ID          uint64
	Namespace   Namespace
	Queue       string
	Kind        string
	Payload     []byte
	Headers     map[string]string
	Progress    []byte
	Priority    int
	Attempt     int // 1 on the first claim
	MaxAttempts int
	Owner       string
	Token       uint64
	Secret      uint64    // known only to the holder; kept across restarts
	Deadline    time.Time // the lease ends then unless extended by Heartbeat
	EnqueuedAt  time.Time
	Partition   string // the task's partition ("" for none)
}

// CheckQueue returns an error wrapping ErrInvalid, naming both queues,
// when l names a queue other than queue of namespace ns: presenting a lease
// to another queue's handle is the caller's mistake, not a lost lease. A
// lease that names no queue (built from an id, a token and a secret alone,
// as the network API carries it) passes, and is judged by its fence.
func (l *Lease) CheckQueue(ns Namespace, queue string) error {
	if l.Queue == "" && l.Namespace == (Namespace{}) || l.Queue == queue && l.Namespace == ns {
		return nil
	}
	return invalid("lease of task %d is of queue %q in %s, presented to queue %q in %s", l.ID, l.Queue, l.Namespace, queue, ns)
}

// TaskInfo is the full view of a task record. Its slices and Headers map are
// the caller's own copies (changing them changes nothing stored); its times
// are in UTC.
type TaskInfo struct {
	ID             uint64
	Namespace      Namespace
	Queue          string
	Kind           string
	State          State
	Payload        []byte
	Headers        map[string]string
	Priority       int
	Attempts       int
	MaxAttempts    int
	NotBefore      time.Time
	Owner          string
	Token          uint64
	LeaseUntil     time.Time
	Progress       []byte
	Result         []byte
	LastError      string
	IdempotencyKey string
	BackoffBase    time.Duration
	BackoffMax     time.Duration
	CreatedAt      time.Time
	UpdatedAt      time.Time
	// Errors are the task's failed attempts, oldest first, at most
	// MaxAttemptErrors (the oldest are dropped beyond that): every failure
	// a worker reported (Fail) and every lease that expired, with its
	// attempt number, when it failed and the error ("lease expired" for an
	// expired lease). Snoozes are not failures.
	Errors []AttemptError
	// Parent is the id of the task whose completion enqueued this task (a
	// follow-up, or an Enqueue op of that Complete); 0 for none.
	Parent uint64
	// FollowUps are the ids of the tasks this task's completion enqueued
	// (follow-ups and Enqueue ops that were not deduplicated), in order. Only
	// a completed task kept by RetainCompleted has them.
	FollowUps []uint64
	// WaitingOn are the ids of the tasks a Waiting task still waits for,
	// in id order; empty for a task in any other state.
	WaitingOn []uint64
	// Dependents are the ids of the Waiting tasks that wait for this one,
	// in id order, at most MaxBatch (the lowest ids). Get fills it in; List
	// leaves it empty.
	Dependents []uint64
	// OnParentFailure is the policy the task was enqueued with.
	OnParentFailure DependencyPolicy
	// Partition is the task's partition ("" for none).
	Partition string
	// Unreadable names a value of the task (payload, progress or result)
	// that could not be read from the value log, its file, offset and
	// cause: that value is left out. Empty when every value was read.
	Unreadable string
}

// AttemptError is one failed attempt of a task: a handler's failure or an
// expired lease.
type AttemptError struct {
	Attempt int       // the attempt that failed, 1 for the first
	At      time.Time // when it failed (for an expired lease: its deadline)
	Error   string
}

func (s State) valid() bool { return s >= Ready && s <= Waiting }

// Reschedule is what Queue.Reschedule changes of a ready, scheduled or
// waiting task: its due time, its priority, or both. At least one is set.
type Reschedule struct {
	// At, if set, is the new time the task becomes claimable (between the
	// years 1970 and 9999); at or before now, it is claimable at once. A
	// waiting task keeps waiting for its dependencies and is due at At once
	// they have completed. Zero keeps the task's due time.
	At time.Time
	// Priority, if set, is the task's new priority. Nil keeps it.
	Priority *int
}
