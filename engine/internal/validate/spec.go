package validate

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/internal/index"
)

// Spec is a validated Task, with its byte fields copied so the caller may
// reuse them.
type Spec struct {
	Payload     []byte
	Kind        string
	Delay       int64 // micros
	At          int64 // absolute micros, 0 when unset
	Prio        int64
	MaxAttempts uint32
	Base, Max   int64
	Idem        string // the caller's idempotency key, or the one derived from the content
	Headers     map[string]string
	Size        int
	Uniq        uint8 // unique by content: the blocking states (0: not unique)
	Window      int64 // unique by content: the window, micros
	// deps are the ids the task depends on and sibs the positions of the
	// siblings it depends on, each sorted without repeats; policy is its
	// DependencyPolicy (see deps).
	Deps   []uint64
	Sibs   []int
	Policy uint8
	Part   string // dockettype.Task.Partition
}

// TxOp is a validated Op with its bytes copied.
type TxOp struct {
	Kind    dockettype.OpKind
	Key     string
	Value   []byte
	Version uint64
	Queue   string
	Spec    Spec
}

// Clone copies b (nil for an empty b): the copy the engine keeps of a
// caller's bytes.
func Clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	// make and copy, which the compiler turns into one allocation that is
	// not cleared first; append would round the capacity up to the size
	// class and clear what is past the copy.
	c := make([]byte, len(b))
	copy(c, b)
	return c
}

// Task validates t and makes its spec, with a copy of its payload unless
// borrow is set (the engine's core.borrows).
func Task(t *dockettype.Task, maxPayload int, borrow bool) (Spec, error) {
	var s Spec
	if err := JSON("payload", t.Payload, maxPayload); err != nil {
		return s, err
	}
	if t.Kind != "" {
		if err := Name("kind", t.Kind); err != nil {
			return s, err
		}
	}
	if err := Duration("delay", t.Delay, true); err != nil {
		return s, err
	}
	if !t.At.IsZero() {
		us := t.At.UnixMicro()
		if t.At.Year() < 1970 || t.At.Year() > 9999 || us <= 0 {
			return s, invalid("at %v is outside the years 1970-9999", t.At)
		}
		s.At = us
	}
	if t.MaxAttempts < 0 || t.MaxAttempts > dockettype.MaxAttemptsLimit {
		return s, invalid("max attempts %d is outside 0..%d", t.MaxAttempts, dockettype.MaxAttemptsLimit)
	}
	if err := Duration("backoff base", t.BackoffBase, true); err != nil {
		return s, err
	}
	if err := Duration("backoff max", t.BackoffMax, true); err != nil {
		return s, err
	}
	if t.BackoffBase > 0 && t.BackoffBase < time.Microsecond || t.BackoffMax > 0 && t.BackoffMax < time.Microsecond {
		// Stored in microseconds, it would become 0: the default.
		return s, invalid("backoff base %v or max %v is under a microsecond", t.BackoffBase, t.BackoffMax)
	}
	if t.BackoffMax > 0 && t.BackoffBase > t.BackoffMax {
		// A zero on either side is the default and is not compared: a base
		// over the default max is capped at it, as before.
		return s, invalid("backoff base %v is over backoff max %v", t.BackoffBase, t.BackoffMax)
	}
	if t.IdempotencyKey != "" {
		if err := Key("idempotency key", t.IdempotencyKey); err != nil {
			return s, err
		}
		if strings.HasPrefix(t.IdempotencyKey, dockettype.ReservedPrefix) {
			return s, invalid("idempotency key %.40q is under the reserved prefix %q", t.IdempotencyKey, dockettype.ReservedPrefix)
		}
	}
	if len(t.Headers) > dockettype.MaxHeaders {
		return s, invalid("%d headers, over the limit of %d", len(t.Headers), dockettype.MaxHeaders)
	}
	s.Size = len(t.Payload) + len(t.IdempotencyKey) + len(t.Kind) + 64
	if len(t.Headers) > 0 {
		s.Headers = make(map[string]string, len(t.Headers))
		for k, v := range t.Headers {
			if k == "" || len(k) > dockettype.MaxHeaderBytes || len(v) > dockettype.MaxHeaderBytes {
				return s, invalid("header %.32q: key must be 1..%d bytes and value at most %d", k, dockettype.MaxHeaderBytes, dockettype.MaxHeaderBytes)
			}
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return s, invalid("header %.32q: key and value must be valid UTF-8", k)
			}
			s.Headers[k] = v
			s.Size += len(k) + len(v)
		}
	}
	if s.Payload = t.Payload; !borrow {
		s.Payload = Clone(t.Payload)
	}
	s.Kind = t.Kind
	s.Delay = t.Delay.Microseconds()
	s.Prio = int64(t.Priority)
	s.MaxAttempts = uint32(t.MaxAttempts)
	if s.MaxAttempts == 0 {
		s.MaxAttempts = 5
	}
	s.Base, s.Max = t.BackoffBase.Microseconds(), t.BackoffMax.Microseconds()
	if s.Base == 0 {
		s.Base = int64(time.Second / time.Microsecond)
	}
	if s.Max == 0 {
		s.Max = int64(time.Minute / time.Microsecond)
	}
	s.Idem = t.IdempotencyKey
	if t.Unique != nil {
		if err := unique(t, &s); err != nil {
			return s, err
		}
		s.Size += len(s.Idem)
	}
	if err := deps(t, &s); err != nil {
		return s, err
	}
	if t.Partition != "" {
		if err := Name("partition", t.Partition); err != nil {
			return s, err
		}
		s.Part = t.Partition
		s.Size += len(s.Part)
	}
	return s, nil
}

