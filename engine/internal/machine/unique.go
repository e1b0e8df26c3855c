package machine

import (
	"github.com/docketdb/docket/internal/index"
)

// blocks reports whether the idempotency entry e, found for a new task's
// key at the plan's time, deduplicates the new task. A caller's key always
// does (while the entry lasts). A unique-by-content key does while its
// task is waiting for its dependencies (a state no entry names, so that
// the entries and commands of the versions before dependencies still
// read) or in one of the entry's states; a task that has left the store
// completed (a cancelled one takes its entry with it, see endedUnique).
func (p *Planner) blocks(e *index.Idem) bool {
	if e.States == 0 {
		return true
	}
	t, ok := p.s.Store.Task(e.ID)
	if !ok {
		return true
	}
	st := t.StateAt(p.now)
	return st == index.StateWaiting || e.Blocks(st)
}

// endedUnique plans what happens to the unique-by-content entry e of t as
// t ends: kept for the rest of its window when t completes and completed
// tasks block, deleted otherwise (a cancellation, or a completion that
// does not block), so that the same content may be enqueued again at once.
// A completion is the one whose task the plan is completing (p.parent).
func (p *Planner) endedUnique(t *index.Task, e index.Idem) {
	if p.parent == t.ID && e.Blocks(index.StateCompleted) {
		return
	}
	p.put(index.Mutation{Kind: index.MutDeleteIdem, Idem: e})
}
