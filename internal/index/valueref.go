package index

import (
	"fmt"
	"math"
	"slices"
	"unsafe"
)

// ValueRef locates a value kept on disk in the value log instead of in
// memory: the log file's number, the value's offset in it and its length.
// It has the fields of the value log's reference, in the same order, so
// that one converts to the other. The zero ValueRef is no reference; a
// reference is never of an empty value (an empty value is nil in line), so
// a set one has Len > 0.
//
// A record holds each of its values either in line (bytes) or by
// reference, never both: Apply refuses a batch that sets both for one
// value.
type ValueRef struct {
	File uint32
	Off  int64
	Len  uint32
}

// IsZero reports whether r is no reference.
func (r ValueRef) IsZero() bool { return r == ValueRef{} }

// valid reports whether r is no reference or a well-formed one.
func (r ValueRef) valid() bool { return r.IsZero() || r.Len > 0 && r.Off >= 0 }

// ValueKind says which value of a record a reference is. Part of the
// on-disk format (MutMoveValue).
type ValueKind uint8

// Value kinds.
const (
	ValuePayload  ValueKind = 1 // a task's payload
	ValueResult   ValueKind = 2 // a task's result (Extra)
	ValueProgress ValueKind = 3 // a task's progress (Extra)
	ValueKV       ValueKind = 4 // a KV entry's value
)

func (k ValueKind) valid() bool { return k >= ValuePayload && k <= ValueKV }

func (k ValueKind) String() string {
	switch k {
	case ValuePayload:
		return "payload"
	case ValueResult:
		return "result"
	case ValueProgress:
		return "progress"
	case ValueKV:
		return "kv value"
	}
	return fmt.Sprintf("value kind %d", uint8(k))
}

// TaskRefs are the references of a task's result and progress kept in the
// value log (zero for a value in line). They hang off Extra, so that a
// task whose values are all in line, the common record, pays nothing for
// them: Task stays in its size class and Extra in its own. (A payload's
// reference is in the Task, in the payload's place.) Like Extra they are
// immutable once stored.
type TaskRefs struct {
	Result   ValueRef
	Progress ValueRef
}

func (r *TaskRefs) empty() bool { return r == nil || *r == TaskRefs{} }

func (r *TaskRefs) get(k ValueKind) ValueRef {
	if r == nil {
		return ValueRef{}
	}
	switch k {
	case ValueResult:
		return r.Result
	case ValueProgress:
		return r.Progress
	}
	return ValueRef{}
}

func (r *TaskRefs) set(k ValueKind, v ValueRef) {
	switch k {
	case ValueResult:
		r.Result = v
	case ValueProgress:
		r.Progress = v
	}
}

// ref is the reference of the task's value of kind k, zero when it is in
// line.
func (t *Task) ref(k ValueKind) ValueRef {
	if k == ValuePayload {
		return t.pay.ref()
	}
	return t.Ex().Refs.get(k)
}

// hasRefs reports whether any value of t is by reference.
func (t *Task) hasRefs() bool {
	return t.pay.isRef() || t.Extra != nil && t.Extra.Refs != nil
}

// ResultRef is the reference of the task's result, zero when it is in line.
func (e *Extra) ResultRef() ValueRef { return e.Refs.get(ValueResult) }

// ProgressRef is the reference of the task's progress, zero when it is in
// line.
func (e *Extra) ProgressRef() ValueRef { return e.Refs.get(ValueProgress) }

// ValueMove is a MutMoveValue: the value of kind Kind of a record, task ID
// or the KV entry (NS, Key) for ValueKV, moved from Old to New (value log
// compaction). Apply installs New only where the record's reference is
// still Old: a task that ended, or a value rewritten since, is left alone.
type ValueMove struct {
	Kind ValueKind
	ID   uint64
	NS   Namespace
	Key  string
	Old  ValueRef
	New  ValueRef
}

// FileBytes is the live bytes a Store references in one value log file.
type FileBytes struct {
	File  uint32
	Bytes int64
}

// LiveBytes returns, per value log file the state references, the sum of
// the lengths of its current references into it, by file number: what of
// the file is live (the rest is garbage compaction may reclaim).
func (s *Store) LiveBytes() []FileBytes {
	out := make([]FileBytes, 0, len(s.live))
	for f, n := range s.live {
		out = append(out, FileBytes{f, n})
	}
	slices.SortFunc(out, func(a, b FileBytes) int {
		switch {
		case a.File < b.File:
			return -1
		case a.File > b.File:
			return 1
		}
		return 0
	})
	return out
}

// FileLiveBytes is the live bytes the state references in one file.
func (s *Store) FileLiveBytes(file uint32) int64 { return s.live[file] }

// useRef adds sign times r's length to its file's live bytes.
func (s *Store) useRef(r ValueRef, sign int64) {
	if r.IsZero() {
		return
	}
	if s.live == nil {
		s.live = map[uint32]int64{}
	}
	n := s.live[r.File] + sign*int64(r.Len)
	if n == 0 {
		delete(s.live, r.File)
	} else {
		s.live[r.File] = n
	}
}

func (s *Store) useTaskRefs(t *Task, sign int64) {
	s.useRef(t.pay.ref(), sign)
	if t.Extra == nil || t.Extra.Refs == nil {
		return
	}
	r := t.Extra.Refs
	s.useRef(r.Result, sign)
	s.useRef(r.Progress, sign)
}

