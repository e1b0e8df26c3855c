package index

import (
	"errors"
	"fmt"

	"github.com/tidwall/btree"
)

var noLocks = btree.Options{NoLocks: true}

// perTask are the options of the trees that hold an item for every task
// (by id, and the ready set). A B-tree filled in key order, as these
// mostly are, leaves each node half full; wider nodes halve the nodes'
// own share of that.
var perTask = btree.Options{NoLocks: true, Degree: 64}

// maxID is never a task id: the next id after it would wrap to 0.
const maxID = 1<<64 - 1

// PrioItem is a position in serving order: higher priority first, then
// lower id.
type PrioItem struct {
	Prio int64
	ID   uint64
}

// TimeItem orders the scheduled and in-flight sets: earliest time first.
type TimeItem struct {
	At int64
	ID uint64
}

func timeLess(a, b TimeItem) bool {
	if a.At != b.At {
		return a.At < b.At
	}
	return a.ID < b.ID
}

func idLess(a, b uint64) bool { return a < b }

// readyLess orders the ready set by its records: higher priority first,
// then lower id. The records are immutable, so an item's key never changes
// under the tree.
func readyLess(a, b *Task) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	return a.ID < b.ID
}

// sinceItem counts the stored ready tasks of a queue that became ready at
// At: tasks enqueued together share the time, so this costs far less than
// an item per task.
type sinceItem struct {
	At int64
	N  int
}

func sinceLess(a, b sinceItem) bool { return a.At < b.At }

// addSince counts one more task ready since at; with load set (a restore)
// a new time is appended with Load.
func addSince(tr *btree.BTreeG[sinceItem], hint *btree.PathHint, at int64, load bool) {
	// Tasks mostly become ready in time order: at is then the last time
	// or a new one after it, and only an earlier time needs a search.
	it, ok := tr.Max()
	switch {
	case !ok || it.At < at:
		it = sinceItem{At: at}
	case it.At > at:
		if it, ok = tr.GetHint(sinceItem{At: at}, hint); !ok {
			it = sinceItem{At: at}
		}
	}
	it.N++
	if load && it.N == 1 {
		tr.Load(it)
	} else {
		tr.SetHint(it, hint)
	}
}

// loadSince is addSince for a restore. Its records come in id order, and
// so within a queue mostly in time order: a time after the latest one of
// the queue last added to is appended without a look into the tree.
func (s *Store) loadSince(q *Queue, at int64) {
	if q == s.sinceQueue && at > s.sinceMax {
		q.readySince.Load(sinceItem{At: at, N: 1})
		s.sinceMax = at
		return
	}
	addSince(q.readySince, &q.sinceHints[0], at, true)
	it, _ := q.readySince.Max()
	s.sinceQueue, s.sinceMax = q, it.At
}

// removeSince counts one task fewer ready since at.
func removeSince(tr *btree.BTreeG[sinceItem], hint *btree.PathHint, at int64) {
	it, ok := tr.GetHint(sinceItem{At: at}, hint)
	switch {
	case !ok:
	case it.N <= 1:
		tr.DeleteHint(it, hint)
	default:
		it.N--
		tr.SetHint(it, hint)
	}
}

// Queue holds the derived indexes of one queue. Its Key never changes.
//
// The exported trees hold the tasks by stored state. Time moves a task
// without a write: a stored timer whose time has come is ready, a stored
// lease whose deadline has passed is ready again (dead on its last
// attempt). The unexported indexes answer questions about that effective
// state at a given time in O(log n) or per item reported (see Claimable,
// CountsAt, DeadAt, OldestReady), so that neither a claim nor a read has to
// move every due task first.
type Queue struct {
	Key       QueueKey
	Ready     *btree.BTreeG[*Task]    // stored ready, serving order (the records themselves: one word a task)
	Scheduled *btree.BTreeG[TimeItem] // stored scheduled, by NotBefore
	InFlight  *btree.BTreeG[TimeItem] // stored in flight, by LeaseUntil
	Dead      *btree.BTreeG[uint64]
	Completed *btree.BTreeG[uint64]
	Waiting   *btree.BTreeG[uint64] // waiting for other tasks, by id
	counts    [NumStates]int

	readySince *btree.BTreeG[sinceItem] // how many stored ready tasks became ready at each NotBefore
	// sinceHints are the paths of the last searches of readySince that
	// added a task (new ones come at the end) and removed one (claims take
	// from the start).
	sinceHints [2]btree.PathHint
	dueSched   dueTree                 // stored scheduled, serving order, due at NotBefore
	dueRetry   dueTree                 // in flight with attempts left, serving order, ready again at LeaseUntil
	lastTry    *btree.BTreeG[TimeItem] // in flight on the last attempt, by LeaseUntil
	dueDead    dueTree                 // the same by id (Prio 0), dead at LeaseUntil
	doneAt     *btree.BTreeG[TimeItem] // completed, by Updated
	totals     Totals
	pivot      Task        // reused search key for Ready
	parts      *partitions // nil until a task names a partition (partition.go)
}

// Count returns how many tasks of the queue are stored in state s.
func (q *Queue) Count(s TaskState) int {
	if !s.Valid() {
		return 0
	}
	return q.counts[s]
}

// Totals returns the queue's counters.
func (q *Queue) Totals() Totals { return q.totals }

func newQueue(k QueueKey) *Queue {
	return &Queue{
		Key:        k,
		Ready:      btree.NewBTreeGOptions(readyLess, perTask),
		Scheduled:  btree.NewBTreeGOptions(timeLess, noLocks),
		InFlight:   btree.NewBTreeGOptions(timeLess, noLocks),
		Dead:       btree.NewBTreeGOptions(idLess, noLocks),
		Completed:  btree.NewBTreeGOptions(idLess, noLocks),
		Waiting:    btree.NewBTreeGOptions(idLess, noLocks),
		readySince: btree.NewBTreeGOptions(sinceLess, noLocks),
		lastTry:    btree.NewBTreeGOptions(timeLess, noLocks),
		doneAt:     btree.NewBTreeGOptions(timeLess, noLocks),
	}
}

