package engine

import (
	"fmt"

	"github.com/docketdb/docket/index"
)

type opKind uint8

const (
	opSet opKind = iota + 1
	opDelete
	opIfVersion
	opIfExists
	opIfAbsent
	opEnqueue
)

// Op is one part of a transaction: a KV write, a KV assertion or an
// enqueue. Assertions are checked against the state before the transaction;
// if any fails, nothing of it is applied and the call returns ErrConflict.
type Op struct {
	kind    opKind
	key     string
	value   []byte
	version uint64
	queue   string
	task    Task
}

// Set writes value under key.
func Set(key string, value []byte) Op { return Op{kind: opSet, key: key, value: value} }

// Delete removes key (deleting an absent key is not an error).
func Delete(key string) Op { return Op{kind: opDelete, key: key} }

// IfVersion asserts that key exists with exactly version.
func IfVersion(key string, version uint64) Op {
	return Op{kind: opIfVersion, key: key, version: version}
}

// IfExists asserts that key exists.
func IfExists(key string) Op { return Op{kind: opIfExists, key: key} }

// IfAbsent asserts that key does not exist.
func IfAbsent(key string) Op { return Op{kind: opIfAbsent, key: key} }

// Enqueue enqueues t on queue as part of the transaction.
func Enqueue(queue string, t Task) Op { return Op{kind: opEnqueue, queue: queue, task: t} }

// vop is a validated Op with its bytes copied.
type vop struct {
	kind    opKind
	key     string
	value   []byte
	version uint64
	queue   string
	spec    spec
}

// checkOps validates ops and returns the permissions they need.
func checkOps(ops []Op, maxPayload int, out []vop) ([]vop, Perm, int, error) {
	if len(ops) > MaxOps {
		return nil, 0, 0, invalid("%d ops in one commit, over the limit of %d", len(ops), MaxOps)
	}
	var perms Perm
	size := 0
	for i := range ops {
		op := &ops[i]
		v := vop{kind: op.kind, key: op.key, version: op.version, queue: op.queue}
		switch op.kind {
		case opSet, opDelete, opIfVersion, opIfExists, opIfAbsent:
			if err := checkKey(fmt.Sprintf("op %d key", i), op.key); err != nil {
				return nil, 0, 0, err
			}
			size += len(op.key) + 16
			if op.kind == opSet {
				if len(op.value) > maxPayload {
					return nil, 0, 0, invalid("op %d value is %d bytes, over the limit of %d (Options.MaxPayloadBytes)", i, len(op.value), maxPayload)
				}
				v.value = clone(op.value)
				if v.value == nil {
					v.value = []byte{}
				}
				size += len(op.value)
			}
			if op.kind == opSet || op.kind == opDelete {
				perms |= PermKVWrite
			} else {
				perms |= PermKVRead
			}
		case opEnqueue:
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
	ins := ns.idx()
	for i := range ops {
		op := &ops[i]
		var k index.AssertKind
		switch op.kind {
		case opIfVersion:
			k = index.AssertKVVersion
		case opIfExists:
			k = index.AssertKVExists
		case opIfAbsent:
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
		case opSet:
			p.b.Mutations = append(p.b.Mutations, index.Mutation{Kind: index.MutSetKV,
				KV: index.KV{Namespace: ins, Key: op.key, Value: op.value}})
		case opDelete:
			p.b.Mutations = append(p.b.Mutations, index.Mutation{Kind: index.MutDeleteKV,
				KV: index.KV{Namespace: ins, Key: op.key}})
		case opEnqueue:
			enq = append(enq, p.enqueue(index.QueueKey{Namespace: ins, Name: op.queue}, &op.spec))
		}
	}
	return enq, nil
}
