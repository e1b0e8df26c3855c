package engine

// Syncs reports whether Wait, called now, would wait for an fsync of the
// log: a commit was deferred to d on a DB that syncs each commit
// (SyncAlways). Otherwise Wait returns at once (nothing deferred) or once
// the log is written to the OS, which a caller may as well do itself than
// hand to another goroutine.
func (d *Deferred) Syncs() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.c != nil && (d.seq != 0 || d.reports != nil) && d.c.opts.Durability == SyncAlways
}
