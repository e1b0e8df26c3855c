package index

import (
	"fmt"
	"slices"

	"github.com/tidwall/btree"
)

// Partitions: a task may name a partition of its queue (a customer, a
// tenant), and claims take turns between the partitions that have work,
// so that one partition holding a million ready tasks cannot starve one
// holding ten (engine planner, claimParts).
//
// A queue none of whose tasks names a partition keeps no partition state
// at all: its claims read the queue's own indexes as they always did. A
// task that names one switches the queue to partitioned (Queue.parts set);
// while the queue holds such a task, every task of the queue is also
// indexed in its partition, the tasks that name none in the default
// partition (key ""), and when the last one goes the queue switches back.
// Whether a queue is partitioned is so a function of its records alone,
// the same after a restore as before. At the switch every task of the
// queue is in the default partition, so its indexes start as copies of the
// queue's (copy-on-write for the B-trees, a copy of the slices of the due
// trees): the switch costs no walk over the tasks.
//
// All of it is derived from the task records (Task.Part), never logged:
// replay and a restore rebuild it.

// Partition is the state of one partition of a queue: its tasks by state,
// indexed as the queue's are, so that a claim can ask a partition for its
// claimable tasks in serving order and for how many it has in flight.
// Task.Part points at it (nil for the default partition), so a task costs
// one pointer for it.
type Partition struct {
	Key string

	ready     *btree.BTreeG[*Task]    // stored ready, serving order (the records)
	scheduled *btree.BTreeG[TimeItem] // stored scheduled, by NotBefore
	inFlight  *btree.BTreeG[TimeItem] // stored in flight, by LeaseUntil
	lastTry   *btree.BTreeG[TimeItem] // in flight on the last attempt, by LeaseUntil
	dueSched  dueTree                 // stored scheduled, serving order, due at NotBefore
	dueRetry  dueTree                 // in flight with attempts left, serving order, ready again at LeaseUntil
	counts    [NumStates]int
	active    bool // in partitions.active
	pivot     Task // reused search key for ready
}

// partitions is the partition state of a partitioned queue.
type partitions struct {
	byKey map[string]*Partition // every partition holding a task, and the default one
	// sorted holds byKey's partitions in key order, for listing them a
	// page at a time.
	sorted *btree.BTreeG[*Partition]
	def    *Partition // the default partition (key "")
	// active holds, by key, the partitions with stored ready, scheduled or
	// retryable in-flight tasks: those that have or may come to have
	// claimable work. Claims rotate over it.
	active *btree.BTreeG[*Partition]
	named  int // tasks that name a partition: the queue is partitioned while there is one
}

func partLess(a, b *Partition) bool { return a.Key < b.Key }

func newPartition(key string) *Partition {
	return &Partition{
		Key:       key,
		ready:     btree.NewBTreeGOptions(readyLess, perTask),
		scheduled: btree.NewBTreeGOptions(timeLess, noLocks),
		inFlight:  btree.NewBTreeGOptions(timeLess, noLocks),
		lastTry:   btree.NewBTreeGOptions(timeLess, noLocks),
	}
}

// PartRef returns a detached partition that carries only its key: enough
// for a task record of a MutPutTask, which Apply then points at the
// queue's partition of that key. Planning and decoding use it so that
// they never change the store. The key must not be "".
func PartRef(key string) *Partition { return &Partition{Key: key} }

// partRefs hands out the detached partitions of PartRef, one per key, so
// that the records naming a partition share one: the retry policy and the
// partition are interned together (shared), and a new reference per
// record made unique.Make keep a new value per record, each with its weak
// pointer and cleanup (a restore of 300,000 partitioned tasks took 4.7 s
// instead of 0.3 s). With a bound, past that many keys it starts afresh.
type partRefs map[string]*Partition

// maxPartRefs bounds the store's partRefs, which only hands out the keys
// a queue has no partition of yet.
const maxPartRefs = 4096

func (r *partRefs) ref(key string, bound int) *Partition {
	if p := (*r)[key]; p != nil {
		return p
	}
	return r.add(key, bound)
}

// refBytes is ref(string(key), bound), allocating only for a key it has
// not seen.
func (r *partRefs) refBytes(key []byte, bound int) *Partition {
	if p := (*r)[string(key)]; p != nil {
		return p
	}
	return r.add(string(key), bound)
}

func (r *partRefs) add(key string, bound int) *Partition {
	if *r == nil || bound > 0 && len(*r) >= bound {
		*r = make(partRefs)
	}
	p := PartRef(key)
	(*r)[key] = p
	return p
}