type idemExpItem struct {
	At    int64
	Queue QueueKey
	Key   string
}

func idemExpLess(a, b idemExpItem) bool {
	if a.At != b.At {
		return a.At < b.At
	}
	if a.Queue != b.Queue {
		return a.Queue.less(b.Queue)
	}
	return a.Key < b.Key
}

// Store is the whole in-memory state.
type Store struct {
	seq    uint64 // last applied batch
	nextID uint64
	now    int64 // time of the last applied batch (Unix micros)

	tasks *btree.BTreeG[*Task]
	// taskHint is the path of the last search of tasks: a batch's records
	// are mostly a run of ids, each found several times (planned, checked,
	// applied), and a search that starts on the path of the one before is
	// mostly a few comparisons.
	taskHint btree.PathHint
	kv       *btree.BTreeG[KV]
	idem     *btree.BTreeG[Idem]

	queues map[QueueKey]*Queue
	// byKey holds the queues of the map in key order, for reads of one
	// namespace or a page of namespaces (QueuesIn, NamespacesFrom).
	byKey *btree.BTreeG[*Queue]
	// keyPivot is the reused search key for byKey (a Queue is large).
	keyPivot Queue
	// last is the queue a lookup by key found or made last, nil after it
	// was dropped: a batch's tasks are mostly of one queue, and their keys
	// compare faster than they hash. When set it is queues[last.Key].
	last *Queue
	// shared is NewTask's memory of the last interned retry policy and
	// partition.
	shared   sharedCache
	partRefs partRefs                   // planning's PartRef
	idemExp  *btree.BTreeG[idemExpItem] // idem entries with an expiry, by expiry
	doneExp  *btree.BTreeG[TimeItem]    // completed tasks by Updated
	pivot    Task                       // reused search key for tasks
	affected []*Queue                   // queues that gained claimable work in the last Apply
	emptied  []*Queue                   // queues that lost a task in the current Apply
	fresh    []*Queue                   // queues interned since the last Apply
	counted  []*Queue                   // queues whose totals changed in the current Apply

	totals *btree.BTreeG[QueueTotals] // primary: every queue's counters, by queue
	idle   *btree.BTreeG[idleItem]    // totals of queues holding no task, by when they went idle

	confs  *btree.BTreeG[QueueConf] // primary: the settings of queues that have any, by queue
	reconf []QueueKey               // queues whose settings changed in the last Apply

	deps depIndex // primary: dependencies between tasks (deps.go)

	buckets *btree.BTreeG[PartBucket] // primary: partition token buckets not full, by queue and key (bucket.go)

	// loadRef is the queue reference of the last task LoadTask loaded and
	// loadQueue the store's queue for it.
	loadRef, loadQueue *Queue
	// sinceQueue is the queue whose readySince a restore added to last
	// and sinceMax the latest time in it; nil once anything else changes
	// an index.
	sinceQueue *Queue
	sinceMax   int64

	// usage is what the state costs, nsUsage the same per namespace
	// (usage.go); lastUse is nsUsage[lastUseNS], the last one changed.
	usage     Usage
	nsUsage   map[Namespace]*Usage
	lastUse   *Usage
	lastUseNS Namespace

	// live is, per value log file, the sum of the lengths of the
	// references into it (valueref.go); a file referenced by none is not
	// in it.
	live map[uint32]int64
}

// NewStore returns an empty state.
func NewStore() *Store {
	return &Store{
		nextID:  1,
		tasks:   btree.NewBTreeGOptions(func(a, b *Task) bool { return a.ID < b.ID }, perTask),
		kv:      btree.NewBTreeGOptions(kvLess, noLocks),
		idem:    btree.NewBTreeGOptions(idemLess, noLocks),
		queues:  make(map[QueueKey]*Queue),
		byKey:   btree.NewBTreeGOptions(queueKeyLess, noLocks),
		idemExp: btree.NewBTreeGOptions(idemExpLess, noLocks),
		doneExp: btree.NewBTreeGOptions(timeLess, noLocks),
		totals:  btree.NewBTreeGOptions(totalsLess, noLocks),
		idle:    btree.NewBTreeGOptions(idleLess, noLocks),
		confs:   btree.NewBTreeGOptions(confLess, noLocks),
		deps:    newDepIndex(),
		buckets: btree.NewBTreeGOptions(bucketLess, noLocks),
	}
}

// Seq is the sequence number of the last batch applied.
func (s *Store) Seq() uint64 { return s.seq }

// Now is the time of the last applied batch, Unix micros. A plan uses a
// time no earlier than this, so that time never goes backwards across
// batches, whatever the clock does.
func (s *Store) Now() int64 { return s.now }

// NextID is the id the next new task gets.
func (s *Store) NextID() uint64 { return s.nextID }

// Len is the number of task records.
func (s *Store) Len() int { return s.tasks.Len() }

// Task returns the record with the given id.
func (s *Store) Task(id uint64) (*Task, bool) {
	s.pivot.ID = id
	return s.tasks.GetHint(&s.pivot, &s.taskHint)
}

// Queue returns the indexes of a queue, or nil if no task ever reached it.
func (s *Store) Queue(k QueueKey) *Queue { return s.queues[k] }

// QueueRef returns the queue for k when it exists and otherwise a detached
// queue that carries only its key: enough for a task record of a
// MutPutTask, which Apply then points at the store's queue (creating it).
// Planning uses it so that planning never changes the store's state
// (lookup only remembers the queue it found).
func (s *Store) QueueRef(k QueueKey) *Queue {
	if q := s.lookup(k); q != nil {
		return q
	}
	return &Queue{Key: k}
}

// NewTask returns a new record with the fields of f, as f.Task does, with
// the retry policy and partition interned through the store's memory of
// the last: the tasks a batch enqueues mostly share them. For planning
// (the memory is not state).
func (s *Store) NewTask(f *Fields) *Task { return f.task(&s.shared) }

