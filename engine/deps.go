package engine

import (
	"fmt"
	"slices"

	"github.com/docketdb/docket/internal/index"
)

// DependencyPolicy says what a waiting task does when a task it depends on
// is dead-lettered or cancelled.
//
// A task enqueued with Task.DependsOn (ids) or Task.DependsOnSibling
// (earlier tasks of the same call) waits, in state Waiting, until every
// task it depends on has completed; it is then ready, or scheduled when
// its Delay or At (counted from the enqueue) has not come yet. Tasks of
// any queue of the namespace can depend on each other. Each dependency is
// a record of its own (index.Dep), indexed by parent and by dependent, and
// the index counts how many parents each waiting task still waits for: a
// parent's completion touches its dependents only (one record deleted
// each, and an update for those it releases), and a task waiting on
// thousands of parents is released by the one completion that brings its
// count to zero, without a rescan.
//
// At enqueue, each id is resolved against the state of the commit:
//
//   - an id no task has ever had (at or past the next id) is ErrInvalid;
//   - an id no task has now (it completed and was deleted, was cancelled,
//     or its retained completion was forgotten) counts as completed, as
//     does the id of a task of another namespace (to this namespace it is
//     a task that does not exist), a retained completed task, and the task
//     the commit itself completes (a follow-up depending on its parent);
//   - a task dead at the time of the commit follows the policy: with
//     CancelOnFailure the enqueue is refused with ErrConflict (nothing of
//     the commit is applied), with WaitOnFailure the task waits for it to be
//     redriven and complete, with RunOnFailure it counts as done;
//   - any other task (waiting, ready, scheduled, in flight, or enqueued
//     earlier in the same commit) is waited for.
//
// A task whose dependencies are all satisfied at enqueue is enqueued as if
// it had none. Repeated ids are waited for once. A deduplicated enqueue
// (an idempotency key, or Unique content) changes nothing, dependencies
// included: the task it names keeps its own, and a sibling reference to
// the duplicate stands for that task. A unique task that is waiting blocks
// its content whatever its Unique.States. Because a task
// can only depend on tasks that exist before it, dependencies never form a
// cycle.
//
// When a task a waiting task depends on is dead-lettered or cancelled, the
// waiting task follows its OnParentFailure: CancelOnFailure cancels it, and
// its own dependents follow theirs in turn (in the same commit); with
// WaitOnFailure it keeps waiting for a dead parent (Redrive it, and its
// completion releases the dependents) but is cancelled with a cancelled
// one, which can never complete; with RunOnFailure the failed parent counts
// as done. Time alone kills a task whose last lease expires: the commit
// that stores that death applies the policies, and every commit first
// stores the deaths of tasks others wait for (housekeeping), so their
// dependents follow without waiting for a claim on the dead task's queue.
//
// A released task is ready like any other: on a paused queue no claim
// leases it until Resume (a ClaimWait parked there is not woken by the
// release), and the queue's in-flight bound and rate limit count it as
// they count every task.
type DependencyPolicy uint8

// Dependency policies. Part of the log's format: do not renumber.
const (
	// CancelOnFailure cancels the waiting task, and, in turn, the tasks
	// that wait for it by their own policies. The default.
	CancelOnFailure DependencyPolicy = iota
	// WaitOnFailure keeps the task waiting for a dead parent, until the
	// parent is redriven and completes (or is cancelled, which cancels the
	// task).
	WaitOnFailure
	// RunOnFailure counts a dead or cancelled parent as done.
	RunOnFailure
)

var policyNames = [...]string{"cancel", "wait", "run"}

func (p DependencyPolicy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return "invalid"
}

// ParsePolicy returns the policy its String names.
func ParsePolicy(s string) (DependencyPolicy, error) {
	if i := slices.Index(policyNames[:], s); i >= 0 {
		return DependencyPolicy(i), nil
	}
	return 0, invalid("dependency policy %q (want cancel, wait or run)", s)
}

// MaxDependencies bounds the tasks one task depends on (DependsOn and
// DependsOnSibling together).
const MaxDependencies = 10_000