// RefsCost is what a task's references of its result and progress cost in
// Usage.Bytes when it has any: the TaskRefs record, whatever the lengths
// of the values. A payload's reference costs nothing beyond the task: it
// takes the place of the payload's slice.
const RefsCost = int64(unsafe.Sizeof(TaskRefs{})) + 8

// KVRefCost is what a KV entry's reference costs in Usage.Bytes.
const KVRefCost = int64(unsafe.Sizeof(ValueRef{})) + 8

// checkValues refuses a mutation that sets a value both in line and by
// reference, or a malformed reference, before anything is applied.
func checkValues(m *Mutation) error {
	// The common case first, on every commit's path: no reference at all.
	switch m.Kind {
	case MutPutTask:
		if m.Task == nil || !m.Task.hasRefs() {
			return nil
		}
	case MutUpdateTask:
		if m.Update.ProgressRef.IsZero() && m.Update.ResultRef.IsZero() {
			return nil
		}
	case MutSetKV, MutMoveValue:
	default:
		return nil
	}
	return checkRefs(m)
}

// checkRefs is checkValues of a mutation with a reference.
func checkRefs(m *Mutation) error {
	both := func(what string, id uint64, b []byte, r ValueRef) error {
		if !r.valid() {
			return fmt.Errorf("%w: task %d: %s reference %+v is malformed", ErrCorrupt, id, what, r)
		}
		if len(b) > 0 && !r.IsZero() {
			return fmt.Errorf("%w: task %d: %s both in line (%d bytes) and by reference", ErrCorrupt, id, what, len(b))
		}
		return nil
	}
	switch m.Kind {
	case MutPutTask:
		t := m.Task
		x := t.Ex()
		return firstErr(both("payload", t.ID, t.Payload(), t.PayloadRef()),
			both("result", t.ID, x.Result, x.Refs.get(ValueResult)),
			both("progress", t.ID, x.Progress, x.Refs.get(ValueProgress)))
	case MutUpdateTask:
		u := &m.Update
		err := firstErr(both("progress", u.ID, u.Progress, u.ProgressRef), both("result", u.ID, u.Result, u.ResultRef))
		if err == nil && (u.Flags&UpdProgress == 0 && !u.ProgressRef.IsZero() || u.Flags&UpdResult == 0 && !u.ResultRef.IsZero()) {
			err = fmt.Errorf("%w: task %d: a reference in an update that does not replace its value", ErrCorrupt, u.ID)
		}
		return err
	case MutSetKV:
		if r := m.KV.Ref; r != nil {
			switch {
			case !r.valid() || r.IsZero():
				return fmt.Errorf("%w: key %q: value reference %+v is malformed", ErrCorrupt, m.KV.Key, *r)
			case len(m.KV.Value) > 0:
				return fmt.Errorf("%w: key %q: value both in line (%d bytes) and by reference", ErrCorrupt, m.KV.Key, len(m.KV.Value))
			}
		}
	case MutMoveValue:
		v := &m.Move
		if !v.Kind.valid() || v.Old.IsZero() || v.New.IsZero() || !v.Old.valid() || !v.New.valid() {
			return fmt.Errorf("%w: value move %+v", ErrCorrupt, *v)
		}
	}
	return nil
}

// WithRef returns t with its value of kind k referenced by r, as a new
// record (t is not changed). The value's bytes in line go: a value is in
// line or by reference.
func (t *Task) WithRef(k ValueKind, r ValueRef) *Task {
	nt := *t
	if k == ValuePayload {
		if !r.IsZero() || nt.pay.isRef() {
			nt.pay = byRef(r)
		}
		return &nt
	}
	ex := *t.Ex()
	refs := TaskRefs{}
	if ex.Refs != nil {
		refs = *ex.Refs
	}
	refs.set(k, r)
	ex.Refs = nil
	if !refs.empty() {
		ex.Refs = &refs
	}
	if !r.IsZero() {
		switch k {
		case ValueResult:
			ex.Result = nil
		case ValueProgress:
			ex.Progress = nil
		}
	}
	nt.Extra = &ex
	if ex.empty() {
		nt.Extra = nil
	}
	return &nt
}

// moveValue applies a MutMoveValue.
func (s *Store) moveValue(v *ValueMove) {
	if v.Kind == ValueKV {
		e, ok := s.kv.Get(KV{Namespace: v.NS, Key: v.Key})
		if !ok || e.Ref == nil || *e.Ref != v.Old {
			return
		}
		s.useKV(&e, -1)
		r := v.New
		e.Ref = &r
		s.kv.Set(e)
		s.useKV(&e, 1)
		return
	}
	old, ok := s.Task(v.ID)
	if !ok || old.ref(v.Kind) != v.Old {
		return
	}
	nt := old.WithRef(v.Kind, v.New)
	n := len(s.affected)
	s.unindex(old)
	s.tasks.SetHint(nt, &s.taskHint)
	s.index(nt)
	// The task is as claimable as it was: no claimer has anything new.
	s.affected = s.affected[:n]
}

// decodeRef checks the fields of a decoded reference.
func decodeRef(file, off, n uint64) (ValueRef, error) {
	if file > math.MaxUint32 || off > math.MaxInt64 || n == 0 || n > math.MaxUint32 {
		return ValueRef{}, fmt.Errorf("value reference %d/%d/%d", file, off, n)
	}
	return ValueRef{File: uint32(file), Off: int64(off), Len: uint32(n)}, nil
}