// PartitionKey returns the key of t's partition ("" for the default).
func (t *Task) PartitionKey() string {
	p := t.Part()
	if p == nil {
		return ""
	}
	return p.Key
}

// Partitioned reports whether q has partition state: a task of q named a
// partition since q last held no task.
func (q *Queue) Partitioned() bool { return q.parts != nil }

// partition makes q partitioned if it is not yet and returns its
// partition of key, creating it if needed.
func (q *Queue) partition(key string) *Partition {
	if q.parts == nil {
		q.partition0()
	}
	ps := q.parts
	p := ps.byKey[key]
	if p == nil {
		p = newPartition(key)
		ps.know(p)
	}
	return p
}

// know makes p the partition of its key in byKey and sorted.
func (ps *partitions) know(p *Partition) {
	ps.byKey[p.Key] = p
	ps.sorted.Set(p)
}

// partition0 switches q to partitioned: every task it holds so far is in
// the default partition, whose indexes start as copies of the queue's.
func (q *Queue) partition0() {
	def := &Partition{
		ready:     q.Ready.Copy(),
		scheduled: q.Scheduled.Copy(),
		inFlight:  q.InFlight.Copy(),
		lastTry:   q.lastTry.Copy(),
		dueSched:  q.dueSched.clone(),
		dueRetry:  q.dueRetry.clone(),
		counts:    q.counts,
	}
	q.parts = &partitions{byKey: map[string]*Partition{}, def: def,
		sorted: btree.NewBTreeGOptions(partLess, noLocks), active: btree.NewBTreeGOptions(partLess, noLocks)}
	q.parts.know(def)
	q.parts.touch(def)
}

// clone returns an independent copy of t.
func (t *dueTree) clone() dueTree {
	c := *t
	c.nodes = slices.Clone(t.nodes)
	c.free = slices.Clone(t.free)
	return c
}

// internPart points t, a record about to be stored on queue q, at q's
// partition of its key (making q partitioned if it is not).
func (s *Store) internPart(q *Queue, t *Task) {
	if p := t.Part(); p != nil {
		if in := q.partition(p.Key); in != p {
			t.sh = s.shared.handle(shared{t.Retry(), in})
		}
	}
}

// partOf is the partition of t, a record stored on a partitioned queue.
func (ps *partitions) partOf(t *Task) *Partition {
	if p := t.Part(); p != nil {
		return p
	}
	return ps.def
}

// touch keeps p's membership of the active set and of byKey up to date
// after its tasks changed.
func (ps *partitions) touch(p *Partition) {
	act := p.ready.Len() > 0 || p.dueSched.Len() > 0 || p.dueRetry.Len() > 0
	if act != p.active {
		p.active = act
		if act {
			ps.active.Set(p)
		} else {
			ps.active.Delete(p)
		}
	}
	if p != ps.def && p.len() == 0 {
		delete(ps.byKey, p.Key)
		ps.sorted.Delete(p)
	}
}

func (p *Partition) len() int {
	n := 0
	for _, c := range p.counts {
		n += c
	}
	return n
}

// indexPart adds t to its partition's indexes.
func (ps *partitions) indexPart(t *Task) {
	p := ps.partOf(t)
	if p != ps.def {
		ps.named++
		if ps.byKey[p.Key] != p {
			// Emptied by the unindex of t's old record.
			ps.know(p)
		}
	}
	p.counts[t.State]++
	switch t.State {
	case StateReady:
		p.ready.Set(t)
	case StateScheduled:
		p.scheduled.Set(TimeItem{t.NotBefore, t.ID})
		p.dueSched.Set(t.Priority, t.ID, t.NotBefore)
	case StateInFlight:
		p.inFlight.Set(TimeItem{t.LeaseUntil(), t.ID})
		if t.lastTry() {
			p.lastTry.Set(TimeItem{t.LeaseUntil(), t.ID})
		} else {
			p.dueRetry.Set(t.Priority, t.ID, t.LeaseUntil())
		}
	}
	ps.touch(p)
}

// unindexPart removes t from its partition's indexes.
func (ps *partitions) unindexPart(t *Task) {
	p := ps.partOf(t)
	if p != ps.def {
		ps.named--
	}
	p.counts[t.State]--
	switch t.State {
	case StateReady:
		p.ready.Delete(t)
	case StateScheduled:
		p.scheduled.Delete(TimeItem{t.NotBefore, t.ID})
		p.dueSched.Delete(t.Priority, t.ID)
	case StateInFlight:
		p.inFlight.Delete(TimeItem{t.LeaseUntil(), t.ID})
		if t.lastTry() {
			p.lastTry.Delete(TimeItem{t.LeaseUntil(), t.ID})
		} else {
			p.dueRetry.Delete(t.Priority, t.ID)
		}
	}
	ps.touch(p)
}

