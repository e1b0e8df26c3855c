package index

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
type Task struct {
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
	// Secret is the lease secret of an in-flight task: a random value only
	// the holder of the lease knows, so a lease cannot be forged from its
	// (sequential) id and token. 0 when not in flight.
	Secret  uint64
	Created int64
	Updated int64
	Payload []byte
	// Extra holds the fields most pending tasks never use, so that a waiting
	// task costs one pointer for them instead of eight words.
	Extra *Extra
	// Part is the task's partition of its queue (partition.go), nil for
	// the default one.
	Part *Partition
}

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

func (e *Extra) empty() bool {
	return e == nil || (e.Kind == "" && e.IdemKey == "" && e.LastError == "" &&
		len(e.Progress) == 0 && len(e.Result) == 0 && len(e.Headers) == 0 &&
		len(e.Errors) == 0 && e.Parent == 0 && len(e.FollowUps) == 0 && e.DepPolicy == 0)
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
// last wrote it, so it increases on every write and is never reused.
type KV struct {
	Namespace
	Key     string
	Value   []byte
	Version uint64
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
// IdleTotalsTTL after it went idle.
type QueueTotals struct {
	Queue QueueKey
	Totals
	Idle int64
}

// IdleTotalsTTL is how long the totals of a queue that holds no task are
// kept (24 hours, in micros). Part of the state machine: Apply forgets them
// by it.
const IdleTotalsTTL = 24 * 3600 * 1_000_000

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
