package engine

import (
	"fmt"
	"strings"

	"github.com/docketdb/docket/engine/internal/validate"
)

// OpKind says what an Op does.// Op is one part of a transaction: a KV write, a KV assertion or an
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

// keySpace is the part of a namespace's keys a handle reaches: the user's
// (every key but those under ReservedPrefix) or the system area (only
// those).
type keySpace bool

const (
	userSpace   keySpace = false
	systemSpace keySpace = true
)

// checkKey validates a key of the space.
func (s keySpace) checkKey(field, k string) error {
	if err := checkKey(field, k); err != nil {
		return err
	}
	reserved := strings.HasPrefix(k, ReservedPrefix)
	switch {
	case s == userSpace && reserved:
		return invalid("%s %.40q is under the reserved prefix %q (the system area, see SystemKV)", field, k, ReservedPrefix)
	case s == systemSpace && !reserved:
		return invalid("%s %.40q of the system area does not start with %q", field, k, ReservedPrefix)
	}
	return nil
}

// checkOps validates ops of the user's key space and returns the
// permissions they need.
func checkOps(ops []Op, maxPayload int, out []vop) ([]vop, Perm, int, error) {
	return userSpace.checkOps(ops, maxPayload, out)
}

// checkOps validates ops whose keys lie in space s and returns the
// permissions they need: in the system area every KV op needs PermSystem.
func (s keySpace) checkOps(ops []Op, maxPayload int, out []vop) ([]vop, Perm, int, error) {
	if len(ops) > MaxOps {
		return nil, 0, 0, invalid("%d ops in one commit, over the limit of %d", len(ops), MaxOps)
	}
	var perms Perm
	size := 0
	for i := range ops {
		op := &ops[i]
		v := vop{Kind: op.kind, Key: op.key, Version: op.version, Queue: op.queue}
		switch op.kind {
		case OpSet, OpDelete, OpIfVersion, OpIfExists, OpIfAbsent:
			if err := s.checkKey(fmt.Sprintf("op %d key", i), op.key); err != nil {
				return nil, 0, 0, err
			}
			size += len(op.key) + 16
			if op.kind == OpSet {
				if len(op.value) > maxPayload {
					return nil, 0, 0, invalid("op %d value is %d bytes, over the limit of %d (Options.MaxPayloadBytes)", i, len(op.value), maxPayload)
				}
				v.Value = clone(op.value)
				if v.Value == nil {
					v.Value = []byte{}
				}
				size += len(op.value)
			}
			switch {
			case s == systemSpace:
				perms |= PermSystem
			case op.kind == OpSet || op.kind == OpDelete:
				perms |= PermKVWrite
			default:
				perms |= PermKVRead
			}
		case OpEnqueue:
			if err := validate.Name(fmt.Sprintf("op %d queue", i), op.queue); err != nil {
				return nil, 0, 0, err
			}
			s, err := checkTask(&op.task, maxPayload, false)
			if err != nil {
				return nil, 0, 0, fmt.Errorf("op %d: %w", i, err)
			}
			v.Spec = s
			size += s.Size
			perms |= PermEnqueue
		default:
			return nil, 0, 0, invalid("op %d is the zero Op", i)
		}
		out = append(out, v)
	}
	if size > MaxCommitBytes {
		return nil, 0, 0, invalid("commit of about %d bytes, over the limit of %d", size, MaxCommitBytes)
	}
	return out, perms, size, nil
}
