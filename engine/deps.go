package engine

import "slices"

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

// checkSiblings checks that every task a call enqueues (specs, then the
// Enqueue ops of ops) depends only on siblings that come before it.
func checkSiblings(specs []spec, ops []vop) error {
	pos := 0
	check := func(s *spec) error {
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
		if ops[i].Kind == OpEnqueue {
			if err := check(&ops[i].Spec); err != nil {
				return err
			}
		}
	}
	return nil
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
