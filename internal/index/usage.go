package index

import (
	"fmt"
	"maps"
	"unsafe"
)

// Usage is what a part of the state costs: its task records, and the
// bytes the state holds for them, their idempotency keys, the namespace's
// KV entries and (in the whole store's usage only) dependencies.
//
// Bytes is an estimate of the heap the records take, computed from the
// records alone (their fields' lengths and fixed costs per record and per
// index entry), so that it is the same on every node and after every
// replay: it is part of the state machine, and a change to it changes what
// a budget admits. It counts each payload, key and value at its length
// and each record at about what its struct and index entries take, which
// W9 of the benchmark measures (about 150 bytes a pending task beyond its
// payload).
type Usage struct {
	Tasks int64
	Bytes int64
}

// Costs of a record beyond its variable fields, in bytes: its struct and
// its entries in the trees that index it.
const (
	TaskCost    = 150 // Task, its B-tree entries (by id, by state) and a share of the nodes
	RunCost     = int64(unsafe.Sizeof(Run{})) + 16
	ExtraCost   = int64(unsafe.Sizeof(Extra{})) + 16
	HeaderCost  = 48 // a map entry with its two string headers
	errorCost   = int64(unsafe.Sizeof(AttemptError{}))
	KVCost      = int64(unsafe.Sizeof(KV{})) + 32
	IdemCost    = int64(unsafe.Sizeof(Idem{})) + 32
	idemExpCost = int64(unsafe.Sizeof(idemExpItem{})) + 8
	DepCost     = 2*int64(unsafe.Sizeof(Dep{})) + 32 // by parent, by child, the count of waits
)

// TaskBytes is what a task record costs in Usage.Bytes. The lease
// record (Run) is counted from the start, set or not: a task's first
// claim adds only its owner's bytes, so that claiming what a budget
// admitted stays within it.
func TaskBytes(t *Task) int64 {
	n := TaskCost + RunCost + int64(len(t.Payload()))
	if r := t.Run; r != nil {
		n += int64(len(r.Owner))
	}
	if e := t.Extra; e != nil {
		n += ExtraCost + int64(len(e.Kind)+len(e.IdemKey)+len(e.LastError)+len(e.Progress)+len(e.Result)+8*len(e.FollowUps))
		for k, v := range e.Headers {
			n += HeaderCost + int64(len(k)+len(v))
		}
		for i := range e.Errors {
			n += errorCost + int64(len(e.Errors[i].Error))
		}
		if e.Refs != nil {
			n += RefsCost // a value by reference costs its reference, whatever its length
		}
	}
	return n
}

// KVBytes is what a KV entry costs in Usage.Bytes.
func KVBytes(e *KV) int64 {
	n := KVCost + int64(len(e.Project)+len(e.Scope)+len(e.Key)+len(e.Value))
	if e.Ref != nil {
		n += KVRefCost
	}
	return n
}

// IdemBytes is what an idempotency entry costs in Usage.Bytes.
func IdemBytes(e *Idem) int64 {
	n := IdemCost + int64(len(e.Key))
	if e.Expires != 0 {
		n += idemExpCost
	}
	return n
}

// Usage returns what the whole state costs.
func (s *Store) Usage() Usage { return s.usage }

// NamespaceUsage returns what the tasks, idempotency keys and KV entries
// of one namespace cost.
func (s *Store) NamespaceUsage(ns Namespace) Usage {
	if u := s.nsUsage[ns]; u != nil {
		return *u
	}
	return Usage{}
}

// NamespacesUsage calls fn for every namespace that holds anything, in no
// particular order.
func (s *Store) NamespacesUsage(fn func(Namespace, Usage) bool) {
	for ns, u := range s.nsUsage {
		if !fn(ns, *u) {
			return
		}
	}
}

