package engine

import (
	"fmt"
	"strings"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/engine/internal/validate"
)

// Op is one part of a transaction (see dockettype.Op).
type Op = dockettype.Op

// Set writes value under key.
func Set(key string, value []byte) Op { return dockettype.Set(key, value) }

// Delete removes key (deleting an absent key is not an error).
func Delete(key string) Op { return dockettype.Delete(key) }

// IfVersion asserts that key exists with exactly version.
func IfVersion(key string, version uint64) Op { return dockettype.IfVersion(key, version) }

// IfExists asserts that key exists.
func IfExists(key string) Op { return dockettype.IfExists(key) }

// IfAbsent asserts that key does not exist.
func IfAbsent(key string) Op { return dockettype.IfAbsent(key) }

// Enqueue enqueues t on queue as part of the transaction.
func Enqueue(queue string, t Task) Op { return dockettype.Enqueue(queue, t) }

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
		v := vop{Kind: op.Kind(), Key: op.Key(), Version: op.Version(), Queue: op.Queue()}
		switch op.Kind() {
		case OpSet, OpDelete, OpIfVersion, OpIfExists, OpIfAbsent:
			if err := s.checkKey(fmt.Sprintf("op %d key", i), op.Key()); err != nil {
				return nil, 0, 0, err
			}
			size += len(op.Key()) + 16
			if op.Kind() == OpSet {
				if len(op.Value()) > maxPayload {
					return nil, 0, 0, invalid("op %d value is %d bytes, over the limit of %d (Options.MaxPayloadBytes)", i, len(op.Value()), maxPayload)
				}
				v.Value = clone(op.Value())
				if v.Value == nil {
					v.Value = []byte{}
				}
				size += len(op.Value())
			}
			switch {
			case s == systemSpace:
				perms |= PermSystem
			case op.Kind() == OpSet || op.Kind() == OpDelete:
				perms |= PermKVWrite
			default:
				perms |= PermKVRead
			}
		case OpEnqueue:
			if err := validate.Name(fmt.Sprintf("op %d queue", i), op.Queue()); err != nil {
				return nil, 0, 0, err
			}
			t := op.Task()
			s, err := checkTask(&t, maxPayload, false)
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
