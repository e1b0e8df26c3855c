package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/docketdb/docket/internal/index"
)

// This file tells a test when a ClaimWait is parked, so that it can move a
// ManualClock or commit work knowing the parked call will see it, instead
// of sleeping and hoping. It keeps nothing for a queue without parked
// calls, and costs a parking call one uncontended lock.

// parking records the ClaimWait calls waiting at their select, per queue.
type parking struct {
	mu     sync.Mutex
	claims map[index.QueueKey][]*parkedClaim
	// changed, if not nil, is closed at the next park or unpark: a
	// WaitParked is waiting for it.
	changed chan struct{}
	parks   uint64 // parks since Open, on any queue
}

// parkedClaim is one ClaimWait at its select: it wakes when a commit
// wakes its sleeper or when t fires (a timer or lease came due).
type parkedClaim struct {
	s *sleeper
	t Timer // nil: the call holds no timer
}

// awake reports whether the claim has been woken and is about to leave.
// Both wake-ups are visible at once, and stay visible after the claim has
// taken them: a commit closes the sleeper's channel before it returns, and
// a ManualClock takes a due timer off its list before Advance returns.
func (p *parkedClaim) awake() bool {
	select {
	case <-p.s.ch:
		return true
	default:
	}
	switch t := p.t.(type) {
	case nil:
		return false
	case *manualTimer:
		return !t.pending()
	default:
		return len(t.C()) > 0
	}
}

// pending reports whether the timer has neither fired nor been stopped:
// O(1), since WaitParked asks it of every parked claim at every change.
func (t *manualTimer) pending() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	return t.listed
}

// park records a ClaimWait about to wait as s, with timer t, and returns
// the function to call when it stops waiting.
func (p *parking) park(qk index.QueueKey, s *sleeper, t Timer) func() {
	pc := &parkedClaim{s: s, t: t}
	p.mu.Lock()
	if p.claims == nil {
		p.claims = make(map[index.QueueKey][]*parkedClaim)
	}
	p.claims[qk] = append(p.claims[qk], pc)
	p.parks++
	p.signal()
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		cs := p.claims[qk]
		// Newest first: a woken claim is usually among the last parked
		// (wake.go wakes those first), and the order of the others is kept.
		for i := len(cs) - 1; i >= 0; i-- {
			if cs[i] == pc {
				cs = slices.Delete(cs, i, i+1)
				break
			}
		}
		if len(cs) == 0 {
			delete(p.claims, qk)
		} else {
			p.claims[qk] = cs
		}
		p.signal()
	}
}

// signal wakes the WaitParked calls. Call with mu held.
func (p *parking) signal() {
	if p.changed != nil {
		close(p.changed)
		p.changed = nil
	}
}

// count returns how many claims are parked on qk and not yet woken, and,
// if that is under n, a channel closed at the next change.
func (p *parking) count(qk index.QueueKey, n int) (int, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	got := 0
	for _, pc := range p.claims[qk] {
		if !pc.awake() {
			got++
		}
	}
	if got >= n {
		return got, nil
	}
	if p.changed == nil {
		p.changed = make(chan struct{})
	}
	return got, p.changed
}

// Parked returns how many ClaimWait calls are parked on the queue ns/queue
// right now: registered to be woken by a commit that gives the queue work
// and, if a timer or lease of the queue comes due, waiting on a timer of
// the DB's Clock, and not woken yet. A commit that wakes them, and a
// ManualClock.Advance that fires their timer, lower the count before they
// return. It exists for tests (see WaitParked); it is for the program that
// opened the DB, not a caller's view.
func (d *DB) Parked(ns Namespace, queue string) (int, error) {
	if err := d.owner("Parked"); err != nil {
		return 0, err
	}
	n, _ := d.c.parking.count(index.QueueKey{Namespace: idxNS(ns), Name: queue}, 0)
	return n, nil
}

// Parks returns how many times ClaimWait calls have parked on the DB, on
// any queue, since it was opened: a call woken with nothing to lease parks
// again and counts again. Parked cannot tell a claim that still waits from
// one that was woken and has parked again; a test that must know that no
// parked claim woke compares Parks before and after the step. It is for the
// program that opened the DB, not a caller's view.
func (d *DB) Parks() (uint64, error) {
	if err := d.owner("Parks"); err != nil {
		return 0, err
	}
	p := &d.c.parking
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.parks, nil
}

// WaitParked blocks until at least n ClaimWait calls are parked on the
// queue ns/queue (see Parked), or ctx ends, or the DB is closed. Once it
// returns nil, a commit that gives the queue work, or moving a ManualClock
// to the time a task or lease comes due, reaches the parked calls: a test
// needs no sleep to know that a blocking claim is waiting. It is for the
// program that opened the DB, not a caller's view.
func (d *DB) WaitParked(ctx context.Context, ns Namespace, queue string, n int) error {
	if err := d.owner("WaitParked"); err != nil {
		return err
	}
	if n < 1 {
		return invalid("WaitParked for %d claims: want at least 1", n)
	}
	c := d.c
	qk := index.QueueKey{Namespace: idxNS(ns), Name: queue}
	for {
		got, changed := c.parking.count(qk, n)
		if changed == nil {
			return nil
		}
		c.mu.Lock()
		err := c.usable()
		c.mu.Unlock()
		if err != nil {
			return err
		}
		select {
		case <-changed:
		case <-c.stopBg: // closed by Close
		case <-ctx.Done():
			return fmt.Errorf("%d of %d claims parked on queue %s/%s: %w", got, n, ns, queue, ctx.Err())
		}
	}
}