// PartRef returns the partition of key for a record of queue k to name,
// for planning and decoding: the queue's own when it has one, so that
// Apply finds the record pointing at it already, else PartRef(key), the
// same for the same key (most of the time). Either way the records that
// name one partition intern alike. It changes no state.
func (s *Store) PartRef(k QueueKey, key string) *Partition {
	if q := s.lookup(k); q != nil && q.parts != nil {
		if p := q.parts.byKey[key]; p != nil {
			return p
		}
	}
	return s.partRefs.ref(key, maxPartRefs)
}

// lookup is queues[k], through last.
func (s *Store) lookup(k QueueKey) *Queue {
	if q := s.last; q != nil && q.Key == k {
		return q
	}
	q := s.queues[k]
	if q != nil {
		s.last = q
	}
	return q
}

// Intern returns the queue for k, creating its (empty) indexes if needed.
// Only Apply and restores call it: a queue exists because a batch put a
// task on it.
func (s *Store) Intern(k QueueKey) *Queue {
	q := s.lookup(k)
	if q == nil {
		q = newQueue(k)
		s.queues[k] = q
		s.byKey.Set(q)
		s.last = q
		s.fresh = append(s.fresh, q)
		if rec, ok := s.totals.Get(QueueTotals{Queue: k}); ok {
			// The queue was idle: it counts on from where it stopped.
			q.totals = rec.Totals
			s.wake(rec)
		}
	}
	return q
}

// wake marks the totals record of a queue that holds a task again as not
// idle.
func (s *Store) wake(rec QueueTotals) {
	if rec.Idle == 0 {
		return
	}
	s.idle.Delete(idleItem{At: rec.Idle, Queue: rec.Queue})
	rec.Idle = 0
	s.totals.Set(rec)
}

// Len is the number of tasks of the queue, in any state.
func (q *Queue) Len() int {
	n := 0
	for _, c := range q.counts {
		n += c
	}
	return n
}

// NumQueues is the number of queues in memory: those holding a task, plus
// any interned since the last Apply.
func (s *Store) NumQueues() int { return len(s.queues) }

// DropEmpty forgets the queues interned since the last Apply that hold no
// task, so that a call refused after it interned a queue leaves nothing
// behind.
func (s *Store) DropEmpty() {
	s.drop(s.fresh)
	clear(s.fresh)
	s.fresh = s.fresh[:0]
}

// drop removes the queues of qs that hold no task. A queue exists in memory
// only while it holds a task.
func (s *Store) drop(qs []*Queue) {
	for _, q := range qs {
		if q.Len() == 0 && s.queues[q.Key] == q {
			delete(s.queues, q.Key)
			s.byKey.Delete(q)
			if s.last == q {
				s.last = nil
			}
			if rec, ok := s.totals.Get(QueueTotals{Queue: q.Key}); ok && rec.Idle == 0 {
				// The counters outlive the indexes, for IdleTotalsTTL.
				rec.Idle = s.now
				s.totals.Set(rec)
				s.idle.Set(idleItem{At: rec.Idle, Queue: rec.Queue})
			}
		}
	}
}

// forgetIdle deletes, at most max at a time, the totals of queues idle
// for longer than IdleTotalsTTL, and then those idle longest until at most
// MaxIdleTotals are left (all of them: the excess is at most what the batch
// made idle, or what a restore of an older image brought).
func (s *Store) forgetIdle(max int) {
	for range max {
		it, ok := s.idle.Min()
		if !ok || it.At > s.now-IdleTotalsTTL {
			break
		}
		s.forgetTotals(it)
	}
	for s.idle.Len() > MaxIdleTotals {
		it, _ := s.idle.Min()
		s.forgetTotals(it)
	}
}

func (s *Store) forgetTotals(it idleItem) {
	s.idle.Delete(it)
	s.totals.Delete(QueueTotals{Queue: it.Queue})
}

// count records that q's totals changed in the current Apply.
func (s *Store) count(q *Queue) {
	if n := len(s.counted); n == 0 || s.counted[n-1] != q {
		s.counted = append(s.counted, q)
	}
}

// flushTotals writes the changed totals of the current Apply to their
// records.
func (s *Store) flushTotals() {
	for _, q := range s.counted {
		s.totals.Set(QueueTotals{Queue: q.Key, Totals: q.totals})
	}
	clear(s.counted)
	s.counted = s.counted[:0]
}

// Queues calls fn for every known queue (in no particular order).
func (s *Store) Queues(fn func(*Queue) bool) {
	for _, q := range s.queues {
		if !fn(q) {
			return
		}
	}
}

func queueKeyLess(a, b *Queue) bool { return a.Key.less(b.Key) }

// QueuesIn calls fn for every queue of namespace ns in memory, in name
// order, until fn returns false.
func (s *Store) QueuesIn(ns Namespace, fn func(*Queue) bool) {
	s.keyPivot.Key = QueueKey{Namespace: ns}
	s.byKey.Ascend(&s.keyPivot, func(q *Queue) bool {
		return q.Key.Namespace == ns && fn(q)
	})
}

// ConfsIn calls fn for every settings record of namespace ns, in queue
// order, until fn returns false.
func (s *Store) ConfsIn(ns Namespace, fn func(QueueConf) bool) {
	s.confs.Ascend(QueueConf{Queue: QueueKey{Namespace: ns}}, func(c QueueConf) bool {
		return c.Queue.Namespace == ns && fn(c)
	})
}

// NamespacesFrom calls fn, in order, for every namespace not before from
// that has a queue in memory or a settings record, until fn returns false.
// Each namespace costs two searches, however many queues it has.
func (s *Store) NamespacesFrom(from Namespace, fn func(Namespace) bool) {
	for {
		var next Namespace
		found := false
		s.keyPivot.Key = QueueKey{Namespace: from}
		s.byKey.Ascend(&s.keyPivot, func(q *Queue) bool {
			next, found = q.Key.Namespace, true
			return false
		})
		s.confs.Ascend(QueueConf{Queue: QueueKey{Namespace: from}}, func(c QueueConf) bool {
			if !found || c.Queue.Namespace.less(next) {
				next, found = c.Queue.Namespace, true
			}
			return false
		})
		if !found || !fn(next) {
			return
		}
		// The namespace right after next in order: its scope followed by
		// the least byte.
		from = Namespace{Project: next.Project, Scope: next.Scope + "\x00"}
	}
}

