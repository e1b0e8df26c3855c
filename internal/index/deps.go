package index

import (
	"fmt"

	"github.com/tidwall/btree"
)

// Dep is one dependency: task Child waits for task Parent. Dependencies are
// primary records (MutPutDep and MutDeleteDep in a batch, RecDep in a
// snapshot), so that a task waiting on many others costs one small record
// per parent, and a parent's completion deletes one record per dependent,
// never rewriting the waiting task's record.
//
// The state machine holds these invariants, and Verify checks them: the
// child of every Dep exists and is StateWaiting, its parent exists and is
// not StateCompleted, and a task is StateWaiting exactly while it is the
// child of at least one Dep. Planning keeps them: it puts a Dep only for
// a parent that has not completed, and deletes a parent's Deps in the
// batch that completes or removes it.
type Dep struct {
	Parent, Child uint64
}

func depLess(a, b Dep) bool {
	if a.Parent != b.Parent {
		return a.Parent < b.Parent
	}
	return a.Child < b.Child
}

func depChildLess(a, b Dep) bool {
	if a.Child != b.Child {
		return a.Child < b.Child
	}
	return a.Parent < b.Parent
}

// depIndex holds the dependencies: the primary records by parent, and
// what is derived from them.
type depIndex struct {
	byParent *btree.BTreeG[Dep] // primary
	byChild  *btree.BTreeG[Dep]
	waits    map[uint64]int // child → how many parents it still waits for
	// expiring holds the parents in flight on their last attempt, by
	// lease deadline: when the lease expires such a task is dead, and its
	// dependents must follow their policy even if nobody claims its queue
	// again (see ExpiredParents).
	expiring *btree.BTreeG[TimeItem]
	// nWaiting counts the tasks in StateWaiting, so that "every waiting
	// task waits for something" is one comparison with len(waits).
	nWaiting int
	// touched are the tasks the current Apply changed, whose dependencies
	// it checks at the end (checkTouched).
	touched []uint64
}

func newDepIndex() depIndex {
	return depIndex{
		byParent: btree.NewBTreeGOptions(depLess, noLocks),
		byChild:  btree.NewBTreeGOptions(depChildLess, noLocks),
		waits:    make(map[uint64]int),
		expiring: btree.NewBTreeGOptions(timeLess, noLocks),
	}
}

// Waits is how many tasks the task child still waits for (0 when it is not
// waiting), in O(1).
func (s *Store) Waits(child uint64) int { return s.deps.waits[child] }

// NumDeps is the number of dependency records.
func (s *Store) NumDeps() int { return s.deps.byParent.Len() }

// HasDependents reports whether a task waits for parent, in O(log n).
func (s *Store) HasDependents(parent uint64) bool {
	found := false
	s.deps.byParent.Ascend(Dep{Parent: parent}, func(d Dep) bool {
		found = d.Parent == parent
		return false
	})
	return found
}

// Dependents calls fn, in id order, for the tasks that wait for parent,
// from child id from on, until fn returns false. It costs O(log n) plus
// O(1) per task reported.
func (s *Store) Dependents(parent, from uint64, fn func(child uint64) bool) {
	s.deps.byParent.Ascend(Dep{Parent: parent, Child: from}, func(d Dep) bool {
		return d.Parent == parent && fn(d.Child)
	})
}

// WaitingOn calls fn, in id order, for the tasks child still waits for,
// until fn returns false.
func (s *Store) WaitingOn(child uint64, fn func(parent uint64) bool) {
	s.deps.byChild.Ascend(Dep{Child: child}, func(d Dep) bool {
		return d.Child == child && fn(d.Parent)
	})
}

// ExpiredParents calls fn, in deadline order, for the tasks that others
// wait for whose lease expired at or before now on their last attempt
// (dead at now, stored in flight), until fn returns false.
func (s *Store) ExpiredParents(now int64, fn func(id uint64) bool) {
	s.deps.expiring.Scan(func(it TimeItem) bool {
		return it.At <= now && fn(it.ID)
	})
}

// expiringParent reports whether t belongs in the expiring order, given
// whether a task waits for it.
func expiringParent(t *Task, hasDependents bool) bool {
	return hasDependents && t.State == StateInFlight && t.lastTry()
}

// putDep applies a MutPutDep.
func (s *Store) putDep(d Dep) error {
	c, ok := s.Task(d.Child)
	if !ok || c.State != StateWaiting || d.Parent == d.Child {
		return fmt.Errorf("%w: dependency of %d on %d: the dependent is not a waiting task", ErrCorrupt, d.Child, d.Parent)
	}
	p, ok := s.Task(d.Parent)
	if !ok || p.State == StateCompleted {
		return fmt.Errorf("%w: dependency of %d on %d: no such task to wait for", ErrCorrupt, d.Child, d.Parent)
	}
	first := !s.HasDependents(d.Parent)
	if _, dup := s.deps.byParent.Set(d); dup {
		return fmt.Errorf("%w: dependency of %d on %d twice", ErrCorrupt, d.Child, d.Parent)
	}
	s.deps.byChild.Set(d)
	s.useDep(1)
	s.deps.waits[d.Child]++
	if first && expiringParent(p, true) {
		s.deps.expiring.Set(TimeItem{p.LeaseUntil(), p.ID})
	}
	return nil
}

