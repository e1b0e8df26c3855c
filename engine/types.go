package engine

import (
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/vfs"
)

// Durability says when a commit is acknowledged relative to the disk.
type Durability int

const (
	// SyncAlways acknowledges a commit only after the log holding it is
	// fsynced. Concurrent commits share one fsync (group commit). Default.
	SyncAlways Durability = iota
	// SyncInterval acknowledges once the log is written to the OS and fsyncs
	// it every Options.SyncEvery: a power loss can lose that window, a process
	// crash loses nothing.
	SyncInterval
	// SyncNever acknowledges once the log is written to the OS and leaves
	// fsync to the OS.
	SyncNever
)

func (d Durability) String() string {
	switch d {
	case SyncAlways:
		return "always"
	case SyncInterval:
		return "interval"
	case SyncNever:
		return "never"
	}
	return "invalid"
}

// Options configure a DB. The zero value is a durable DB with the defaults
// named on each field.
type Options struct {
	Durability Durability
	// SyncEvery is the fsync period of SyncInterval. Default 10 ms.
	SyncEvery time.Duration
	// Clock is the time source. Default: the system clock.
	Clock Clock
	// IdempotencyTTL is how long an idempotency key is remembered after its
	// task ends (completed or cancelled). Default 24 h; negative forgets it at
	// once.
	IdempotencyTTL time.Duration
	// RetainCompleted keeps completed tasks, with their result, for this long
	// after completion. Default 0: completed tasks are deleted at once.
	RetainCompleted time.Duration
	// MaxPayloadBytes bounds a payload, progress, result or KV value.
	// Default 1 MiB.
	MaxPayloadBytes int
	// SnapshotBytes is how much log is written before a snapshot is taken
	// in the background. Default 64 MiB; negative turns automatic snapshots
	// off (Checkpoint and Close still take one).
	SnapshotBytes int64
	// SegmentBytes is the size of a log segment. Default 16 MiB.
	SegmentBytes int
	// MaxInFlight bounds the EnqueueAsync calls whose outcome is not known
	// yet, across the DB: the next one waits for a slot. Default
	// DefaultMaxInFlight.
	MaxInFlight int
	// Secure refuses every call made without a caller (see DB.As).
	Secure bool
	// Authorizer decides what a caller may do. Default: deny everything.
	Authorizer Authorizer
	// Logger receives warnings (a failed background snapshot, a repaired log
	// tail). Default: slog.Default().
	Logger *slog.Logger
	// MaxMemory bounds the memory the state takes, in bytes: task records
	// with their payloads and fields, idempotency keys, KV entries and
	// dependencies (see ErrFull). Default 0: a quarter of the memory of
	// the machine or of the process's cgroup, whichever is smaller (no
	// bound where neither can be read); negative: no bound.
	MaxMemory int64
	// Observer, if set, is told about commits, task outcomes, fsyncs and
	// snapshots. Its methods run on the committing goroutine after the
	// engine's lock is released (for EnqueueAsync, on the goroutine that
	// settles its round, once it is durable); they must be quick.
	Observer Observer

	// fs is the file system the DB's files are on; nil is the operating
	// system's. Only tests set it (internal/enginetest.FS), to run on a
	// memory file system that can crash or on one that fails chosen
	// operations.
	fs vfs.FS
	// failpoint, if set, is called at named points of the log and
	// snapshot code; a non-nil error is treated as an I/O error at that
	// point (see wal.Options.Failpoint and snapshot.Options.Failpoint).
	// Only tests set it (internal/enginetest.Failpoint).
	failpoint func(name string) error

	// tap, if set, receives every committed batch as the bytes the log
	// holds for it (also in memory, where nothing is logged), in sequence
	// order, right after it is applied: a replica that applies them reaches
	// the same state, byte for byte. It runs with core.mu held: it must be
	// quick, must not call the DB, and must copy data to keep it. Only
	// tests set it (internal/enginetest.Tap from outside engine).
	tap func(seq uint64, data []byte)
}

func (o Options) withDefaults() Options {
	if o.SyncEvery <= 0 {
		o.SyncEvery = 10 * time.Millisecond
	}
	if o.Clock == nil {
		o.Clock = SystemClock
	}
	if o.IdempotencyTTL == 0 {
		o.IdempotencyTTL = 24 * time.Hour
	}
	if o.MaxPayloadBytes <= 0 {
		o.MaxPayloadBytes = 1 << 20
	}
	if o.SnapshotBytes == 0 {
		o.SnapshotBytes = 64 << 20
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = 16 << 20
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

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

func (n Namespace) idx() index.Namespace { return index.Namespace{Project: n.Project, Scope: n.Scope} }

// State is where a task is in its life.
type State uint8

// Task states.
const (
	Ready     = State(index.StateReady)     // due, waiting to be claimed
	Scheduled = State(index.StateScheduled) // waiting for its time (a timer, or a retry backoff)
	InFlight  = State(index.StateInFlight)  // leased to an owner
	Dead      = State(index.StateDead)      // in the dead-letter queue
	Completed = State(index.StateCompleted) // done, kept because RetainCompleted is on
	Waiting   = State(index.StateWaiting)   // waiting for the tasks it depends on (Task.DependsOn)
)

func (s State) String() string { return index.TaskState(s).String() }

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
}

// AttemptError is one failed attempt of a task: a handler's failure or an
// expired lease.
type AttemptError struct {
	Attempt int       // the attempt that failed, 1 for the first
	At      time.Time // when it failed (for an expired lease: its deadline)
	Error   string
}

// Counts are the number of tasks of a queue in each state.
type Counts struct {
	Ready, Scheduled, InFlight, Dead, Completed int
	Waiting                                     int
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