// unique validates t's Unique and fills in the spec's derived key,
// states and window.
func unique(t *dockettype.Task, s *Spec) error {
	u := t.Unique
	if t.IdempotencyKey != "" {
		return invalid("a task is unique by content or has an idempotency key, not both")
	}
	if err := Duration("unique window", u.Window, false); err != nil {
		return err
	}
	if u.Window < time.Microsecond {
		return invalid("unique window %v is under a microsecond", u.Window)
	}
	if len(u.States) > index.NumStates-1 {
		return invalid("%d unique states: there are %d", len(u.States), index.NumStates-1)
	}
	mask := uint8(UniqueDefault)
	if len(u.States) > 0 {
		mask = 0
		for _, st := range u.States {
			if !index.TaskState(st).Valid() {
				return invalid("unique state %d", st)
			}
			if st != dockettype.Waiting { // blocks anyway (see blocks)
				mask |= 1 << st
			}
		}
		if err := UniqueStates(mask); err != nil {
			return err
		}
	}
	key, err := dockettype.UniqueKey(t.Kind, t.Payload)
	if err != nil {
		return err
	}
	s.Idem, s.Uniq, s.Window = key, mask, u.Window.Microseconds()
	return nil
}

// deps validates t's dependencies into s: ids sorted without
// repeats, sibling positions likewise (Siblings checks that they
// come earlier), and the policy.
func deps(t *dockettype.Task, s *Spec) error {
	if n := len(t.DependsOn) + len(t.DependsOnSibling); n > dockettype.MaxDependencies {
		return invalid("%d dependencies, over the limit of %d", n, dockettype.MaxDependencies)
	}
	if t.OnParentFailure > dockettype.RunOnFailure {
		return invalid("dependency policy %d", t.OnParentFailure)
	}
	s.Policy = uint8(t.OnParentFailure)
	if len(t.DependsOn) > 0 {
		s.Deps = slices.Clone(t.DependsOn)
		slices.Sort(s.Deps)
		s.Deps = slices.Compact(s.Deps)
		if s.Deps[0] == 0 {
			return invalid("depends on task 0")
		}
		s.Size += 8 * len(s.Deps)
	}
	if len(t.DependsOnSibling) > 0 {
		s.Sibs = slices.Clone(t.DependsOnSibling)
		slices.Sort(s.Sibs)
		s.Sibs = slices.Compact(s.Sibs)
		if s.Sibs[0] < 0 {
			return invalid("depends on sibling %d", s.Sibs[0])
		}
		s.Size += 8 * len(s.Sibs)
	}
	return nil
}

