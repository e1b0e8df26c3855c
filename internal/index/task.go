package index

import "unique"

// TaskState is where a task is in its life. The values are part of the
// on-disk format (logged and snapshotted): do not renumber them.
type TaskState uint8

// Task states.
const (
	StateReady     TaskState = 1 // due and waiting to be claimed
	StateScheduled TaskState = 2 // waiting for its not-before time
	StateInFlight  TaskState = 3 // leased to an owner until LeaseUntil
	StateDead      TaskState = 4 // attempts spent or failed permanently
	StateCompleted TaskState = 5 // done, kept with its result (retention on)
	StateWaiting   TaskState = 6 // waiting for the tasks it depends on (see Dep)
)

// NumStates bounds the TaskState values, for arrays indexed by state.
const NumStates = 7

// Valid reports whether s is one of the defined states.
func (s TaskState) Valid() bool { return s >= StateReady && s <= StateWaiting }

func (s TaskState) String() string {
	switch s {
	case StateReady:
		return "ready"
	case StateScheduled:
		return "scheduled"
	case StateInFlight:
		return "in-flight"
	case StateDead:
		return "dead"
	case StateCompleted:
		return "completed"
	case StateWaiting:
		return "waiting"
	}
	return "invalid"
}

// Namespace is the (project, scope) pair every task and key lives in.
type Namespace struct {
	Project, Scope string
}

// QueueKey names one queue: its namespace and its name.
type QueueKey struct {
	Namespace
	Name string
}

func (a Namespace) less(b Namespace) bool {
	if a.Project != b.Project {
		return a.Project < b.Project
	}
	return a.Scope < b.Scope
}

func (a QueueKey) less(b QueueKey) bool {
	if a.Project != b.Project {
		return a.Project < b.Project
	}
	if a.Scope != b.Scope {
		return a.Scope < b.Scope
	}
	return a.Name < b.Name
}

// Task is one primary task record. Records in a Store are immutable: a change
// installs a new *Task, so a copy-on-write image taken for a snapshot keeps
// seeing the old one. Times are Unix microseconds.
//
// The id is global, increasing and never reused; it also orders tasks of equal
// priority first-in first-out.
//
// A pending task is the common record and its size is the store's size per
// task, so the fields it does not need live out of line: Run holds what
// changes once a task has been claimed or otherwise moved (nil for a task
// as it was enqueued), the retry policy and the partition are interned
// (tasks with the same policy and partition share one value), and Extra
// holds the rarely set fields. The payload takes the same place in line or
// by reference. Read them with the methods (Payload, PayloadRef, Owner,
// Token, LeaseUntil, Secret, Updated, MaxAttempts, BackoffBase, BackoffMax,
// Part); set them on a record not yet stored with SetPayload,
// SetPayloadRef, SetRun, SetRetry and SetPart.
type Task struct {
	ID        uint64
	Queue     *Queue
	State     TaskState
	Attempts  uint32
	Priority  int64
	NotBefore int64
	Created   int64
	// pay is the payload, in line or by reference (Payload, PayloadRef).
	pay payload
	// Run is nil while the task is as enqueued: no owner, token, lease or
	// secret, and Updated equal to Created.
	Run *Run
	// sh holds the retry policy and the partition, interned.
	sh unique.Handle[shared]
	// Extra holds the fields most pending tasks never use, so that a waiting
	// task costs one pointer for them instead of eight words.
	Extra *Extra
}

// Run is the part of a task record that a claim or another transition sets.
// Like Task it is immutable once stored.
type Run struct {
	Owner      string
	Token      uint64 // the fencing token, kept after the lease ends: the next claim counts on from it
	LeaseUntil int64
	// Secret is the lease secret of an in-flight task: a random value only
	// the holder of the lease knows, so a lease cannot be forged from its
	// (sequential) id and token. 0 when not in flight.
	Secret  uint64
	Updated int64
}

