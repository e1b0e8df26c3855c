package fuzz

import (
	"fmt"
	"slices"

	"github.com/docketdb/docket/engine"
)

// Dependencies, as the model sees them: a set of (parent, child) pairs and
// a scan wherever the engine keeps an index. The rules are engine/deps.go's.

type depKey struct{ Parent, Child uint64 }

// checkDeps validates a task's dependencies into s.
func checkDeps(t engine.Task, s *spec) error {
	if len(t.DependsOn)+len(t.DependsOnSibling) > engine.MaxDependencies {
		return invalid("dependencies")
	}
	if t.OnParentFailure > engine.RunOnFailure {
		return invalid("policy")
	}
	for _, id := range t.DependsOn {
		if id == 0 {
			return invalid("depends on 0")
		}
	}
	for _, i := range t.DependsOnSibling {
		if i < 0 {
			return invalid("negative sibling")
		}
	}
	s.deps = slices.Compact(slices.Sorted(slices.Values(t.DependsOn)))
	s.sibs = slices.Compact(slices.Sorted(slices.Values(t.DependsOnSibling)))
	return nil
}

// checkSiblings requires every task a call enqueues (tasks, then the
// enqueues of ops) to depend only on siblings before it.
func checkSiblings(tasks []engine.Task, ops []TxOp) error {
	pos := 0
	check := func(t engine.Task) error {
		for _, i := range t.DependsOnSibling {
			if i >= pos {
				return invalid("sibling %d of task %d", i, pos)
			}
		}
		pos++
		return nil
	}
	for _, t := range tasks {
		if err := check(t); err != nil {
			return err
		}
	}
	for _, o := range ops {
		if o.Kind == TxEnqueue {
			if err := check(o.Task); err != nil {
				return err
			}
		}
	}
	return nil
}

// parentsOf resolves what a task enqueued into namespace ns with s waits
// for, sorted.
func (x *txn) parentsOf(ns engine.Namespace, s *spec) ([]uint64, error) {
	m := x.m
	var out []uint64
	ids := slices.Clone(s.deps)
	for _, i := range s.sibs {
		if i >= len(x.sibs) {
			return nil, invalid("sibling %d", i)
		}
		ids = append(ids, x.sibs[i])
	}
	for _, id := range ids {
		switch {
		case id >= x.nextID:
			return nil, invalid("depends on task %d, which does not exist", id)
		case id >= m.NextID:
			out = append(out, id)
			continue
		case id == x.parent:
			continue
		}
		t, ok := m.tasks[id]
		if !ok || t.Queue.NS != ns {
			continue
		}
		e := m.at(t)
		switch {
		case e == nil || e.State == engine.Completed:
		case e.State == engine.Dead && s.t.OnParentFailure == engine.CancelOnFailure:
			return nil, fmt.Errorf("%w: depends on dead task %d", engine.ErrConflict, id)
		case e.State == engine.Dead && s.t.OnParentFailure == engine.RunOnFailure:
		default:
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// children are the tasks waiting on id, by id, as the commit found them.
func (m *Model) children(id uint64) []uint64 {
	var out []uint64
	for d := range m.deps {
		if d.Parent == id {
			out = append(out, d.Child)
		}
	}
	slices.Sort(out)
	return out
}

// waitingOn are the tasks id waits for, by id.
func (m *Model) waitingOn(id uint64) []uint64 {
	var out []uint64
	for d := range m.deps {
		if d.Child == id {
			out = append(out, d.Parent)
		}
	}
	slices.Sort(out)
	return out
}

type depEnd uint8

const (
	parentCompleted depEnd = iota
	parentCancelled
	parentDied
)

// cutDep deletes a dependency as part of the commit.
func (x *txn) cutDep(d depKey) {
	if x.cut == nil {
		x.cut = map[depKey]bool{}
	}
	x.cut[d] = true
	m := x.m
	x.mut(func(uint64) { delete(m.deps, d) })
}

// cutWaits deletes what a going waiting task waits for.
func (x *txn) cutWaits(child uint64) {
	for _, p := range x.m.waitingOn(child) {
		if d := (depKey{p, child}); !x.cut[d] {
			x.cutDep(d)
		}
	}
}

// parentEnded applies the policies of the tasks waiting on id, and of the
// tasks waiting on those it cancels, breadth first.
func (x *txn) parentEnded(id uint64, how depEnd) {
	m := x.m
	type work struct {
		id  uint64
		how depEnd
	}
	todo := []work{{id, how}}
	for i := 0; i < len(todo); i++ {
		w := todo[i]
		for _, c := range m.children(w.id) {
			d := depKey{w.id, c}
			if x.cut[d] {
				continue
			}
			t := m.tasks[c]
			switch {
			case w.how == parentCompleted || t.Policy == engine.RunOnFailure:
				x.cutDep(d)
				left := 0
				for _, p := range m.waitingOn(c) {
					if !x.cut[depKey{p, c}] {
						left++
					}
				}
				if left == 0 {
					n := *t
					n.Updated = x.now
					n.State = engine.Scheduled
					if t.NotBefore <= x.now {
						n.State, n.NotBefore = engine.Ready, x.now
					}
					x.put(&n)
				}
			case w.how == parentDied && t.Policy == engine.WaitOnFailure:
			default:
				x.cutWaits(c)
				x.del(c)
				x.ended(t)
				todo = append(todo, work{c, parentCancelled})
			}
		}
	}
}

// killExpiredParents is the housekeeping of tasks others wait for whose
// last lease expired: stored dead (at most housekeepBatch, in deadline
// order), their dependents following their policies.
func (x *txn) killExpiredParents() {
	m := x.m
	var dying []*Rec
	for _, t := range m.tasks {
		if t.State == engine.InFlight && t.Attempts >= t.MaxAttempts && t.LeaseUntil <= x.now && len(m.children(t.ID)) > 0 {
			dying = append(dying, t)
		}
	}
	slices.SortFunc(dying, func(a, b *Rec) int {
		if a.LeaseUntil != b.LeaseUntil {
			return cmpInt(a.LeaseUntil, b.LeaseUntil)
		}
		return cmpInt(a.ID, b.ID)
	})
	for _, t := range dying[:min(len(dying), housekeepBatch)] {
		x.put(m.at(t))
		x.count(t.Queue, func(t *engine.Totals) { t.DeadLettered++ })
		x.parentEnded(t.ID, parentDied)
	}
}

// withDeps returns r with what it waits for and, when dependents is set,
// what waits for it (at most MaxBatch), as Get and List report them.
func (m *Model) withDeps(r Rec, dependents bool) Rec {
	if r.State == engine.Waiting {
		r.WaitingOn = m.waitingOn(r.ID)
	}
	if dependents {
		kids := m.children(r.ID)
		r.Dependents = kids[:min(len(kids), engine.MaxBatch)]
	}
	return r
}