// KV returns the entry for key in ns.
func (s *Store) KV(ns Namespace, key string) (KV, bool) {
	return s.kv.Get(KV{Namespace: ns, Key: key})
}

// ScanKV calls fn for entries of ns with start <= key (< end when end is not
// empty), in key order, until fn returns false.
func (s *Store) ScanKV(ns Namespace, start, end string, fn func(KV) bool) {
	s.kv.Ascend(KV{Namespace: ns, Key: start}, func(e KV) bool {
		if e.Namespace != ns || (end != "" && e.Key >= end) {
			return false
		}
		return fn(e)
	})
}

// Idem returns the idempotency entry for key in queue q.
func (s *Store) Idem(q QueueKey, key string) (Idem, bool) {
	return s.idem.Get(Idem{Queue: q, Key: key})
}

// ExpiredIdem calls fn for idempotency entries whose expiry is at or before
// now, oldest first, until fn returns false.
func (s *Store) ExpiredIdem(now int64, fn func(Idem) bool) {
	s.idemExp.Scan(func(it idemExpItem) bool {
		if it.At > now {
			return false
		}
		e, ok := s.idem.Get(Idem{Queue: it.Queue, Key: it.Key})
		if !ok {
			return true
		}
		return fn(e)
	})
}

// Expired reports, in O(log n), whether an idempotency entry expired at or
// before now, a task others wait for died at or before now (ExpiredParents),
// or (when doneBefore > 0) a completed task was last updated at or before
// doneBefore, so that callers skip the scans in the common case.
func (s *Store) Expired(now, doneBefore int64) bool {
	if it, ok := s.idemExp.Min(); ok && it.At <= now {
		return true
	}
	if it, ok := s.deps.expiring.Min(); ok && it.At <= now {
		return true
	}
	if it, ok := s.doneExp.Min(); ok && doneBefore > 0 && it.At <= doneBefore {
		return true
	}
	return false
}

// CompletedBefore calls fn for completed tasks last updated at or before t,
// oldest first, until fn returns false.
func (s *Store) CompletedBefore(t int64, fn func(*Task) bool) {
	s.doneExp.Scan(func(it TimeItem) bool {
		if it.At > t {
			return false
		}
		task, ok := s.Task(it.ID)
		if !ok {
			return true
		}
		return fn(task)
	})
}

// Affected returns the queues that gained ready, scheduled or in-flight work
// in the last Apply (claimers parked on them may now have something to do).
// The slice is reused by the next Apply.
func (s *Store) Affected() []*Queue { return s.affected }

// Check verifies b's assertions against the current state without changing
// anything.
//
// It also refuses, with an error wrapping ErrCorrupt, a batch with a
// mutation that sets a value both in line and by reference, or a malformed
// reference: Apply then changes nothing at all, not even the sequence
// number.
func (s *Store) Check(b *Batch) error {
	for i := range b.Mutations {
		if err := checkValues(&b.Mutations[i]); err != nil {
			return err
		}
	}
	for i := range b.Assertions {
		a := &b.Assertions[i]
		switch a.Kind {
		case AssertKVVersion, AssertKVExists, AssertKVAbsent:
			e, ok := s.KV(a.NS, a.Key)
			switch {
			case a.Kind == AssertKVExists && !ok,
				a.Kind == AssertKVAbsent && ok,
				a.Kind == AssertKVVersion && (!ok || e.Version != a.Version):
				return fmt.Errorf("%w: key %q in %s/%s", ErrAssertion, a.Key, a.NS.Project, a.NS.Scope)
			}
		case AssertToken:
			t, ok := s.Task(a.ID)
			if !ok || t.State != StateInFlight || t.Token() != a.Token {
				return fmt.Errorf("%w: task %d fencing token %d", ErrAssertion, a.ID, a.Token)
			}
		default:
			return fmt.Errorf("%w: unknown assertion kind %d", ErrCorrupt, a.Kind)
		}
	}
	return nil
}

// Apply applies batch b and records b.Seq as the last applied batch and
// b.Now (unless earlier) as the store's time. It reads no clock and no
// randomness: the same state and batch give the same state on every node.
//
// If an assertion of b does not hold, b is refused: the Outcome says why,
// nothing but the sequence number and time changes, and the error is nil. A
// replicated log commits an entry before anyone knows whether it applies, so
// a refusal is a result, not a failure. An error (always wrapping
// ErrCorrupt) means the batch does not fit the state at all; the state may
// then be partly changed and must be discarded.
func (s *Store) Apply(b *Batch) (Outcome, error) {
	out := Outcome{Seq: b.Seq}
	if b.Seq <= s.seq {
		return out, fmt.Errorf("%w: batch %d applied after %d", ErrCorrupt, b.Seq, s.seq)
	}
	s.affected = s.affected[:0]
	clear(s.reconf)
	s.reconf = s.reconf[:0]
	if err := s.Check(b); err != nil {
		if !errors.Is(err, ErrAssertion) {
			return out, err
		}
		out.Refused = err.Error()
	} else {
		for i := range b.Mutations {
			if err := s.apply(b, &b.Mutations[i]); err != nil {
				return out, err
			}
		}
		if err := s.checkTouched(); err != nil {
			return out, err
		}
	}
	s.seq = b.Seq
	s.now = max(s.now, b.Now)
	s.flushTotals()
	s.drop(s.emptied)
	clear(s.emptied)
	s.emptied = s.emptied[:0]
	s.DropEmpty()
	s.forgetIdle(idleForgetBatch)
	return out, nil
}

// idleForgetBatch bounds how many idle queues' totals one Apply forgets.
const idleForgetBatch = 256

