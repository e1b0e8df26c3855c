package engine

import (
	"context"
	"time"

	"github.com/docketdb/docket/engine/internal/machine"
	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/engine/internal/view"
	"github.com/docketdb/docket/internal/index"
)

// Bounds of Limits. A bucket holds at most MaxRateTokens tokens of
// MaxRatePer each, so its level is exact in 64-bit integers.
const (
	MaxInFlightLimit = index.MaxInFlightLimit
	MaxRateTokens    = index.MaxRateTokens
	MaxRatePer       = time.Duration(index.MaxRatePer) * time.Microsecond
)

// Pause stops the queue's claims: Claim leases nothing and ClaimWait
// waits, until Resume. Enqueues, completions, failures, heartbeats and
// every other call go on as usual, and leases already held stay valid.
// It is durable (it survives restarts, and the queue keeps it while it
// holds no task) and needs PermAdmin. Pausing a paused queue does nothing.
func (q *queue) Pause(ctx context.Context) error { return q.setPaused(ctx, true) }

// Resume ends a pause: ClaimWait calls parked on the queue wake at once.
// Resuming a queue that is not paused does nothing. PermAdmin.
func (q *queue) Resume(ctx context.Context) error { return q.setPaused(ctx, false) }

func (q *queue) setPaused(ctx context.Context, paused bool) error {
	if err := q.check(PermAdmin); err != nil {
		return err
	}
	cmd := q.cmd(&machine.SetPaused{Paused: paused})
	var res cmdResult
	return q.db.c.exec(ctx, &cmd, &res)
}

// SetLimits replaces the queue's limits, leaving its pause state as it
// is; the zero Limits removes them. They apply from the next claim on.
// When a rate limit replaces another, the tokens its bucket holds carry
// over (at most the new burst); a new rate limit starts with a full
// bucket. A change of the partition rate limit starts every partition
// with a full bucket. PermAdmin.
func (q *queue) SetLimits(ctx context.Context, l Limits) error {
	if err := validate.Limits(l); err != nil {
		return err
	}
	if err := q.check(PermAdmin); err != nil {
		return err
	}
	cmd := q.cmd(&machine.SetLimits{Limits: l})
	var res cmdResult
	return q.db.c.exec(ctx, &cmd, &res)
}

// Settings returns the queue's pause state and limits. PermRead.
func (q *queue) Settings(ctx context.Context) (QueueSettings, error) {
	if err := q.check(PermRead); err != nil {
		return QueueSettings{}, err
	}
	var s QueueSettings
	qk := q.key()
	c := q.db.c
	err := c.read(ctx, func() {
		conf, _ := c.store.Conf(qk)
		s = view.Settings(conf)
	})
	return s, err
}
