// Package ticket is the outcome of an asynchronous enqueue
// (engine.Pending): settled when it is made, by a function its maker
// calls once (a network client), or with the sync round of the engine's
// pipeline it joined, whose one wait for the log settles every Pending of
// the round together.
package ticket

import (
	"context"
	"sync"

	"github.com/docketdb/docket/dockettype"
)

// Pending is an asynchronous enqueue in flight (Queue.EnqueueAsync). Its
// outcome is known once Done is closed: Wait returns it. A Pending that
// reports success is as durable as Enqueue's answer would be.
type Pending struct {
	done  <-chan struct{}
	enq   dockettype.Enqueued
	err   error
	round *Round // nil: settled on its own
}

// closedChan is the Done of a Pending settled when it was made.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// Settled returns a Pending whose outcome is known already.
func Settled(enq dockettype.Enqueued, err error) *Pending {
	if err != nil {
		enq = dockettype.Enqueued{}
	}
	return &Pending{done: closedChan, enq: enq, err: err}
}

// New returns a Pending and the function that settles it. Only the first
// call of settle counts.
func New() (*Pending, func(dockettype.Enqueued, error)) {
	ch := make(chan struct{})
	p := &Pending{done: ch}
	var once sync.Once
	return p, func(enq dockettype.Enqueued, err error) {
		once.Do(func() {
			if err != nil {
				enq = dockettype.Enqueued{}
			}
			p.enq, p.err = enq, err
			close(ch)
		})
	}
}

// Done returns a channel that is closed once the outcome is known.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Wait returns the outcome of the enqueue once it is known: what Enqueue
// would have returned. If ctx ends first it returns ctx's error; the
// enqueue goes on regardless, and Wait may be called again.
func (p *Pending) Wait(ctx context.Context) (dockettype.Enqueued, error) {
	select {
	case <-p.done:
	default:
		select {
		case <-p.done:
		case <-ctx.Done():
			return dockettype.Enqueued{}, ctx.Err()
		}
	}
	if p.round != nil && p.round.err != nil {
		return dockettype.Enqueued{}, p.round.err
	}
	return p.enq, p.err
}

// Round is the commits in flight that one wait for the log settles.
type Round struct {
	done chan struct{}
	err  error // the log's failure, set before done is closed
}

// NewRound returns an open round.
func NewRound() *Round { return &Round{done: make(chan struct{})} }

// Pending returns the Pending of a commit of the round whose own outcome
// is enq or err: it holds once the round is settled without a failure.
func (r *Round) Pending(enq dockettype.Enqueued, err error) *Pending {
	if err != nil {
		enq = dockettype.Enqueued{}
	}
	return &Pending{done: r.done, round: r, enq: enq, err: err}
}

// Settle settles every Pending of the round, with err, the log's failure,
// if not nil.
func (r *Round) Settle(err error) {
	r.err = err
	close(r.done)
}