// use adds tasks and bytes to ns's usage and the store's.
func (s *Store) use(ns *Namespace, tasks, bytes int64) {
	s.usage.Tasks += tasks
	s.usage.Bytes += bytes
	u := s.lastUse
	if u == nil || s.lastUseNS != *ns {
		if s.nsUsage == nil {
			s.nsUsage = map[Namespace]*Usage{}
		}
		if u = s.nsUsage[*ns]; u == nil {
			u = &Usage{}
			s.nsUsage[*ns] = u
		}
		s.lastUse, s.lastUseNS = u, *ns
	}
	u.Tasks += tasks
	u.Bytes += bytes
	if u.Tasks == 0 && u.Bytes == 0 {
		delete(s.nsUsage, *ns)
		s.lastUse = nil
	}
}

func (s *Store) useTask(t *Task, sign int64) {
	s.use(&t.Queue.Key.Namespace, sign, sign*TaskBytes(t))
	s.useTaskRefs(t, sign)
}

func (s *Store) useKV(e *KV, sign int64) {
	s.use(&e.Namespace, 0, sign*KVBytes(e))
	if e.Ref != nil {
		s.useRef(*e.Ref, sign)
	}
}

func (s *Store) useIdem(e *Idem, sign int64) { s.use(&e.Queue.Namespace, 0, sign*IdemBytes(e)) }

// useDep counts a dependency in the store's usage only: its namespace is
// its tasks', which a batch may remove before it.
func (s *Store) useDep(sign int64) { s.usage.Bytes += sign * DepCost }

// verifyUsage recomputes the usage from the records and compares.
func (s *Store) verifyUsage() error {
	var total Usage
	ns := map[Namespace]*Usage{}
	live := map[uint32]int64{}
	ref := func(r ValueRef) {
		if !r.IsZero() {
			live[r.File] += int64(r.Len)
		}
	}
	add := func(n Namespace, tasks, bytes int64) {
		u := ns[n]
		if u == nil {
			u = &Usage{}
			ns[n] = u
		}
		u.Tasks += tasks
		u.Bytes += bytes
		total.Tasks += tasks
		total.Bytes += bytes
	}
	var bad error
	s.tasks.Scan(func(t *Task) bool {
		add(t.Queue.Key.Namespace, 1, TaskBytes(t))
		if t.hasRefs() {
			x := t.Ex()
			ref(t.PayloadRef())
			ref(x.Refs.get(ValueResult))
			ref(x.Refs.get(ValueProgress))
			if err := checkValues(&Mutation{Kind: MutPutTask, Task: t}); err != nil && bad == nil {
				bad = err
			}
		}
		return true
	})
	s.kv.Scan(func(e KV) bool {
		add(e.Namespace, 0, KVBytes(&e))
		ref(e.ValueRef())
		if err := checkValues(&Mutation{Kind: MutSetKV, KV: e}); err != nil && bad == nil {
			bad = err
		}
		return true
	})
	if bad != nil {
		return fmt.Errorf("index: verify: %v", bad)
	}
	s.idem.Scan(func(e Idem) bool {
		add(e.Queue.Namespace, 0, IdemBytes(&e))
		return true
	})
	total.Bytes += int64(s.deps.byParent.Len()) * DepCost
	if total != s.usage {
		return fmt.Errorf("index: verify: usage %+v, the records make %+v", s.usage, total)
	}
	for n, u := range ns {
		if u.Tasks == 0 && u.Bytes == 0 {
			continue
		}
		if got := s.NamespaceUsage(n); got != *u {
			return fmt.Errorf("index: verify: namespace %v uses %+v, its records make %+v", n, got, *u)
		}
	}
	for n := range s.nsUsage {
		if ns[n] == nil {
			return fmt.Errorf("index: verify: namespace %v has a usage and no records", n)
		}
	}
	if !maps.Equal(live, s.live) && (len(live) != 0 || len(s.live) != 0) {
		return fmt.Errorf("index: verify: live bytes per value log file %v, the references make %v", s.live, live)
	}
	return nil
}