func (s *Store) apply(b *Batch, m *Mutation) error {
	switch m.Kind {
	case MutPutTask:
		t := m.Task
		if t == nil || t.ID == 0 || t.ID == maxID || !t.State.Valid() || t.Queue == nil {
			return fmt.Errorf("%w: bad task record", ErrCorrupt)
		}
		// The record is not stored yet, so pointing it at the store's
		// queue changes nothing anyone has seen.
		t.Queue = s.Intern(t.Queue.Key)
		s.internPart(t.Queue, t)
		s.deps.touched = append(s.deps.touched, t.ID)
		if old, ok := s.tasks.SetHint(t, &s.taskHint); ok {
			s.unindex(old)
		} else {
			t.Queue.totals.Enqueued++
			s.count(t.Queue)
		}
		if t.ID >= s.nextID {
			s.nextID = t.ID + 1
		}
		s.index(t)
	case MutUpdateTask:
		u := &m.Update
		old, ok := s.Task(u.ID)
		if !ok || !u.State.Valid() {
			return fmt.Errorf("%w: update of missing task %d", ErrCorrupt, u.ID)
		}
		nt := old.With(u)
		s.deps.touched = append(s.deps.touched, u.ID)
		s.countTransition(old, nt, u.Flags)
		s.unindex(old)
		s.tasks.SetHint(nt, &s.taskHint)
		s.index(nt)
	case MutDeleteTask:
		old, ok := s.Task(m.Update.ID)
		if !ok {
			return fmt.Errorf("%w: delete of missing task %d", ErrCorrupt, m.Update.ID)
		}
		if m.Update.Flags&UpdCompleted != 0 {
			old.Queue.totals.Completed++
			s.count(old.Queue)
		}
		s.deps.touched = append(s.deps.touched, old.ID)
		s.unindex(old)
		s.tasks.DeleteHint(old, &s.taskHint)
	case MutSetKV:
		e := m.KV
		e.Version = b.Seq
		e.Value = nonEmpty(e.Value)
		if e.Ref != nil {
			r := *e.Ref // the store's own: the caller's may change
			e.Ref = &r
		}
		if old, ok := s.kv.Set(e); ok {
			s.useKV(&old, -1)
		}
		s.useKV(&e, 1)
	case MutDeleteKV:
		if old, ok := s.kv.Delete(m.KV); ok {
			s.useKV(&old, -1)
		}
	case MutPutIdem:
		old, ok := s.idem.Set(m.Idem)
		if ok {
			s.useIdem(&old, -1)
		}
		s.useIdem(&m.Idem, 1)
		if ok && old.Expires != 0 {
			s.idemExp.Delete(idemExpItem{At: old.Expires, Queue: old.Queue, Key: old.Key})
		}
		if m.Idem.Expires != 0 {
			s.idemExp.Set(idemExpItem{At: m.Idem.Expires, Queue: m.Idem.Queue, Key: m.Idem.Key})
		}
	case MutDeleteIdem:
		old, ok := s.idem.Delete(m.Idem)
		if ok {
			s.useIdem(&old, -1)
		}
		if ok && old.Expires != 0 {
			s.idemExp.Delete(idemExpItem{At: old.Expires, Queue: old.Queue, Key: old.Key})
		}
	case MutPutConf:
		return s.putConf(m.Conf)
	case MutDeleteConf:
		s.deleteConf(m.Conf.Queue)
	case MutPutDep:
		return s.putDep(m.Dep)
	case MutDeleteDep:
		return s.deleteDep(m.Dep)
	case MutPutBucket:
		return s.putBucket(m.Bucket)
	case MutDeleteBucket:
		s.deleteBucket(m.Bucket)
	case MutMoveValue:
		s.moveValue(&m.Move)
	default:
		return fmt.Errorf("%w: unknown mutation kind %d", ErrCorrupt, m.Kind)
	}
	return nil
}

// With returns the record t becomes by update u: a new record (t is not
// changed), as Apply stores it. Readers use it to see a record as it is at
// a later time without storing anything.
func (t *Task) With(u *TaskUpdate) *Task {
	nt := *t
	nt.State, nt.Attempts, nt.NotBefore = u.State, u.Attempts, u.NotBefore
	nt.SetRun(u.Owner, u.Token, u.LeaseUntil, u.Secret, u.Updated)
	if u.Flags&(UpdProgress|UpdResult|UpdLastError|UpdAddError|UpdFollowUps) != 0 {
		ex := *t.Ex()
		if u.Flags&(UpdProgress|UpdResult) != 0 {
			refs := TaskRefs{}
			if ex.Refs != nil {
				refs = *ex.Refs
			}
			if u.Flags&UpdProgress != 0 {
				ex.Progress, refs.Progress = nonEmpty(u.Progress), u.ProgressRef
			}
			if u.Flags&UpdResult != 0 {
				ex.Result, refs.Result = nonEmpty(u.Result), u.ResultRef
			}
			if refs != (TaskRefs{}) && (ex.Refs == nil || refs != *ex.Refs) {
				ex.Refs = &refs // a new record: the old one keeps its refs
			} else if refs == (TaskRefs{}) {
				ex.Refs = nil
			}
		}
		if u.Flags&UpdLastError != 0 {
			ex.LastError = u.LastError
		}
		if u.Flags&UpdAddError != 0 {
			// A new slice: the old record keeps its history.
			keep := ex.Errors[max(0, len(ex.Errors)+1-MaxAttemptErrors):]
			errs := make([]AttemptError, 0, len(keep)+1)
			ex.Errors = append(append(errs, keep...), AttemptError{Attempt: u.ErrAttempt, At: u.ErrAt, Error: u.LastError})
		}
		if u.Flags&UpdFollowUps != 0 {
			ex.FollowUps = nil
			if len(u.FollowUps) > 0 {
				ex.FollowUps = u.FollowUps
			}
		}
		nt.Extra = &ex
		if ex.empty() {
			nt.Extra = nil
		}
	}
	return &nt
}

