package machine

import (
	"fmt"
	"slices"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/internal/index"
)

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
func (p *Planner) dependencies(ins index.Namespace, s *Spec) ([]uint64, error) {
	out := p.deps.parents[:0]
	add := func(id uint64) error {
		wait, err := p.dependency(ins, id, dockettype.DependencyPolicy(s.Policy))
		if wait {
			out = append(out, id)
		}
		return err
	}
	for _, id := range s.Deps {
		if err := add(id); err != nil {
			return nil, err
		}
	}
	for _, i := range s.Sibs {
		if i >= len(p.sibs) {
			return nil, invalid("depends on sibling %d of %d earlier tasks of the call", i, len(p.sibs))
		}
		if err := add(p.sibs[i]); err != nil {
			return nil, err
		}
	}
	if len(s.Sibs) > 0 {
		slices.Sort(out)
		out = slices.Compact(out)
	}
	p.deps.parents = out
	return out, nil
}

// dependency resolves one id: whether to wait for it.
func (p *Planner) dependency(ins index.Namespace, id uint64, policy dockettype.DependencyPolicy) (bool, error) {
	switch {
	case id >= p.nextID:
		return false, invalid("depends on task %d, which does not exist (ids so far end at %d)", id, p.nextID-1)
	case id >= p.s.Store.NextID():
		return true, nil // enqueued earlier in this batch
	case id == p.parent:
		return false, nil // completed by this batch
	}
	t, ok := p.s.Store.Task(id)
	if !ok || t.Queue.Key.Namespace != ins {
		return false, nil // ended, or not this namespace's: counts as completed
	}
	switch t.StateAt(p.now) {
	case index.StateCompleted:
		return false, nil
	case index.StateDead:
		switch policy {
		case dockettype.WaitOnFailure:
			return true, nil
		case dockettype.RunOnFailure:
			return false, nil
		}
		return false, fmt.Errorf("%w: depends on task %d, which is dead (policy %s)", dockettype.ErrConflict, id, dockettype.CancelOnFailure)
	}
	return true, nil
}

// parentEnded plans what the end of task id does to the tasks waiting for
// it, and what their ends do in turn, breadth first. A task that waits
// for nobody costs one lookup.
func (p *Planner) parentEnded(id uint64, how depEnd) {
	st := p.s.Store
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
			switch pol := dockettype.DependencyPolicy(c.Ex().DepPolicy); {
			case w.how == parentCompleted || pol == dockettype.RunOnFailure:
				p.cutDep(dep)
				if d.gone[child] == st.Waits(child) {
					p.wake(c)
				}
			case w.how == parentDied && pol == dockettype.WaitOnFailure:
				// Waits for a redrive of the parent.
			default:
				p.cutWaits(child)
				p.put(index.Mutation{Kind: index.MutDeleteTask, Update: index.TaskUpdate{ID: child}})
				p.ended(c)
				p.Event(dockettype.EvCancelled, c.Queue.Key, 0)
				d.work = append(d.work, depWork{child, parentCancelled})
			}
			return true
		})
	}
	d.work = d.work[:0]
}

// cutDep plans deleting one dependency.
func (p *Planner) cutDep(dep index.Dep) {
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
func (p *Planner) cutWaits(child uint64) {
	p.s.Store.WaitingOn(child, func(parent uint64) bool {
		dep := index.Dep{Parent: parent, Child: child}
		if _, done := p.deps.cut[dep]; !done {
			p.cutDep(dep)
		}
		return true
	})
}

// wake plans the release of a waiting task whose last dependency the batch
// deletes: ready now, or scheduled for its time.
func (p *Planner) wake(t *index.Task) {
	u := index.UpdateOf(t)
	u.Updated = p.now
	u.State = index.StateScheduled
	if t.NotBefore <= p.now {
		u.State, u.NotBefore = index.StateReady, p.now
	}
	p.update(u)
}

// KillExpiredParents plans storing the death of tasks others wait for
// whose last lease expired at or before now, at most max of them, and the
// policies of their dependents; it returns how many it stored.
func (p *Planner) KillExpiredParents(max int) int {
	n := 0
	p.s.Store.ExpiredParents(p.now, func(id uint64) bool {
		t, _ := p.s.Store.Task(id)
		u, _ := settled(t, p.now)
		p.update(u)
		p.Event(dockettype.EvDead, t.Queue.Key, 0)
		p.parentEnded(id, parentDied)
		n++
		return n < max
	})
	return n
}