// checkDeps validates t's dependencies into s: ids sorted without
// repeats, sibling positions likewise (checkSiblings checks that they
// come earlier), and the policy.
func checkDeps(t *Task, s *spec) error {
	if n := len(t.DependsOn) + len(t.DependsOnSibling); n > MaxDependencies {
		return invalid("%d dependencies, over the limit of %d", n, MaxDependencies)
	}
	if t.OnParentFailure > RunOnFailure {
		return invalid("dependency policy %d", t.OnParentFailure)
	}
	s.policy = uint8(t.OnParentFailure)
	if len(t.DependsOn) > 0 {
		s.deps = slices.Clone(t.DependsOn)
		slices.Sort(s.deps)
		s.deps = slices.Compact(s.deps)
		if s.deps[0] == 0 {
			return invalid("depends on task 0")
		}
		s.size += 8 * len(s.deps)
	}
	if len(t.DependsOnSibling) > 0 {
		s.sibs = slices.Clone(t.DependsOnSibling)
		slices.Sort(s.sibs)
		s.sibs = slices.Compact(s.sibs)
		if s.sibs[0] < 0 {
			return invalid("depends on sibling %d", s.sibs[0])
		}
		s.size += 8 * len(s.sibs)
	}
	return nil
}

// checkSiblings checks that every task a call enqueues (specs, then the
// Enqueue ops of ops) depends only on siblings that come before it.
func checkSiblings(specs []spec, ops []vop) error {
	pos := 0
	check := func(s *spec) error {
		if n := len(s.sibs); n > 0 && s.sibs[n-1] >= pos {
			return invalid("task %d of the call depends on sibling %d, which does not come before it", pos, s.sibs[n-1])
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
		if ops[i].kind == OpEnqueue {
			if err := check(&ops[i].spec); err != nil {
				return err
			}
		}
	}
	return nil
}

// depEnd is how a task others wait for ended.
type depEnd uint8

const (
	parentCompleted depEnd = iota
	parentCancelled
	parentDied
)

// depPlan is what the batch being planned does to dependencies.
type depPlan struct {
	cut  map[index.Dep]struct{} // dependencies the batch deletes
	gone map[uint64]int         // per waiting task, how many of its dependencies the batch deletes
	work []depWork              // ended tasks whose dependents are still to be decided
	// parents is scratch for the parents of the task being enqueued.
	parents []uint64
}

type depWork struct {
	id  uint64
	how depEnd
}

func (d *depPlan) reset() {
	if len(d.cut) > 0 {
		clear(d.cut)
		clear(d.gone)
	}
	d.work = d.work[:0]
}

// dependencies resolves what a task enqueued into namespace ins with s
// waits for (see the rules above), into a sorted list without repeats
// that is valid until the next call.
func (p *planner) dependencies(ins index.Namespace, s *spec) ([]uint64, error) {
	out := p.deps.parents[:0]
	add := func(id uint64) error {
		wait, err := p.dependency(ins, id, DependencyPolicy(s.policy))
		if wait {
			out = append(out, id)
		}
		return err
	}
	for _, id := range s.deps {
		if err := add(id); err != nil {
			return nil, err
		}
	}
	for _, i := range s.sibs {
		if i >= len(p.sibs) {
			return nil, invalid("depends on sibling %d of %d earlier tasks of the call", i, len(p.sibs))
		}
		if err := add(p.sibs[i]); err != nil {
			return nil, err
		}
	}
	if len(s.sibs) > 0 {
		slices.Sort(out)
		out = slices.Compact(out)
	}
	p.deps.parents = out
	return out, nil
}

// dependency resolves one id: whether to wait for it.
func (p *planner) dependency(ins index.Namespace, id uint64, policy DependencyPolicy) (bool, error) {
	switch {
	case id >= p.nextID:
		return false, invalid("depends on task %d, which does not exist (ids so far end at %d)", id, p.nextID-1)
	case id >= p.c.store.NextID():
		return true, nil // enqueued earlier in this batch
	case id == p.parent:
		return false, nil // completed by this batch
	}
	t, ok := p.c.store.Task(id)
	if !ok || t.Queue.Key.Namespace != ins {
		return false, nil // ended, or not this namespace's: counts as completed
	}
	switch t.StateAt(p.now) {
	case index.StateCompleted:
		return false, nil
	case index.StateDead:
		switch policy {
		case WaitOnFailure:
			return true, nil
		case RunOnFailure:
			return false, nil
		}
		return false, fmt.Errorf("%w: depends on task %d, which is dead (policy %s)", ErrConflict, id, CancelOnFailure)
	}
	return true, nil
}

// parentEnded plans what the end of task id does to the tasks waiting for
// it, and what their ends do in turn, breadth first. A task that waits
// for nobody costs one lookup.
func (p *planner) parentEnded(id uint64, how depEnd) {
	st := p.c.store
	if !st.HasDependents(id) {
		return
	}
	d := &p.deps
	d.work = append(d.work[:0], depWork{id, how})
	for i := 0; i < len(d.work); i++ {
		w := d.work[i]
		st.Dependents(w.id, 0, func(child uint64) bool {
			dep := index.Dep{Parent: w.id, Child: child}
			if _, done := d.cut[dep]; done {
				return true
			}
			c, _ := st.Task(child)
			switch pol := DependencyPolicy(c.Ex().DepPolicy); {
			case w.how == parentCompleted || pol == RunOnFailure:
				p.cutDep(dep)
				if d.gone[child] == st.Waits(child) {
					p.wake(c)
				}
			case w.how == parentDied && pol == WaitOnFailure:
				// Waits for a redrive of the parent.
			default:
				p.cutWaits(child)
				p.put(index.Mutation{Kind: index.MutDeleteTask, Update: index.TaskUpdate{ID: child}})
				p.ended(c)
				p.event(EvCancelled, c.Queue.Key, 0)
				d.work = append(d.work, depWork{child, parentCancelled})
			}
			return true
		})
	}
	d.work = d.work[:0]
}

// cutDep plans deleting one dependency.
func (p *planner) cutDep(dep index.Dep) {
	d := &p.deps
	if d.cut == nil {
		d.cut = make(map[index.Dep]struct{})
		d.gone = make(map[uint64]int)
	}
	d.cut[dep] = struct{}{}
	d.gone[dep.Child]++
	p.put(index.Mutation{Kind: index.MutDeleteDep, Dep: dep})
}

// cutWaits plans deleting the dependencies of a waiting task that is
// going away.
func (p *planner) cutWaits(child uint64) {
	p.c.store.WaitingOn(child, func(parent uint64) bool {
		dep := index.Dep{Parent: parent, Child: child}
		if _, done := p.deps.cut[dep]; !done {
			p.cutDep(dep)
		}
		return true
	})
}

// wake plans the release of a waiting task whose last dependency the batch
// deletes: ready now, or scheduled for its time.
func (p *planner) wake(t *index.Task) {
	u := index.UpdateOf(t)
	u.Updated = p.now
	u.State = index.StateScheduled
	if t.NotBefore <= p.now {
		u.State, u.NotBefore = index.StateReady, p.now
	}
	p.update(u)
}

// killExpiredParents plans storing the death of tasks others wait for
// whose last lease expired at or before now, at most max of them, and the
// policies of their dependents; it returns how many it stored.
func (p *planner) killExpiredParents(max int) int {
	n := 0
	p.c.store.ExpiredParents(p.now, func(id uint64) bool {
		t, _ := p.c.store.Task(id)
		u, _ := settled(t, p.now)
		p.update(u)
		p.event(EvDead, t.Queue.Key, 0)
		p.parentEnded(id, parentDied)
		n++
		return n < max
	})
	return n
}

// depInfo fills in what task info waits for and, when dependents is set,
// which tasks wait for it. Call with mu held.
func (c *core) depInfo(info *TaskInfo, dependents bool) {
	if info.State == Waiting {
		info.WaitingOn = make([]uint64, 0, c.store.Waits(info.ID))
		c.store.WaitingOn(info.ID, func(parent uint64) bool {
			info.WaitingOn = append(info.WaitingOn, parent)
			return true
		})
	}
	if dependents {
		c.store.Dependents(info.ID, 0, func(child uint64) bool {
			info.Dependents = append(info.Dependents, child)
			return len(info.Dependents) < MaxBatch
		})
	}
}
