package index

// Batch is one atomic commit: assertions checked against the state before it,
// then mutations applied in order. It is the unit of the log.
type Batch struct {
	Seq uint64
	// Now is the time the plan used, Unix micros: never earlier than the Now
	// of the batch before. Apply and replay read it instead of a clock.
	Now int64
	// Seed is entropy the planner drew for this batch (0 when it needed
	// none); lease secrets are derived from it, so the batch carries
	// everything its plan used.
	Seed       uint64
	Assertions []Assertion
	Mutations  []Mutation
}

// Reset empties b for reuse, keeping its capacity.
func (b *Batch) Reset() {
	for i := range b.Mutations {
		b.Mutations[i] = Mutation{}
	}
	for i := range b.Assertions {
		b.Assertions[i] = Assertion{}
	}
	*b = Batch{Assertions: b.Assertions[:0], Mutations: b.Mutations[:0]}
}

// AssertKind says what an Assertion checks. Part of the on-disk format.
type AssertKind uint8

// Assertion kinds.
const (
	AssertKVVersion AssertKind = 1 // key exists with exactly Version
	AssertKVExists  AssertKind = 2 // key exists
	AssertKVAbsent  AssertKind = 3 // key does not exist
	AssertToken     AssertKind = 4 // task ID is in flight with fencing token Token
)

// Assertion is a condition on the state before a batch; if any fails the
// whole batch is refused.
type Assertion struct {
	Kind    AssertKind
	NS      Namespace
	Key     string
	Version uint64
	ID      uint64
	Token   uint64
}

// MutKind says what a Mutation does. Part of the on-disk format.
type MutKind uint8

// Mutation kinds.
const (
	MutPutTask      MutKind = 1 // insert a whole task record (new task)
	MutUpdateTask   MutKind = 2 // change the small mutable fields of a task
	MutDeleteTask   MutKind = 3 // remove a task
	MutSetKV        MutKind = 4
	MutDeleteKV     MutKind = 5
	MutPutIdem      MutKind = 6
	MutDeleteIdem   MutKind = 7
	MutPutConf      MutKind = 8  // set a queue's settings record
	MutDeleteConf   MutKind = 9  // delete it (every setting back to its default); uses Conf.Queue
	MutPutDep       MutKind = 10 // add a dependency (Dep); the child is waiting
	MutDeleteDep    MutKind = 11 // remove a dependency
	MutPutBucket    MutKind = 12 // set a partition's token bucket (Bucket)
	MutDeleteBucket MutKind = 13 // delete it (the bucket is full); uses Bucket.Queue and Key
	// MutMoveValue points a value at its new place in the value log
	// (Move), where it still is where it was.
	MutMoveValue MutKind = 14
)

// Mutation is one physical change. Which fields matter depends on Kind.
type Mutation struct {
	Kind   MutKind
	Task   *Task      // MutPutTask
	Update TaskUpdate // MutUpdateTask; MutDeleteTask uses Update.ID
	KV     KV         // MutSetKV, MutDeleteKV (Version is ignored: the batch Seq is used)
	Idem   Idem       // MutPutIdem, MutDeleteIdem
	Conf   QueueConf  // MutPutConf, MutDeleteConf
	Dep    Dep        // MutPutDep, MutDeleteDep
	Bucket PartBucket // MutPutBucket, MutDeleteBucket
	Move   ValueMove  // MutMoveValue
}

// Update flags: which optional fields of a TaskUpdate are present, and
// what a transition was.
const (
	UpdProgress  = 1 << iota // replace Progress
	UpdResult                // replace Result
	UpdLastError             // replace LastError
	// UpdAddError appends {ErrAttempt, ErrAt, LastError} to the task's
	// attempt history (and counts a retry in the queue's totals unless the
	// task goes dead).
	UpdAddError
	UpdFollowUps // replace FollowUps
	// UpdCompleted, on a MutDeleteTask, says the task was completed rather
	// than cancelled or forgotten (the queue's totals count it).
	UpdCompleted
)

// TaskUpdate is a state transition of an existing task. It carries only the
// fields a transition changes; the payload is never re-logged.
type TaskUpdate struct {
	ID         uint64
	State      TaskState
	Attempts   uint32
	NotBefore  int64
	Owner      string
	Token      uint64
	LeaseUntil int64
	Updated    int64
	Secret     uint64
	Flags      uint8
	Progress   []byte
	Result     []byte
	LastError  string
	// ErrAttempt and ErrAt are the attempt and the time of the failure
	// UpdAddError records.
	ErrAttempt uint32
	ErrAt      int64
	FollowUps  []uint64
	// ProgressRef and ResultRef, with UpdProgress or UpdResult, replace
	// the value with a reference to it in the value log instead of bytes
	// (Progress or Result then empty: a value is one or the other).
	ProgressRef ValueRef
	ResultRef   ValueRef
}

// UpdateOf returns an update that leaves t as it is; callers change fields
// from there.
func UpdateOf(t *Task) TaskUpdate {
	return TaskUpdate{
		ID: t.ID, State: t.State, Attempts: t.Attempts, NotBefore: t.NotBefore,
		Owner: t.Owner(), Token: t.Token(), LeaseUntil: t.LeaseUntil(), Updated: t.Updated(), Secret: t.Secret(),
	}
}

// Outcome is what applying one batch came to. A batch whose assertions no
// longer hold is refused: that is a result, not damage; it consumes its Seq
// and changes nothing else.
type Outcome struct {
	Seq     uint64
	Refused string // why the batch was refused; "" when it applied
}
