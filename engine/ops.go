package engine

import (
	"fmt"
	"strings"

	"github.com/docketdb/docket/internal/index"
)

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

// vop is a validated Op with its bytes copied.
type vop struct {
	kind    OpKind
	key     string
	value   []byte
	version uint64
	queue   string
	spec    spec
}

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
		v := vop{kind: op.kind, key: op.key, version: op.version, queue: op.queue}
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
				v.value = clone(op.value)
				if v.value == nil {
					v.value = []byte{}
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
			if err := checkName(fmt.Sprintf("op %d queue", i), op.queue); err != nil {
				return nil, 0, 0, err
			}
			s, err := checkTask(&op.task, maxPayload)
			if err != nil {
				return nil, 0, 0, fmt.Errorf("op %d: %w", i, err)
			}
			v.spec = s
			size += s.size
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

// ops plans validated ops in namespace ns: assertions first, against the
// state before the commit, then writes and enqueues in order.
func (p *planner) ops(ns Namespace, ops []vop, enq []Enqueued) ([]Enqueued, error) {
	ins := idxNS(ns)
	for i := range ops {
		op := &ops[i]
		var k index.AssertKind
		switch op.kind {
		case OpIfVersion:
			k = index.AssertKVVersion
		case OpIfExists:
			k = index.AssertKVExists
		case OpIfAbsent:
			k = index.AssertKVAbsent
		default:
			continue
		}
		e, ok := p.c.store.KV(ins, op.key)
		switch {
		case k == index.AssertKVExists && !ok:
			return nil, fmt.Errorf("%w: key %q does not exist", ErrConflict, op.key)
		case k == index.AssertKVAbsent && ok:
			return nil, fmt.Errorf("%w: key %q exists", ErrConflict, op.key)
		case k == index.AssertKVVersion && !ok:
			return nil, fmt.Errorf("%w: key %q does not exist (want version %d)", ErrConflict, op.key, op.version)
		case k == index.AssertKVVersion && e.Version != op.version:
			return nil, fmt.Errorf("%w: key %q has version %d, not %d", ErrConflict, op.key, e.Version, op.version)
		}
		p.b.Assertions = append(p.b.Assertions, index.Assertion{Kind: k, NS: ins, Key: op.key, Version: op.version})
	}
	for i := range ops {
		op := &ops[i]
		switch op.kind {
		case OpSet:
			p.b.Mutations = append(p.b.Mutations, index.Mutation{Kind: index.MutSetKV,
				KV: index.KV{Namespace: ins, Key: op.key, Value: op.value}})
		case OpDelete:
			p.b.Mutations = append(p.b.Mutations, index.Mutation{Kind: index.MutDeleteKV,
				KV: index.KV{Namespace: ins, Key: op.key}})
		case OpEnqueue:
			e, err := p.enqueue(index.QueueKey{Namespace: ins, Name: op.queue}, &op.spec)
			if err != nil {
				return nil, err
			}
			enq = append(enq, e)
		}
	}
	return enq, nil
}