// countTransition adds the transition old -> nt to the queue's totals.
func (s *Store) countTransition(old, nt *Task, flags uint8) {
	q := old.Queue
	n := q.totals
	if nt.State == StateInFlight && nt.Token() != old.Token() {
		n.Claimed++
	}
	if flags&UpdAddError != 0 && nt.State != StateDead {
		n.Retried++
	}
	if nt.State == StateDead && old.State != StateDead {
		n.DeadLettered++
	}
	if nt.State == StateCompleted && old.State != StateCompleted {
		n.Completed++
	}
	if n != q.totals {
		q.totals = n
		s.count(q)
	}
}

// lastTry reports whether an in-flight task is on its last attempt: when
// its lease expires it goes dead, not back to ready.
func (t *Task) lastTry() bool { return t.Attempts >= t.MaxAttempts() }

func (s *Store) index(t *Task) { s.indexLoad(t, false) }

// indexLoad is index; with load set (a restore, whose records come in id
// order) the B-trees append with Load, which skips the descent when an
// item sorts after the last.
func (s *Store) indexLoad(t *Task, load bool) {
	set := func(tr *btree.BTreeG[TimeItem], it TimeItem) {
		if load {
			tr.Load(it)
		} else {
			tr.Set(it)
		}
	}
	q := t.Queue
	if !load {
		s.sinceQueue = nil
	}
	if !load && q != s.last && s.queues[q.Key] == nil {
		// Dropped when an earlier batch emptied it; it holds a task again.
		// (A restore has just interned it.)
		s.queues[q.Key] = q
		s.byKey.Set(q)
		if rec, ok := s.totals.Get(QueueTotals{Queue: q.Key}); ok {
			q.totals = rec.Totals
			s.wake(rec)
		}
	}
	if t.Part() != nil && q.parts == nil {
		q.partition0() // the unindex of t's old record switched it back
	}
	q.counts[t.State]++
	s.useTask(t, 1)
	if q.parts != nil {
		q.parts.indexPart(t)
	}
	s.indexParent(t)
	switch t.State {
	case StateReady:
		if load {
			q.Ready.Load(t)
			s.loadSince(q, t.NotBefore)
		} else {
			q.Ready.Set(t)
			addSince(q.readySince, &q.sinceHints[0], t.NotBefore, false)
		}
	case StateScheduled:
		set(q.Scheduled, TimeItem{t.NotBefore, t.ID})
		q.dueSched.Set(t.Priority, t.ID, t.NotBefore)
	case StateInFlight:
		set(q.InFlight, TimeItem{t.LeaseUntil(), t.ID})
		if t.lastTry() {
			set(q.lastTry, TimeItem{t.LeaseUntil(), t.ID})
			q.dueDead.Set(0, t.ID, t.LeaseUntil())
		} else {
			q.dueRetry.Set(t.Priority, t.ID, t.LeaseUntil())
		}
	case StateDead:
		if load {
			q.Dead.Load(t.ID)
		} else {
			q.Dead.Set(t.ID)
		}
		return
	case StateWaiting:
		q.Waiting.Set(t.ID)
		s.deps.nWaiting++
		return
	case StateCompleted:
		if load {
			q.Completed.Load(t.ID)
		} else {
			q.Completed.Set(t.ID)
		}
		set(q.doneAt, TimeItem{t.Updated(), t.ID})
		set(s.doneExp, TimeItem{t.Updated(), t.ID})
		return
	}
	if n := len(s.affected); n == 0 || s.affected[n-1] != q {
		s.affected = append(s.affected, q)
	}
}

func (s *Store) unindex(t *Task) {
	q := t.Queue
	s.sinceQueue = nil
	q.counts[t.State]--
	s.useTask(t, -1)
	if q.counts[t.State] == 0 {
		s.emptied = append(s.emptied, q)
	}
	if q.parts != nil {
		if q.parts.unindexPart(t); q.parts.named == 0 {
			q.parts = nil // no task names a partition any more
		}
	}
	s.unindexParent(t)
	switch t.State {
	case StateReady:
		q.Ready.Delete(t)
		removeSince(q.readySince, &q.sinceHints[1], t.NotBefore)
	case StateScheduled:
		q.Scheduled.Delete(TimeItem{t.NotBefore, t.ID})
		q.dueSched.Delete(t.Priority, t.ID)
	case StateInFlight:
		q.InFlight.Delete(TimeItem{t.LeaseUntil(), t.ID})
		if t.lastTry() {
			q.lastTry.Delete(TimeItem{t.LeaseUntil(), t.ID})
			q.dueDead.Delete(0, t.ID)
		} else {
			q.dueRetry.Delete(t.Priority, t.ID)
		}
		if s.limited(q.Key) {
			// A slot of the queue's in-flight bound is free again.
			if n := len(s.affected); n == 0 || s.affected[n-1] != q {
				s.affected = append(s.affected, q)
			}
		}
	case StateDead:
		q.Dead.Delete(t.ID)
	case StateWaiting:
		q.Waiting.Delete(t.ID)
		s.deps.nWaiting--
	case StateCompleted:
		q.Completed.Delete(t.ID)
		q.doneAt.Delete(TimeItem{t.Updated(), t.ID})
		s.doneExp.Delete(TimeItem{t.Updated(), t.ID})
	}
}

// Image is a copy-on-write image of the primary records, safe to read from
// another goroutine while the Store it came from keeps changing.
type Image struct {
	Seq    uint64
	NextID uint64
	Now    int64
	Tasks  *btree.BTreeG[*Task]
	KV     *btree.BTreeG[KV]
	Idem   *btree.BTreeG[Idem]
	Totals *btree.BTreeG[QueueTotals]
	Confs  *btree.BTreeG[QueueConf]
	Deps   *btree.BTreeG[Dep]
	// Buckets are the partition token buckets (nil: none).
	Buckets *btree.BTreeG[PartBucket]
}

// Copy returns an image of the current primary records in O(1). It writes to
// the Store's trees (copy-on-write marks), so call it where the Store is not
// being used concurrently.
func (s *Store) Copy() *Image {
	return &Image{Seq: s.seq, NextID: s.nextID, Now: s.now, Tasks: s.tasks.Copy(), KV: s.kv.Copy(), Idem: s.idem.Copy(),
		Totals: s.totals.Copy(), Confs: s.confs.Copy(), Deps: s.deps.byParent.Copy(),
		Buckets: s.buckets.Copy()}
}

