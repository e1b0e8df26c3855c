package dockettype

// OpKind says what an Op does.
type OpKind uint8

// Op kinds.
const (
	OpSet OpKind = iota + 1
	OpDelete
	OpIfVersion
	OpIfExists
	OpIfAbsent
	OpEnqueue
)

// Op is one part of a transaction: a KV write, a KV assertion or an
// enqueue. Assertions are checked against the state before the transaction;
// if any fails, nothing of it is applied and the call returns ErrConflict.
type Op struct {
	kind    OpKind
	key     string
	value   []byte
	version uint64
	queue   string
	task    Task
}

// Kind says what the op does; the zero Op has kind 0 and is refused.
func (o Op) Kind() OpKind { return o.kind }

// Key is the KV key of a Set, Delete or assertion.
func (o Op) Key() string { return o.key }

// Value is the value of a Set.
func (o Op) Value() []byte { return o.value }

// Version is the version an IfVersion asserts.
func (o Op) Version() uint64 { return o.version }

// Queue is the queue of an Enqueue.
func (o Op) Queue() string { return o.queue }

// Task is the task of an Enqueue.
func (o Op) Task() Task { return o.task }

// Set writes value under key.
func Set(key string, value []byte) Op { return Op{kind: OpSet, key: key, value: value} }

// Delete removes key (deleting an absent key is not an error).
func Delete(key string) Op { return Op{kind: OpDelete, key: key} }

// IfVersion asserts that key exists with exactly version.
func IfVersion(key string, version uint64) Op {
	return Op{kind: OpIfVersion, key: key, version: version}
}

// IfExists asserts that key exists.
func IfExists(key string) Op { return Op{kind: OpIfExists, key: key} }

// IfAbsent asserts that key does not exist.
func IfAbsent(key string) Op { return Op{kind: OpIfAbsent, key: key} }

// Enqueue enqueues t on queue as part of the transaction.
func Enqueue(queue string, t Task) Op { return Op{kind: OpEnqueue, queue: queue, task: t} }