// Retry is a task's attempt budget and backoff: at most MaxAttempts
// attempts, a failed one retried after BackoffBase * 2^(attempts-1) capped
// at BackoffMax.
type Retry struct {
	MaxAttempts uint32
	BackoffBase int64
	BackoffMax  int64
}

var noRun Run

// Owner is the owner of the task's lease ("" when not in flight).
func (t *Task) Owner() string { return t.run().Owner }

// Token is the task's fencing token: the number of its last claim.
func (t *Task) Token() uint64 { return t.run().Token }

// LeaseUntil is when the task's lease ends.
func (t *Task) LeaseUntil() int64 { return t.run().LeaseUntil }

// Secret is the lease secret of an in-flight task, 0 when not in flight.
func (t *Task) Secret() uint64 { return t.run().Secret }

// Updated is when the task last changed.
func (t *Task) Updated() int64 {
	if t.Run == nil {
		return t.Created
	}
	return t.Run.Updated
}

func (t *Task) run() *Run {
	if t.Run == nil {
		return &noRun
	}
	return t.Run
}

// SetRun sets the lease fields and the update time of t, which must not be
// stored yet. It leaves Run nil when they are those of a task as enqueued
// (so set Created first), so that equal records have equal fields.
func (t *Task) SetRun(owner string, token uint64, leaseUntil int64, secret uint64, updated int64) {
	t.Run = nil
	if owner != "" || token != 0 || leaseUntil != 0 || secret != 0 || updated != t.Created {
		t.Run = &Run{Owner: owner, Token: token, LeaseUntil: leaseUntil, Secret: secret, Updated: updated}
	}
}

// shared is the part of a record that many tasks have alike: the retry
// policy and the partition. It is interned, so that tasks that have it
// alike share one value.
type shared struct {
	Retry
	part *Partition
}

func (t *Task) shared() shared {
	if t.sh == (unique.Handle[shared]{}) {
		return shared{}
	}
	return t.sh.Value()
}

func (t *Task) setShared(v shared) {
	t.sh = unique.Handle[shared]{}
	if v != (shared{}) {
		t.sh = unique.Make(v)
	}
}

// Retry returns the task's retry policy.
func (t *Task) Retry() Retry { return t.shared().Retry }

// MaxAttempts is the task's attempt budget.
func (t *Task) MaxAttempts() uint32 { return t.shared().MaxAttempts }

// BackoffBase is the delay before the task's first retry.
func (t *Task) BackoffBase() int64 { return t.shared().BackoffBase }

// BackoffMax caps the delay before a retry.
func (t *Task) BackoffMax() int64 { return t.shared().BackoffMax }

// SetRetry sets the retry policy of t, which must not be stored yet.
func (t *Task) SetRetry(r Retry) { t.setShared(shared{r, t.Part()}) }

// Part is the task's partition of its queue (partition.go), nil for the
// default one.
func (t *Task) Part() *Partition { return t.shared().part }

// SetPart sets the partition of t, which must not be stored yet.
func (t *Task) SetPart(p *Partition) { t.setShared(shared{t.Retry(), p}) }

// sharedCache remembers the last interned value, for an owner that sets
// the same one on record after record: a decoder, and the store (NewTask,
// and internPart when Apply or a restore points a record at its queue's
// partition). Comparing with the last is much cheaper than unique.Make's
// hash and map.
type sharedCache struct {
	v shared
	h unique.Handle[shared]
}

// handle is unique.Make(v) through the cache (the zero handle for the
// zero value).
func (c *sharedCache) handle(v shared) unique.Handle[shared] {
	if v == (shared{}) {
		return unique.Handle[shared]{}
	}
	if c.h == (unique.Handle[shared]{}) || c.v != v {
		c.v, c.h = v, unique.Make(v)
	}
	return c.h
}

func (c *sharedCache) set(t *Task, r Retry) { t.sh = c.handle(shared{Retry: r}) }