// Restore resets the store to a state image's header (seq, next id and
// time); the records are then added with Load*.
func (s *Store) Restore(seq, nextID uint64, now int64) {
	*s = *NewStore()
	s.seq, s.nextID, s.now = seq, nextID, now
}

// Load adds one decoded snapshot record during a restore; the header resets
// the store, so it must come first.
func (s *Store) Load(r Record) error {
	switch r.Kind {
	case RecHeader:
		s.Restore(r.Seq, r.NextID, r.Now)
		return nil
	case RecTask:
		return s.LoadTask(r.Task)
	case RecKV:
		return s.LoadKV(r.KV)
	case RecIdem:
		return s.LoadIdem(r.Idem)
	case RecTotals:
		return s.LoadTotals(r.Totals)
	case RecConf:
		return s.LoadConf(r.Conf)
	case RecDep:
		return s.LoadDep(r.Dep)
	case RecBucket:
		return s.LoadBucket(r.Bucket)
	}
	return fmt.Errorf("%w: record kind %d in snapshot", ErrCorrupt, r.Kind)
}

// LoadTask adds a task record during a restore.
func (s *Store) LoadTask(t *Task) error {
	if t.ID == 0 || t.ID == maxID || !t.State.Valid() || t.Queue == nil {
		return fmt.Errorf("%w: bad task record", ErrCorrupt)
	}
	if t.Queue != s.loadRef {
		// Records of one queue mostly come in runs, decoded with one
		// queue reference: look the queue up once a run.
		s.loadRef, s.loadQueue = t.Queue, s.Intern(t.Queue.Key)
	}
	t.Queue = s.loadQueue
	s.internPart(t.Queue, t)
	if _, dup := s.tasks.Load(t); dup {
		return fmt.Errorf("%w: task %d twice", ErrCorrupt, t.ID)
	}
	if t.ID >= s.nextID {
		s.nextID = t.ID + 1
	}
	s.indexLoad(t, true)
	return nil
}

// LoadKV adds a KV entry during a restore.
func (s *Store) LoadKV(e KV) error {
	if _, dup := s.kv.Load(e); dup {
		return fmt.Errorf("%w: key %q twice", ErrCorrupt, e.Key)
	}
	s.useKV(&e, 1)
	return nil
}

// LoadIdem adds an idempotency entry during a restore.
func (s *Store) LoadIdem(e Idem) error {
	if _, dup := s.idem.Load(e); dup {
		return fmt.Errorf("%w: idempotency key %q twice", ErrCorrupt, e.Key)
	}
	s.useIdem(&e, 1)
	if e.Expires != 0 {
		s.idemExp.Set(idemExpItem{At: e.Expires, Queue: e.Queue, Key: e.Key})
	}
	return nil
}

// LoadTotals adds a queue's totals record during a restore, after the
// tasks: a queue holding a task has a record that is not idle, and only
// those.
func (s *Store) LoadTotals(r QueueTotals) error {
	q := s.queues[r.Queue]
	if (q != nil) != (r.Idle == 0) {
		return fmt.Errorf("%w: totals of queue %v idle since %d", ErrCorrupt, r.Queue, r.Idle)
	}
	if _, dup := s.totals.Load(r); dup {
		return fmt.Errorf("%w: totals of queue %v twice", ErrCorrupt, r.Queue)
	}
	if q != nil {
		q.totals = r.Totals
	} else {
		s.idle.Set(idleItem{At: r.Idle, Queue: r.Queue})
	}
	return nil
}

