package engine

import (
	"slices"

	"github.com/docketdb/docket/internal/index"
)

// This file decides which parked ClaimWait calls a commit wakes: as many as
// the queue has claimable tasks that no woken call is already on its way to
// take, and no more, so that one enqueue onto a queue with a thousand idle
// claimers costs one wake-up, not a thousand claims that find nothing.
//
// For each queue with parked calls the engine keeps, under its lock:
//
//   - the sleepers, in the order they parked (the last parked is woken
//     first: its goroutine is the most likely to be warm, and taking it
//     off the end costs nothing however many sleep);
//   - woken, how many calls were woken by a commit and have not yet come
//     back to claim (or given up);
//   - timed, the sleeper whose Clock timer fires at the queue's next due
//     time (a timer coming due, a lease expiring), so that one timer, not
//     one per sleeper, watches what time makes claimable.
//
// After every applied batch that gave the queue work or changed its
// settings, and whenever a woken call gives up without claiming, rewake
// restores two rules, where claimable counts the tasks a claim may lease
// now within the queue's controls (none while it is paused, at most the
// room under its in-flight bound and the tokens of its rate limit):
//
//  1. woken >= min(claimable now, woken + sleepers): every claimable task has
//     a woken call coming for it while any call sleeps. A woken call that
//     finds nothing (another claim took the task first) parks again; one
//     that leaves without claiming (its context ended, its permission was
//     revoked) hands its wake-up on, so no task is stranded while others
//     sleep.
//  2. While calls sleep and none is woken, if something of the queue comes
//     due at some time (a timer, a lease's end, the next token of a rate
//     limit that has none; nothing while it is paused: its Resume is a
//     commit), a sleeper's timer fires no later than then: else the
//     first sleeper is woken to claim and park again, arming a timer for the
//     new due time. A sleeper woken by its timer claims, and its claim's
//     batch wakes more sleepers if more tasks came due than it took.
//
// Planning a claim reads the state at the plan's now, so a call that comes
// back sees everything committed before it; the rules only decide how many
// calls come back.
// sleeper is one ClaimWait call parked on a queue between two claims.
type sleeper struct {
	ch    chan struct{} // closed when a commit wakes the call
	w     *waitq
	woken bool  // a commit woke it (guarded by core.mu)
	due   int64 // when its timer fires, Unix micros; 0: it has none
}

// waitq holds the ClaimWait calls parked on one queue (guarded by core.mu).
type waitq struct {
	key      index.QueueKey
	sleepers []*sleeper // in the order they parked
	woken    int
	timed    *sleeper // the sleeper whose timer watches the queue's next due time
}

// park registers a ClaimWait call that found nothing to claim on queue qk,
// at a time when the queue's next timer or lease comes due at due (0:
// none). The sleeper arms a timer for due only if no other sleeper's timer
// fires by then. Call with mu held.
func (c *core) park(qk index.QueueKey, due int64) *sleeper {
	w := c.waiters[qk]
	if w == nil {
		w = &waitq{key: qk}
		c.waiters[qk] = w
	}
	s := &sleeper{ch: make(chan struct{}), w: w}
	w.sleepers = append(w.sleepers, s)
	c.arm(s, due)
	return s
}

// arm makes s the queue's timed sleeper, with a timer at due, unless
// another sleeper's timer fires by then. Call with mu held.
func (c *core) arm(s *sleeper, due int64) {
	w := s.w
	if due == 0 || s.woken || w.timed != nil && w.timed.due <= due {
		return
	}
	s.due, w.timed = due, s
}

// arrive says the call parked as s is back to claim: woken by a commit or
// by its timer, it claims now. Call with mu held.
func (c *core) arrive(s *sleeper) {
	w := s.w
	if s.woken {
		w.woken--
		s.woken = false
	} else {
		w.remove(s)
	}
	if w.timed == s {
		w.timed = nil
	}
	if len(w.sleepers) == 0 && w.woken == 0 && c.waiters[w.key] == w {
		delete(c.waiters, w.key)
	}
}

// leave says the call parked as s gives up without claiming again: a task
// it was woken for, or the timer it held, passes to another sleeper.
func (c *core) leave(s *sleeper) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.arrive(s)
	if len(s.w.sleepers) > 0 {
		c.rewake(s.w, c.store.Queue(s.w.key), c.now())
	}
}

// remove takes s off the sleepers, if it is there.
func (w *waitq) remove(s *sleeper) {
	for i := len(w.sleepers) - 1; i >= 0; i-- {
		if x := w.sleepers[i]; x == s {
			w.sleepers = slices.Delete(w.sleepers, i, i+1)
			return
		}
	}
}

// wake wakes the sleeper at position i. Call with mu held.
func (w *waitq) wake(i int) {
	s := w.sleepers[i]
	w.sleepers = slices.Delete(w.sleepers, i, i+1)
	s.woken = true
	w.woken++
	if w.timed == s {
		w.timed = nil
	}
	close(s.ch)
}

// wakeWaiters rewakes the ClaimWait calls parked on the queues the batch
// just applied at now gave work (a task, a freed slot of an in-flight
// bound) and on those whose settings it changed (a Resume, a raised
// limit). Call with mu held, after the batch is applied.
func (c *core) wakeWaiters(now int64) {
	if len(c.waiters) == 0 {
		return
	}
	for _, q := range c.store.Affected() {
		if w, ok := c.waiters[q.Key]; ok {
			c.rewake(w, q, now)
		}
	}
	for _, k := range c.store.Reconfigured() {
		if w, ok := c.waiters[k]; ok {
			c.rewake(w, c.store.Queue(k), now)
		}
	}
}

// rewake wakes the sleepers of w that the rules above call for, with iq
// the queue's indexes (nil if it holds nothing) at time now. Call with mu
// held.
func (c *core) rewake(w *waitq, iq *index.Queue, now int64) {
	if len(w.sleepers) == 0 {
		return
	}
	need := c.state().Claimable(w.key, iq, now, w.woken+len(w.sleepers)) - w.woken
	for need > 0 && len(w.sleepers) > 0 {
		// The timed sleeper goes last: waking it would leave the queue's
		// due time unwatched.
		i := len(w.sleepers) - 1
		if w.sleepers[i] == w.timed && i > 0 {
			i--
		}
		w.wake(i)
		need--
	}
	if w.woken > 0 || len(w.sleepers) == 0 {
		return
	}
	if due := c.claimDue(w.key, iq, now); due != 0 && (w.timed == nil || w.timed.due > due) {
		w.wake(len(w.sleepers) - 1) // it claims, finds nothing due yet, and parks with a timer for due
	}
}

// wakeAll wakes every parked call (the engine closed or failed, its state
// was replaced). Call with mu held.
func (c *core) wakeAll() {
	for k, w := range c.waiters {
		for len(w.sleepers) > 0 {
			w.wake(len(w.sleepers) - 1)
		}
		delete(c.waiters, k)
	}
}
