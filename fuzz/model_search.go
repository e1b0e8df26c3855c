package fuzz

import (
	"fmt"
	"slices"
	"strings"

	"github.com/docketdb/docket/engine"
)

func (x *txn) touch(id uint64) {
	if x.touched == nil {
		x.touched = map[uint64]bool{}
	}
	x.touched[id] = true
}

// bulkScan is the engine's bound on the records one bulk command walks
// (engine/search.go).
const bulkScan = 4096

// matches reports whether t (as at returns it) is selected by f, for the
// fields the fuzz programs use: states, retrying, kind, error text and ids.
func (m *Model) matches(f *engine.Filter, t *Rec) bool {
	retrying := t.State == engine.Scheduled && t.Attempts > 0 && t.LastError != ""
	return (len(f.States) == 0 || slices.Contains(f.States, t.State)) &&
		(f.Retrying != engine.OnlyRetrying || retrying) && (f.Retrying != engine.NotRetrying || !retrying) &&
		(f.Kind == "" || t.Kind == f.Kind) &&
		(f.Error == "" || strings.Contains(strings.ToLower(t.LastError), strings.ToLower(f.Error))) &&
		t.ID >= f.MinID && (f.MaxID == 0 || t.ID <= f.MaxID)
}

// Search is Queue.Search with Count, over the fields matches reads: the
// ids selected, oldest first.
func (m *Model) Search(q QueueKey, f engine.Filter) ([]uint64, error) {
	if err := checkQueue(q); err != nil {
		return nil, err
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	var out []uint64
	for _, id := range m.ids() {
		if t := m.at(m.tasks[id]); t != nil && t.Queue == q && m.matches(&f, t) {
			out = append(out, id)
		}
	}
	return out, nil
}

func (m *Model) ids() []uint64 {
	ids := make([]uint64, 0, len(m.tasks))
	for id := range m.tasks {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Bulk is Queue.Bulk: from the first match on, commits that each walk
// the tasks in id order and act on the matches, until a walk ends or
// reaches a task its own commit changed (a dependent a cancellation
// cancelled or woke), where the next one starts.
func (m *Model) Bulk(q QueueKey, f engine.Filter, a engine.BulkAction) (engine.BulkResult, error) {
	if err := checkQueue(q); err != nil {
		return engine.BulkResult{}, err
	}
	if err := f.Validate(); err != nil {
		return engine.BulkResult{}, err
	}
	if a < engine.BulkRetry || a > engine.BulkDelete {
		return engine.BulkResult{}, fmt.Errorf("%w: bulk action %d", engine.ErrInvalid, a)
	}
	var res engine.BulkResult
	skips := map[string]int{}
	from := f.MinID
	for {
		first := uint64(0)
		for _, id := range m.ids() {
			if t := m.at(m.tasks[id]); id >= from && t != nil && t.Queue == q && m.matches(&f, t) {
				first = id
				break
			}
		}
		if first == 0 {
			break
		}
		x := m.begin()
		from = 0
		n, acted := 0, 0
		for _, id := range m.ids() {
			if id < first {
				continue
			}
			if f.MaxID != 0 && id > f.MaxID {
				break
			}
			if n == bulkScan || acted == engine.MaxBatch || x.touched[id] {
				from = id
				break
			}
			n++
			stored := m.tasks[id]
			t := m.at(stored)
			if t == nil || t.Queue != q || !m.matches(&f, t) {
				continue
			}
			acted++
			if why := x.bulkOne(a, stored, t); why != "" {
				skips[why]++
			} else {
				res.Done++
			}
		}
		x.commit()
		if from == 0 {
			break
		}
	}
	for _, why := range bulkReasons {
		if n := skips[why]; n > 0 {
			res.Skipped = append(res.Skipped, engine.BulkSkip{Reason: why, Count: n})
		}
	}
	return res, nil
}

// bulkReasons are the engine's reasons for a skip, in its order.
var bulkReasons = []string{"already ready", "in flight", "waiting for dependencies", "completed",
	"dead (retry redrives dead tasks)", "not ended (cancel removes tasks still to run)"}

// bulkOne plans action a on the task stored as stored (t as at returns
// it), or says why it skips it.
func (x *txn) bulkOne(a engine.BulkAction, stored, t *Rec) string {
	st := t.State
	switch {
	case a == engine.BulkRetry && st == engine.Dead:
		x.redrive(t)
		return ""
	case (a == engine.BulkRetry || a == engine.BulkRunNow) && st == engine.Scheduled:
		n := *stored
		n.State, n.NotBefore, n.Updated = engine.Ready, x.now, x.now
		x.put(&n)
		return ""
	case a == engine.BulkCancel && st != engine.Completed,
		a == engine.BulkDelete && (st == engine.Dead || st == engine.Completed):
		if stored.State == engine.Waiting {
			x.cutWaits(stored.ID)
		}
		x.del(stored.ID)
		if stored.State != engine.Completed {
			x.ended(stored)
		}
		x.parentEnded(stored.ID, parentCancelled)
		return ""
	case a == engine.BulkDelete && st == engine.InFlight:
		return bulkReasons[1]
	case a == engine.BulkDelete:
		return bulkReasons[5]
	}
	return map[engine.State]string{engine.Ready: bulkReasons[0], engine.InFlight: bulkReasons[1],
		engine.Waiting: bulkReasons[2], engine.Completed: bulkReasons[3], engine.Dead: bulkReasons[4]}[st]
}