// Siblings checks that every task a call enqueues (specs, then the
// Enqueue ops of ops) depends only on siblings that come before it.
func Siblings(specs []Spec, ops []TxOp) error {
	pos := 0
	check := func(s *Spec) error {
		if n := len(s.Sibs); n > 0 && s.Sibs[n-1] >= pos {
			return invalid("task %d of the call depends on sibling %d, which does not come before it", pos, s.Sibs[n-1])
		}
		pos++
		return nil
	}
	for i := range specs {
		if err := check(&specs[i]); err != nil {
			return err
		}
	}
	for i := range ops {
		if ops[i].Kind == dockettype.OpEnqueue {
			if err := check(&ops[i].Spec); err != nil {
				return err
			}
		}
	}
	return nil
}

// KeySpace is the part of a namespace's keys a handle reaches: the user's
// (every key but those under dockettype.ReservedPrefix) or the system area (only
// those).
type KeySpace bool

const (
	UserSpace   KeySpace = false
	SystemSpace KeySpace = true
)

// Key validates a key of the space.
func (s KeySpace) Key(field, k string) error {
	if err := Key(field, k); err != nil {
		return err
	}
	reserved := strings.HasPrefix(k, dockettype.ReservedPrefix)
	switch {
	case s == UserSpace && reserved:
		return invalid("%s %.40q is under the reserved prefix %q (the system area, see SystemKV)", field, k, dockettype.ReservedPrefix)
	case s == SystemSpace && !reserved:
		return invalid("%s %.40q of the system area does not start with %q", field, k, dockettype.ReservedPrefix)
	}
	return nil
}

// Ops validates ops whose keys lie in space s and returns the
// permissions they need: in the system area every KV op needs dockettype.PermSystem.
func (s KeySpace) Ops(ops []dockettype.Op, maxPayload int, out []TxOp) ([]TxOp, dockettype.Perm, int, error) {
	if len(ops) > dockettype.MaxOps {
		return nil, 0, 0, invalid("%d ops in one commit, over the limit of %d", len(ops), dockettype.MaxOps)
	}
	var perms dockettype.Perm
	size := 0
	for i := range ops {
		op := &ops[i]
		v := TxOp{Kind: op.Kind(), Key: op.Key(), Version: op.Version(), Queue: op.Queue()}
		switch op.Kind() {
		case dockettype.OpSet, dockettype.OpDelete, dockettype.OpIfVersion, dockettype.OpIfExists, dockettype.OpIfAbsent:
			if err := s.Key(fmt.Sprintf("op %d key", i), op.Key()); err != nil {
				return nil, 0, 0, err
			}
			size += len(op.Key()) + 16
			if op.Kind() == dockettype.OpSet {
				if len(op.Value()) > maxPayload {
					return nil, 0, 0, invalid("op %d value is %d bytes, over the limit of %d (Options.MaxPayloadBytes)", i, len(op.Value()), maxPayload)
				}
				v.Value = Clone(op.Value())
				if v.Value == nil {
					v.Value = []byte{}
				}
				size += len(op.Value())
			}
			switch {
			case s == SystemSpace:
				perms |= dockettype.PermSystem
			case op.Kind() == dockettype.OpSet || op.Kind() == dockettype.OpDelete:
				perms |= dockettype.PermKVWrite
			default:
				perms |= dockettype.PermKVRead
			}
		case dockettype.OpEnqueue:
			if err := Name(fmt.Sprintf("op %d queue", i), op.Queue()); err != nil {
				return nil, 0, 0, err
			}
			t := op.Task()
			s, err := Task(&t, maxPayload, false)
			if err != nil {
				return nil, 0, 0, fmt.Errorf("op %d: %w", i, err)
			}
			v.Spec = s
			size += s.Size
			perms |= dockettype.PermEnqueue
		default:
			return nil, 0, 0, invalid("op %d is the zero Op", i)
		}
		out = append(out, v)
	}
	if size > dockettype.MaxCommitBytes {
		return nil, 0, 0, invalid("commit of about %d bytes, over the limit of %d", size, dockettype.MaxCommitBytes)
	}
	return out, perms, size, nil
}
