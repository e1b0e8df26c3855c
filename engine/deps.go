package engine

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