// Claimable appends to out, in serving order, at most limit tasks of the
// partition that are claimable at now, from position from on (strictly
// after it when after is set), as Queue.Claimable does for a queue.
func (p *Partition) Claimable(now int64, from PrioItem, after bool, limit int, out []Due) []Due {
	return claimable(p.ready, &p.pivot, &p.dueSched, &p.dueRetry, now, from, after, limit, out)
}

// claimable is Claimable over one set of indexes.
// pivot is a record reused as the search key of ready.
func claimable(ready *btree.BTreeG[*Task], pivot *Task, sched, retry *dueTree, now int64, from PrioItem, after bool, limit int, out []Due) []Due {
	if limit <= 0 {
		return out
	}
	start := len(out)
	pivot.Priority, pivot.ID = from.Prio, from.ID
	ready.Ascend(pivot, func(t *Task) bool {
		if after && t.Priority == from.Prio && t.ID == from.ID {
			return true
		}
		out = append(out, Due{Prio: t.Priority, ID: t.ID, Stored: StateReady})
		return len(out)-start < limit
	})
	for _, src := range [...]struct {
		tree  *dueTree
		state TaskState
	}{{sched, StateScheduled}, {retry, StateInFlight}} {
		n := 0
		src.tree.AscendDue(from.Prio, from.ID, after, now, func(prio int64, id uint64, _ int64) bool {
			out = append(out, Due{Prio: prio, ID: id, Stored: src.state})
			n++
			return n < limit
		})
	}
	got := out[start:]
	slices.SortFunc(got, func(a, b Due) int {
		if before(a.Prio, a.ID, b.Prio, b.ID) {
			return -1
		}
		return 1
	})
	return out[:start+min(len(got), limit)]
}

// InFlightAt returns how many tasks of the partition are in flight at now
// (a lease past its deadline is not).
func (p *Partition) InFlightAt(now int64) int {
	return p.counts[StateInFlight] - rank(p.inFlight, now)
}

// CountsAt returns how many tasks of the partition are in each state at
// now, as Queue.CountsAt does for a queue (completed tasks past their
// retention are counted: callers that hide them use the queue's counts).
func (p *Partition) CountsAt(now int64) [NumStates]int {
	c := p.counts
	rs, rf, rl := rank(p.scheduled, now), rank(p.inFlight, now), rank(p.lastTry, now)
	c[StateReady] += rs + rf - rl
	c[StateScheduled] -= rs
	c[StateInFlight] -= rf
	c[StateDead] += rl
	return c
}

// NumActive is the number of partitions of q with stored ready, scheduled
// or retryable in-flight tasks (0 when q is not partitioned).
func (q *Queue) NumActive() int {
	if q.parts == nil {
		return 0
	}
	return q.parts.active.Len()
}

// Rotation calls fn for the partitions of q with stored ready, scheduled
// or retryable in-flight tasks, in key order starting at the one of rank
// start modulo their number and wrapping around once, until fn returns
// false. q must be partitioned.
func (q *Queue) Rotation(start uint64, fn func(*Partition) bool) {
	act := q.parts.active
	n := act.Len()
	if n == 0 {
		return
	}
	first, _ := act.GetAt(int(start % uint64(n)))
	stop := false
	act.Ascend(first, func(p *Partition) bool {
		stop = !fn(p)
		return !stop
	})
	if stop {
		return
	}
	act.Scan(func(p *Partition) bool {
		return p.Key < first.Key && fn(p)
	})
}

// Partitions calls fn, in key order from key from on (strictly after it
// when after is set), for every partition of q holding a task, until fn
// returns false; nothing when q is not partitioned. A page of k costs
// O(log p + k) for p partitions.
func (q *Queue) Partitions(from string, after bool, fn func(*Partition) bool) {
	if q.parts == nil {
		return
	}
	q.parts.sorted.Ascend(&Partition{Key: from}, func(p *Partition) bool {
		if p.Key == from && after || p.len() == 0 {
			return true
		}
		return fn(p)
	})
}