// Extra is the rarely set part of a task record. Like Task it is immutable
// once stored.
type Extra struct {
	Kind      string
	IdemKey   string
	LastError string
	Progress  []byte
	Result    []byte
	Headers   map[string]string
	// Errors is the history of failed attempts (a handler's failure or an
	// expired lease), oldest first, at most MaxAttemptErrors: the oldest
	// are dropped beyond that.
	Errors []AttemptError
	// Parent is the id of the task whose completion enqueued this one (0
	// for none).
	Parent uint64
	// FollowUps are the ids of the tasks this task's completion enqueued,
	// kept on a retained completed task.
	FollowUps []uint64
	// DepPolicy is what the task does when a task it waits for (see Dep)
	// is dead-lettered or cancelled. The index stores it; the planner
	// gives it meaning (engine.DependencyPolicy).
	DepPolicy uint8
	// Refs are the references of the task's result and progress kept in
	// the value log, nil when both are in line. A value is in line
	// (Result, Progress) or by reference, never both. The payload's
	// reference is the task's own (PayloadRef).
	Refs *TaskRefs
}

// AttemptError is one failed attempt: its number, when it failed (Unix
// micros) and the error.
type AttemptError struct {
	Attempt uint32
	At      int64
	Error   string
}

// MaxAttemptErrors bounds Extra.Errors. Part of the state machine: Apply
// drops the oldest entries beyond it, so changing it changes what a replay
// rebuilds.
const MaxAttemptErrors = 20

// empty reports whether e holds nothing.
func (e *Extra) empty() bool {
	if e == nil {
		return true
	}
	if !e.Refs.empty() {
		return false
	}
	return e.Kind == "" && e.IdemKey == "" && e.LastError == "" &&
		len(e.Progress) == 0 && len(e.Result) == 0 && len(e.Headers) == 0 &&
		len(e.Errors) == 0 && e.Parent == 0 && len(e.FollowUps) == 0 && e.DepPolicy == 0
}

// Ex returns the task's extra fields, or an empty value when it has none.
func (t *Task) Ex() *Extra {
	if t.Extra == nil {
		return &noExtra
	}
	return t.Extra
}

var noExtra Extra

// KV is one key-value entry. Version is the sequence number of the batch that
// last wrote it, so it increases on every write and is never reused. The
// value is in line (Value) or, when Ref is not nil, in the value log; never
// both. Like a task record, the ValueRef Ref points at is never changed
// once stored.
type KV struct {
	Namespace
	Key     string
	Value   []byte
	Version uint64
	Ref     *ValueRef
}

// ValueRef returns the reference of e's value, zero when it is in line.
func (e *KV) ValueRef() ValueRef {
	if e.Ref == nil {
		return ValueRef{}
	}
	return *e.Ref
}

func kvLess(a, b KV) bool {
	if a.Project != b.Project {
		return a.Project < b.Project
	}
	if a.Scope != b.Scope {
		return a.Scope < b.Scope
	}
	return a.Key < b.Key
}

// Idem remembers an idempotency key of a queue and the task it produced.
// For a key the caller chose (States 0), Expires is 0 while the task
// exists; once the task ends it is set to the time after which the key is
// forgotten. For a key derived from the task's content (unique by content),
// States is the set of states (bit 1<<state each) in which the task
// blocks another enqueue of the same content, and Expires is the end of the
// uniqueness window, set when the task is enqueued.
type Idem struct {
	Queue   QueueKey
	Key     string
	ID      uint64
	Expires int64
	States  uint8
}

// Blocks reports whether a task in state st holds a unique key with
// these states.
func (e *Idem) Blocks(st TaskState) bool { return e.States&(1<<st) != 0 }

func idemLess(a, b Idem) bool {
	if a.Queue != b.Queue {
		return a.Queue.less(b.Queue)
	}
	return a.Key < b.Key
}

// Totals count what happened to a queue's tasks, as the log records it.
type Totals struct {
	Enqueued     uint64 // tasks put on the queue
	Claimed      uint64 // leases handed out
	Completed    uint64 // tasks completed
	Retried      uint64 // failed attempts (a failure or an expired lease) after which the task runs again
	DeadLettered uint64 // tasks moved to the dead-letter queue
}