// Verify checks every derived index against the primary records and returns
// the first inconsistency found.
func (s *Store) Verify() error {
	var counts = map[*Queue]*[NumStates]int{}
	type sinceKey struct {
		q  *Queue
		at int64
	}
	since := map[sinceKey]int{}
	parted := map[*Queue][]*Task{}
	var err error
	fail := func(format string, args ...any) bool {
		err = fmt.Errorf("index: verify: "+format, args...)
		return false
	}
	if q := s.last; q != nil && s.queues[q.Key] != q {
		fail("the last queue looked up, %v, is not the store's", q.Key)
		return err
	}
	if s.byKey.Len() != len(s.queues) {
		fail("%d queues in key order, %d in memory", s.byKey.Len(), len(s.queues))
		return err
	}
	s.byKey.Scan(func(q *Queue) bool {
		return s.queues[q.Key] == q || fail("queue %v in key order is not the store's", q.Key)
	})
	if err != nil {
		return err
	}
	var prev uint64
	s.tasks.Scan(func(t *Task) bool {
		if t.ID <= prev {
			return fail("task ids out of order at %d", t.ID)
		}
		prev = t.ID
		if t.ID >= s.nextID {
			return fail("task %d not below next id %d", t.ID, s.nextID)
		}
		q := t.Queue
		if q == nil || s.queues[q.Key] != q {
			return fail("task %d points at an unknown queue", t.ID)
		}
		c := counts[q]
		if c == nil {
			c = new([NumStates]int)
			counts[q] = c
		}
		if !t.State.Valid() {
			return fail("task %d has state %d", t.ID, t.State)
		}
		c[t.State]++
		if q.parts != nil || t.Part() != nil {
			parted[q] = append(parted[q], t)
		}
		var found bool
		has := func(tr *dueTree, prio int64, at int64) bool {
			got, ok := tr.get(prio, t.ID)
			return ok && got == at
		}
		switch t.State {
		case StateReady:
			var got *Task
			got, found = q.Ready.Get(t)
			found = found && got == t
			since[sinceKey{q, t.NotBefore}]++
		case StateScheduled:
			_, found = q.Scheduled.Get(TimeItem{t.NotBefore, t.ID})
			found = found && has(&q.dueSched, t.Priority, t.NotBefore)
		case StateInFlight:
			_, found = q.InFlight.Get(TimeItem{t.LeaseUntil(), t.ID})
			if t.lastTry() {
				_, last := q.lastTry.Get(TimeItem{t.LeaseUntil(), t.ID})
				found = found && last && has(&q.dueDead, 0, t.LeaseUntil())
			} else {
				found = found && has(&q.dueRetry, t.Priority, t.LeaseUntil())
			}
			if t.Owner() == "" || t.Token() == 0 {
				return fail("in-flight task %d has no owner or token", t.ID)
			}
		case StateDead:
			_, found = q.Dead.Get(t.ID)
		case StateWaiting:
			_, found = q.Waiting.Get(t.ID)
		case StateCompleted:
			_, found = q.Completed.Get(t.ID)
			if found {
				_, found = s.doneExp.Get(TimeItem{t.Updated(), t.ID})
			}
			if found {
				_, found = q.doneAt.Get(TimeItem{t.Updated(), t.ID})
			}
		}
		if x := t.Ex(); len(x.Errors) > MaxAttemptErrors {
			return fail("task %d remembers %d attempt errors", t.ID, len(x.Errors))
		}
		if !found {
			return fail("task %d (%s) missing from its index", t.ID, t.State)
		}
		return true
	})
	if err != nil {
		return err
	}
	doneTotal := 0
	for k, q := range s.queues {
		if q.Key != k {
			return fmt.Errorf("index: verify: queue %v filed under %v", q.Key, k)
		}
		c := counts[q]
		if c == nil {
			c = new([NumStates]int)
		}
		sizes := [NumStates]int{StateReady: q.Ready.Len(), StateScheduled: q.Scheduled.Len(),
			StateInFlight: q.InFlight.Len(), StateDead: q.Dead.Len(), StateCompleted: q.Completed.Len(),
			StateWaiting: q.Waiting.Len()}
		for st := StateReady; st <= StateWaiting; st++ {
			if c[st] != q.counts[st] || c[st] != sizes[st] {
				return fmt.Errorf("index: verify: queue %v %s: %d records, count %d, index %d",
					q.Key, st, c[st], q.counts[st], sizes[st])
			}
		}
		ok := func(int64, uint64, int64) bool { return true }
		switch {
		case q.dueSched.Len() != c[StateScheduled],
			q.dueRetry.Len()+q.lastTry.Len() != c[StateInFlight], q.dueDead.Len() != q.lastTry.Len(),
			q.doneAt.Len() != c[StateCompleted]:
			return fmt.Errorf("index: verify: queue %v: a time index holds a task twice or a stale one", q.Key)
		case !q.dueSched.check(ok) || !q.dueRetry.check(ok) || !q.dueDead.check(ok):
			return fmt.Errorf("index: verify: queue %v: a due tree is out of order", q.Key)
		}
		nSince := 0
		q.readySince.Scan(func(it sinceItem) bool {
			if it.N <= 0 || since[sinceKey{q, it.At}] != it.N {
				err = fmt.Errorf("index: verify: queue %v: %d ready since %d, counted %d", q.Key, since[sinceKey{q, it.At}], it.At, it.N)
			}
			nSince += it.N
			return err == nil
		})
		if err == nil && nSince != c[StateReady] {
			err = fmt.Errorf("index: verify: queue %v: %d ready, %d counted by time", q.Key, c[StateReady], nSince)
		}
		if err != nil {
			return err
		}
		if err := q.verifyParts(parted[q]); err != nil {
			return err
		}
		rec, found := s.totals.Get(QueueTotals{Queue: k})
		if found && (rec.Idle != 0 || rec.Totals != q.totals) || !found && q.totals != (Totals{}) {
			return fmt.Errorf("index: verify: queue %v: totals %+v, record %+v", q.Key, q.totals, rec)
		}
		doneTotal += c[StateCompleted]
	}
	idle := 0
	s.totals.Scan(func(r QueueTotals) bool {
		switch {
		case (s.queues[r.Queue] == nil) != (r.Idle != 0):
			err = fmt.Errorf("index: verify: totals of queue %v idle since %d", r.Queue, r.Idle)
		case r.Idle != 0:
			idle++
			if _, ok := s.idle.Get(idleItem{At: r.Idle, Queue: r.Queue}); !ok {
				err = fmt.Errorf("index: verify: idle totals of queue %v not in idle order", r.Queue)
			}
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	s.confs.Scan(func(c QueueConf) bool {
		err = c.check()
		return err == nil
	})
	if err != nil {
		return fmt.Errorf("index: verify: %w", err)
	}
	if idle != s.idle.Len() {
		return fmt.Errorf("index: verify: %d idle totals, %d in idle order", idle, s.idle.Len())
	}
	if doneTotal != s.doneExp.Len() {
		return fmt.Errorf("index: verify: %d completed tasks, %d in expiry order", doneTotal, s.doneExp.Len())
	}
	expiring := 0
	s.idem.Scan(func(e Idem) bool {
		if e.Expires != 0 {
			expiring++
			if _, ok := s.idemExp.Get(idemExpItem{At: e.Expires, Queue: e.Queue, Key: e.Key}); !ok {
				return fail("idempotency key %q missing from expiry order", e.Key)
			}
		}
		return true
	})
	if err == nil && expiring != s.idemExp.Len() {
		err = fmt.Errorf("index: verify: %d expiring idempotency keys, %d in expiry order", expiring, s.idemExp.Len())
	}
	if err == nil {
		err = s.verifyDeps()
	}
	if err == nil {
		err = s.verifyBuckets()
	}
	if err == nil {
		err = s.verifyUsage()
	}
	return err
}

// nonEmpty normalises an empty byte slice to nil, so that nil and empty are
// one value in memory as they are in the encoding.
func nonEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// TasksFrom calls fn with the tasks of every queue in id order from id
// from on (ascending, from included), or down from it (desc), until fn
// returns false.
func (s *Store) TasksFrom(from uint64, desc bool, fn func(*Task) bool) {
	pivot := &Task{ID: from} // fn may look tasks up, which moves s.pivot
	if desc {
		s.tasks.Descend(pivot, fn)
		return
	}
	s.tasks.Ascend(pivot, fn)
}
