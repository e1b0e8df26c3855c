package engine

import (
	"fmt"
	"slices"

	"github.com/docketdb/docket/internal/index"
)

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