// verifyParts checks the partition state of q against its task records
// (tasks lists them): every partition's counts and indexes, and the
// active set.
func (q *Queue) verifyParts(tasks []*Task) error {
	ps := q.parts
	named := 0
	for _, t := range tasks {
		if t.Part() != nil {
			named++
		}
	}
	if ps != nil && (ps.named != named || named == 0) {
		return fmt.Errorf("index: verify: queue %v: %d tasks name a partition, %d counted", q.Key, named, ps.named)
	}
	if ps == nil {
		for _, t := range tasks {
			if p := t.Part(); p != nil {
				return fmt.Errorf("index: verify: task %d of unpartitioned queue %v names partition %q", t.ID, q.Key, p.Key)
			}
		}
		return nil
	}
	want := map[*Partition]*[NumStates]int{ps.def: new([NumStates]int)}
	for _, t := range tasks {
		p := ps.partOf(t)
		if p.Key == "" && p != ps.def || ps.byKey[p.Key] != p {
			return fmt.Errorf("index: verify: task %d points at an unknown partition %q of queue %v", t.ID, p.Key, q.Key)
		}
		c := want[p]
		if c == nil {
			c = new([NumStates]int)
			want[p] = c
		}
		c[t.State]++
		var found bool
		switch t.State {
		case StateReady:
			got, ok := p.ready.Get(t)
			found = ok && got == t
		case StateScheduled:
			_, found = p.scheduled.Get(TimeItem{t.NotBefore, t.ID})
			at, ok := p.dueSched.get(t.Priority, t.ID)
			found = found && ok && at == t.NotBefore
		case StateInFlight:
			_, found = p.inFlight.Get(TimeItem{t.LeaseUntil(), t.ID})
			if t.lastTry() {
				_, last := p.lastTry.Get(TimeItem{t.LeaseUntil(), t.ID})
				found = found && last
			} else {
				at, ok := p.dueRetry.get(t.Priority, t.ID)
				found = found && ok && at == t.LeaseUntil()
			}
		default:
			found = true
		}
		if !found {
			return fmt.Errorf("index: verify: task %d (%s) missing from partition %q of queue %v", t.ID, t.State, p.Key, q.Key)
		}
	}
	if len(want) != len(ps.byKey) {
		return fmt.Errorf("index: verify: queue %v: %d partitions hold tasks, %d known", q.Key, len(want), len(ps.byKey))
	}
	if ps.sorted.Len() != len(ps.byKey) {
		return fmt.Errorf("index: verify: queue %v: %d partitions known, %d in key order", q.Key, len(ps.byKey), ps.sorted.Len())
	}
	for _, p := range ps.byKey {
		if got, ok := ps.sorted.Get(p); !ok || got != p {
			return fmt.Errorf("index: verify: queue %v: partition %q missing from the key order", q.Key, p.Key)
		}
	}
	nActive := 0
	for p, c := range want {
		if p.counts != *c {
			return fmt.Errorf("index: verify: partition %q of queue %v: counts %v, records %v", p.Key, q.Key, p.counts, *c)
		}
		if p.ready.Len() != c[StateReady] || p.scheduled.Len() != c[StateScheduled] || p.dueSched.Len() != c[StateScheduled] ||
			p.inFlight.Len() != c[StateInFlight] || p.lastTry.Len()+p.dueRetry.Len() != c[StateInFlight] {
			return fmt.Errorf("index: verify: partition %q of queue %v: an index holds a task twice or a stale one", p.Key, q.Key)
		}
		act := c[StateReady] > 0 || c[StateScheduled] > 0 || p.dueRetry.Len() > 0
		if _, in := ps.active.Get(p); act != p.active || act != in {
			return fmt.Errorf("index: verify: partition %q of queue %v: active %v, listed %v, has work %v", p.Key, q.Key, p.active, in, act)
		}
		if act {
			nActive++
		}
	}
	if nActive != ps.active.Len() {
		return fmt.Errorf("index: verify: queue %v: %d active partitions, %d listed", q.Key, nActive, ps.active.Len())
	}
	return nil
}

// NextChange returns the earliest time after now at which a timer of the
// partition comes due or a lease of it ends, so that a claim that found
// the partition at its bound, or without claimable work, knows when to
// look again; 0 when there is none.
func (p *Partition) NextChange(now int64) int64 {
	var at int64
	for _, tr := range [...]*btree.BTreeG[TimeItem]{p.scheduled, p.inFlight} {
		tr.Ascend(TimeItem{At: now + 1}, func(it TimeItem) bool {
			if at == 0 || it.At < at {
				at = it.At
			}
			return false
		})
	}
	return at
}