// deleteDep applies a MutDeleteDep.
func (s *Store) deleteDep(d Dep) error {
	if _, ok := s.deps.byParent.Delete(d); !ok {
		return fmt.Errorf("%w: delete of missing dependency of %d on %d", ErrCorrupt, d.Child, d.Parent)
	}
	s.deps.byChild.Delete(d)
	s.useDep(-1)
	if n := s.deps.waits[d.Child] - 1; n > 0 {
		s.deps.waits[d.Child] = n
	} else {
		delete(s.deps.waits, d.Child)
	}
	if p, ok := s.Task(d.Parent); ok && !s.HasDependents(d.Parent) {
		s.deps.expiring.Delete(TimeItem{p.LeaseUntil(), p.ID})
	}
	return nil
}

// indexParent and unindexParent keep the expiring order as a task record
// changes.
func (s *Store) indexParent(t *Task) {
	if t.State == StateInFlight && t.lastTry() && s.HasDependents(t.ID) {
		s.deps.expiring.Set(TimeItem{t.LeaseUntil(), t.ID})
	}
}

func (s *Store) unindexParent(t *Task) {
	if t.State == StateInFlight && t.lastTry() && s.deps.expiring.Len() > 0 {
		s.deps.expiring.Delete(TimeItem{t.LeaseUntil(), t.ID})
	}
}

// LoadDep adds a dependency record during a restore, after the tasks.
func (s *Store) LoadDep(d Dep) error { return s.putDep(d) }

// Loaded checks, once every record of a restore is loaded, that every
// waiting task waits for something (its dependency records come after the
// task records, so no single Load can tell).
func (s *Store) Loaded() error {
	if s.deps.nWaiting != len(s.deps.waits) {
		return fmt.Errorf("%w: %d waiting tasks, %d with dependencies", ErrCorrupt, s.deps.nWaiting, len(s.deps.waits))
	}
	return nil
}

// checkTouched checks, at the end of an Apply, the dependency invariants
// (see Dep) for the tasks the batch changed: each mutation may leave them
// broken for a moment (a release deletes a task's last dependency before
// it updates the task), the batch as a whole must not. It costs nothing
// while no task waits.
func (s *Store) checkTouched() error {
	touched := s.deps.touched
	s.deps.touched = touched[:0]
	if s.deps.nWaiting == 0 && s.deps.byParent.Len() == 0 {
		return nil
	}
	for _, id := range touched {
		t, ok := s.Task(id)
		switch {
		case s.deps.waits[id] > 0 && (!ok || t.State != StateWaiting):
			return fmt.Errorf("%w: task %d has dependencies but is not waiting", ErrCorrupt, id)
		case (!ok || t.State == StateCompleted) && s.HasDependents(id):
			return fmt.Errorf("%w: task %d is gone or completed but others wait for it", ErrCorrupt, id)
		}
	}
	return s.Loaded()
}

// verifyDeps checks the dependency records and what is derived from them.
func (s *Store) verifyDeps() error {
	var err error
	fail := func(format string, args ...any) bool {
		err = fmt.Errorf("index: verify: "+format, args...)
		return false
	}
	waits := map[uint64]int{}
	expiring := 0
	var last uint64
	s.deps.byParent.Scan(func(d Dep) bool {
		c, ok := s.Task(d.Child)
		if !ok || c.State != StateWaiting {
			return fail("dependency of %d on %d: the dependent is not waiting", d.Child, d.Parent)
		}
		p, ok := s.Task(d.Parent)
		if !ok || p.State == StateCompleted {
			return fail("dependency of %d on %d: the parent is gone or completed", d.Child, d.Parent)
		}
		if _, ok := s.deps.byChild.Get(d); !ok {
			return fail("dependency of %d on %d missing from the by-child order", d.Child, d.Parent)
		}
		waits[d.Child]++
		if d.Parent != last && expiringParent(p, true) {
			expiring++
			if _, ok := s.deps.expiring.Get(TimeItem{p.LeaseUntil(), p.ID}); !ok {
				return fail("task %d has dependents and is on its last lease but not in the expiring order", p.ID)
			}
		}
		last = d.Parent
		return true
	})
	switch {
	case err != nil:
		return err
	case s.deps.byChild.Len() != s.deps.byParent.Len():
		return fmt.Errorf("index: verify: %d dependencies, %d in the by-child order", s.deps.byParent.Len(), s.deps.byChild.Len())
	case expiring != s.deps.expiring.Len():
		return fmt.Errorf("index: verify: %d expiring parents, %d in the expiring order", expiring, s.deps.expiring.Len())
	case len(waits) != len(s.deps.waits):
		return fmt.Errorf("index: verify: %d waiting tasks have dependencies, %d counted", len(waits), len(s.deps.waits))
	}
	for id, n := range waits {
		if s.deps.waits[id] != n {
			return fmt.Errorf("index: verify: task %d waits for %d tasks, counted %d", id, n, s.deps.waits[id])
		}
	}
	nWaiting := 0
	s.tasks.Scan(func(t *Task) bool {
		if t.State == StateWaiting {
			nWaiting++
			if waits[t.ID] == 0 {
				return fail("task %d is waiting for nothing", t.ID)
			}
		}
		return true
	})
	if err == nil && nWaiting != s.deps.nWaiting {
		err = fmt.Errorf("index: verify: %d waiting tasks, counted %d", nWaiting, s.deps.nWaiting)
	}
	return err
}
