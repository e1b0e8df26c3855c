package fuzz

import (
	"fmt"
	"maps"
	"slices"

	"github.com/docketdb/docket/engine"
)

// RunNow is Queue.RunNow: a scheduled task (a timer, or a retry waiting
// out its backoff) becomes ready now, in one commit; a task ready as of
// now is left as it is (no commit); a task in flight, waiting, dead or
// completed is refused as invalid.
func (m *Model) RunNow(q QueueKey, id uint64) error {
	if err := checkQueue(q); err != nil {
		return err
	}
	x := m.begin()
	stored, ok := m.tasks[id]
	var t *Rec
	if ok && stored.Queue == q {
		t = m.at(stored)
	}
	if t == nil {
		return fmt.Errorf("%w: task %d", engine.ErrNotFound, id)
	}
	switch t.State {
	case engine.Ready:
		return nil
	case engine.Scheduled:
		n := *stored
		n.State, n.NotBefore, n.Updated = engine.Ready, x.now, x.now
		x.put(&n)
		x.commit()
		return nil
	}
	return fmt.Errorf("%w: task %d is %s", engine.ErrInvalid, id, t.State)
}

// Reschedule is Queue.Reschedule: a ready, scheduled or waiting task (as
// of now) gets the new due time (ready now if it is not after now; a
// waiting task keeps waiting) and priority, in one commit. Nothing to
// change or a time outside the years 1970-9999 is invalid; a task in
// flight, dead or completed is a conflict. An expired lease's failed
// attempt is recorded first, as a claim records it.
func (m *Model) Reschedule(q QueueKey, id uint64, r engine.Reschedule) error {
	if err := checkQueue(q); err != nil {
		return err
	}
	at := int64(0)
	if !r.At.IsZero() {
		if y := r.At.Year(); y < 1970 || y > 9999 || r.At.UnixMicro() <= 0 {
			return invalid("reschedule at")
		}
		at = r.At.UnixMicro()
	}
	if at == 0 && r.Priority == nil {
		return invalid("reschedule: nothing to change")
	}
	x := m.begin()
	stored, ok := m.tasks[id]
	var t *Rec
	if ok && stored.Queue == q {
		t = m.at(stored)
	}
	if t == nil {
		return fmt.Errorf("%w: task %d", engine.ErrNotFound, id)
	}
	switch t.State {
	case engine.Ready, engine.Scheduled, engine.Waiting:
	default:
		return fmt.Errorf("%w: task %d is %s", engine.ErrConflict, id, t.State)
	}
	if stored.State == engine.InFlight {
		x.count(q, func(t *engine.Totals) { t.Retried++ })
	}
	n := *t
	if at != 0 {
		n.NotBefore = at
		if n.State != engine.Waiting {
			n.State = engine.Scheduled
			if at <= x.now {
				n.State, n.NotBefore = engine.Ready, x.now
			}
		}
	}
	if r.Priority != nil {
		n.Priority = *r.Priority
	}
	n.Updated = x.now
	x.put(&n)
	x.commit()
	return nil
}

// CompleteBatch is Queue.CompleteBatch: plain completions (no result, ops
// or follow-ups) in one commit, every lease fenced on its own (one whose
// task appears earlier in the batch is refused). It returns one error per
// lease.
func (m *Model) CompleteBatch(q QueueKey, ls []engine.Lease) ([]error, error) {
	if len(ls) > engine.MaxBatch {
		return nil, invalid("batch")
	}
	if err := checkQueue(q); err != nil {
		return nil, err
	}
	for _, l := range ls {
		if err := ownLease(q, l); err != nil {
			return nil, err
		}
	}
	x := m.begin()
	errs := make([]error, len(ls))
	seen := map[uint64]bool{}
	for i, l := range ls {
		if seen[l.ID] {
			errs[i] = fmt.Errorf("%w: task %d twice", engine.ErrLeaseLost, l.ID)
			continue
		}
		seen[l.ID] = true
		errs[i] = x.complete(q, l, nil, nil)
	}
	x.commit()
	return errs, nil
}

// Partitions is Queue.Partitions, every page of it: nothing while no task
// of q names a partition; else, in key order, every partition ("" the
// tasks that name none) holding a stored task, with its tasks by state as
// of now. Unlike Counts, a retained completion past its retention and not
// yet removed still counts, as Completed: the engine counts the records a
// partition holds.
func (m *Model) Partitions(q QueueKey) []engine.PartitionInfo {
	if !m.partitioned(q) {
		return nil
	}
	by := map[string]*engine.Counts{}
	for _, t := range m.tasks {
		if t.Queue != q {
			continue
		}
		c := by[t.Partition]
		if c == nil {
			c = &engine.Counts{}
			by[t.Partition] = c
		}
		st := t.State
		if e := m.at(t); e != nil {
			st = e.State
		}
		switch st {
		case engine.Ready:
			c.Ready++
		case engine.Scheduled:
			c.Scheduled++
		case engine.InFlight:
			c.InFlight++
		case engine.Dead:
			c.Dead++
		case engine.Completed:
			c.Completed++
		case engine.Waiting:
			c.Waiting++
		}
	}
	keys := slices.Sorted(maps.Keys(by))
	out := make([]engine.PartitionInfo, 0, len(keys))
	for _, k := range keys {
		out = append(out, engine.PartitionInfo{Key: k, Counts: *by[k]})
	}
	return out
}
