package index

import (
	"math"
	"slices"

	"github.com/tidwall/btree"
)

// StateAt is the state of t at time now, as reads and claims see it: a
// stored timer whose time has come is ready, and a stored lease whose
// deadline has passed is ready again, or dead when it was the task's last
// attempt. (A retained completion past its retention is gone: callers hide
// it, see CountsAt.)
func (t *Task) StateAt(now int64) TaskState {
	switch {
	case t.State == StateScheduled && t.NotBefore <= now:
		return StateReady
	case t.State == StateInFlight && t.LeaseUntil() <= now && t.lastTry():
		return StateDead
	case t.State == StateInFlight && t.LeaseUntil() <= now:
		return StateReady
	}
	return t.State
}

// Due is a task that is claimable, or dead, at some time, and the state it
// is stored in.
type Due struct {
	Prio   int64
	ID     uint64
	Stored TaskState
}

// ServingStart is the position before every task in serving order.
var ServingStart = PrioItem{Prio: math.MaxInt64, ID: 0}

// Claimable appends to out, in serving order (higher priority first, then
// lower id), at most limit tasks of q that are claimable at now: stored
// ready, timers due at now, and leases expired at now with attempts left,
// from position from on (strictly after it when after is set). It costs
// O((limit+1) log n) however many tasks are stored or due.
func (q *Queue) Claimable(now int64, from PrioItem, after bool, limit int, out []Due) []Due {
	return claimable(q.Ready, &q.pivot, &q.dueSched, &q.dueRetry, now, from, after, limit, out)
}

// DeadAt appends to out, in id order, at most limit tasks of q that are
// dead at now: stored dead, and leases expired at now on their last
// attempt, from id from on (strictly after it when after is set).
func (q *Queue) DeadAt(now int64, from uint64, after bool, limit int, out []Due) []Due {
	if limit <= 0 {
		return out
	}
	start := len(out)
	q.Dead.Ascend(from, func(id uint64) bool {
		if after && id == from {
			return true
		}
		out = append(out, Due{ID: id, Stored: StateDead})
		return len(out)-start < limit
	})
	n := 0
	q.dueDead.AscendDue(0, from, after, now, func(_ int64, id uint64, _ int64) bool {
		out = append(out, Due{ID: id, Stored: StateInFlight})
		n++
		return n < limit
	})
	got := out[start:]
	slices.SortFunc(got, func(a, b Due) int {
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	return out[:start+min(len(got), limit)]
}

// ExpiredLast calls fn, in deadline order, for the tasks of q whose lease
// expired at now on their last attempt (dead at now, stored in flight),
// until fn returns false.
func (q *Queue) ExpiredLast(now int64, fn func(id uint64) bool) {
	q.lastTry.Scan(func(it TimeItem) bool {
		return it.At <= now && fn(it.ID)
	})
}

// CountsAt returns how many tasks of q are in each state at now, in
// O(log² n): time moves due timers and expired leases between states
// without a write, and a completed task last updated at or before
// doneBefore (when it is not 0) has been forgotten.
func (q *Queue) CountsAt(now, doneBefore int64) [NumStates]int {
	c := q.counts
	rs, rf, rl := rank(q.Scheduled, now), rank(q.InFlight, now), rank(q.lastTry, now)
	c[StateReady] += rs + rf - rl
	c[StateScheduled] -= rs
	c[StateInFlight] -= rf
	c[StateDead] += rl
	if doneBefore != 0 {
		c[StateCompleted] -= rank(q.doneAt, doneBefore)
	}
	return c
}

// OldestReady returns when the task of q that has been ready longest at
// now became ready: a stored ready task at its NotBefore, a due timer at
// its time, an expired lease at its deadline.
func (q *Queue) OldestReady(now int64) (int64, bool) {
	at, ok := int64(0), false
	consider := func(t int64) {
		if t <= now && (!ok || t < at) {
			at, ok = t, true
		}
	}
	if it, found := q.readySince.Min(); found {
		consider(it.At)
	}
	if it, found := q.Scheduled.Min(); found {
		consider(it.At)
	}
	if t, found := q.dueRetry.MinAt(); found {
		consider(t)
	}
	return at, ok
}

// rank is the number of items of tr at or before time t, in O(log² n).
func rank(tr *btree.BTreeG[TimeItem], t int64) int {
	n := tr.Len()
	if n == 0 {
		return 0
	}
	if it, _ := tr.Min(); it.At > t {
		return 0
	}
	if it, _ := tr.Max(); it.At <= t {
		return n
	}
	lo, hi := 0, n // items before lo are at or before t, from hi on after it
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if it, _ := tr.GetAt(mid); it.At <= t {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}