// QueueTotals is the durable record of one queue's Totals. Idle is 0 while
// the queue holds a task, and otherwise the time (Unix micros) it last
// stopped holding one: the record outlives the queue's indexes, so that a
// queue that drains and fills again keeps counting, and is forgotten
// IdleTotalsTTL after it went idle, or sooner when more than MaxIdleTotals
// queues are idle and it has been idle longest.
type QueueTotals struct {
	Queue QueueKey
	Totals
	Idle int64
}

// IdleTotalsTTL is how long the totals of a queue that holds no task are
// kept (24 hours, in micros). Part of the state machine: Apply forgets them
// by it.
const IdleTotalsTTL = 24 * 3600 * 1_000_000

// MaxIdleTotals is how many idle queues' totals are kept at most: past it,
// Apply forgets those idle longest first, so that the names of queues that
// held tasks once cost memory for the most recent of them only, however many
// there were (a record is about 300 bytes). Part of the state machine, as
// IdleTotalsTTL.
const MaxIdleTotals = 1024

func totalsLess(a, b QueueTotals) bool { return a.Queue.less(b.Queue) }

type idleItem struct {
	At    int64
	Queue QueueKey
}

func idleLess(a, b idleItem) bool {
	if a.At != b.At {
		return a.At < b.At
	}
	return a.Queue.less(b.Queue)
}

// Fields is a task record with every field in line, as the encoding
// spells it out: a convenient way to build a record (Task) or to read one
// whole (Task.Fields).
type Fields struct {
	ID          uint64
	Queue       *Queue
	State       TaskState
	Attempts    uint32
	MaxAttempts uint32
	Priority    int64
	NotBefore   int64
	BackoffBase int64
	BackoffMax  int64
	Owner       string
	Token       uint64
	LeaseUntil  int64
	Secret      uint64
	Created     int64
	Updated     int64
	Payload     []byte
	// PayloadRef is the reference of a payload in the value log. A record
	// holds its payload in line or by reference: when PayloadRef is set,
	// Task drops Payload.
	PayloadRef ValueRef
	Extra      *Extra
	Part       *Partition
}

// Task returns a new record with the fields of f.
func (f *Fields) Task() *Task { return f.task(nil) }

// task is Task, interning the shared fields through c when it is not nil.
func (f *Fields) task(c *sharedCache) *Task {
	t := &Task{ID: f.ID, Queue: f.Queue, State: f.State, Attempts: f.Attempts, Priority: f.Priority,
		NotBefore: f.NotBefore, Created: f.Created, pay: inLine(f.Payload), Extra: f.Extra}
	if !f.PayloadRef.IsZero() {
		t.pay = byRef(f.PayloadRef)
	}
	if v := (shared{Retry{MaxAttempts: f.MaxAttempts, BackoffBase: f.BackoffBase, BackoffMax: f.BackoffMax}, f.Part}); c != nil {
		t.sh = c.handle(v)
	} else {
		t.setShared(v)
	}
	t.SetRun(f.Owner, f.Token, f.LeaseUntil, f.Secret, f.Updated)
	return t
}

// Fields returns the fields of t.
func (t *Task) Fields() Fields {
	sh, run := t.shared(), t.run()
	r := sh.Retry
	return Fields{ID: t.ID, Queue: t.Queue, State: t.State, Attempts: t.Attempts, MaxAttempts: r.MaxAttempts,
		Priority: t.Priority, NotBefore: t.NotBefore, BackoffBase: r.BackoffBase, BackoffMax: r.BackoffMax,
		Owner: run.Owner, Token: run.Token, LeaseUntil: run.LeaseUntil, Secret: run.Secret, Created: t.Created,
		Updated: t.Updated(), Payload: t.Payload(), PayloadRef: t.PayloadRef(), Extra: t.Extra, Part: sh.part}
}
