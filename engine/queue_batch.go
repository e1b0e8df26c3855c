package engine

import (
	"context"
	"time"

	"github.com/docketdb/docket/engine/internal/machine"
	"github.com/docketdb/docket/engine/internal/validate"
)

// This file holds the calls that do in one commit what would otherwise
// take several: a worker that finishes a task and takes the next, and one
// that extends every lease it holds.
// CompleteAndClaim completes the leased task l as Complete does (d's
// result, ops and follow-ups, fenced by the lease) and, in the same commit,
// leases up to max tasks of the queue to owner for lease, as Claim does: a
// worker draining a queue pays one commit per task instead of two. Tasks
// the completion enqueues onto this queue, and those it releases from
// waiting (its dependents, ready in this same commit), are not among those
// claimed (they are claimable from the next commit on). The claim is
// bounded by
// the queue's controls as Claim is: a paused queue leases nothing, and an
// in-flight bound or rate limit leases fewer (the completed task no longer
// counts as in flight). If the lease is lost
// (ErrLeaseLost), or d's ops are refused, nothing is completed and nothing
// claimed. The leases returned may be none when nothing is due.
func (q *queue) CompleteAndClaim(ctx context.Context, l Lease, d Done, owner string, lease time.Duration, max int) (TxResult, []Lease, error) {
	if err := validate.Claim(owner, lease, max); err != nil {
		return TxResult{}, nil, err
	}
	a := machine.CompleteClaims.Get()
	defer machine.CompleteClaims.Put(a)
	if err := q.completeCommand(&a.Complete, l, d); err != nil {
		return TxResult{}, nil, err
	}
	a.Owner, a.Lease, a.Max = owner, lease.Microseconds(), max
	cmd, res := q.cmd(a), cmdResult{}
	if err := q.db.c.exec(ctx, &cmd, &res); err != nil {
		return TxResult{}, nil, err
	}
	return TxResult{Version: res.Seq, Enqueued: res.Enqs}, res.Leases, nil
}

// HeartbeatBatch extends the leases leases point to until now+extend, in
// one commit. Each lease is fenced on its own: errs[i] is nil or
// ErrLeaseLost for *leases[i], and the others are still extended (their
// Deadline updated in place). The error return is for the call as a whole
// (bad input, permissions, a closed or failed DB); then nothing was
// extended.
func (q *queue) HeartbeatBatch(ctx context.Context, leases []*Lease, extend time.Duration) ([]error, error) {
	if len(leases) > MaxBatch {
		return nil, invalid("%d leases in one batch, over the limit of %d", len(leases), MaxBatch)
	}
	if err := validate.LeaseTime("extend", extend); err != nil {
		return nil, err
	}
	fences := make([]Lease, len(leases))
	for i, l := range leases {
		if l == nil {
			return nil, invalid("lease %d is nil", i)
		}
		fences[i] = Lease{ID: l.ID, Token: l.Token, Secret: l.Secret}
	}
	if err := q.check(PermWork); err != nil {
		return nil, err
	}
	for _, l := range leases {
		if err := q.owns(l); err != nil {
			return nil, err
		}
	}
	cmd := q.cmd(&machine.HeartbeatBatch{Fences: fences, Lease: extend.Microseconds(), Dup: machine.RepeatedLeases(fences)})
	var res cmdResult
	if err := q.db.c.exec(ctx, &cmd, &res); err != nil {
		return nil, err
	}
	deadline := timeOf(res.Deadline)
	for i, l := range leases {
		if res.Errs[i] == nil {
			l.Deadline = deadline
		}
	}
	return res.Errs, nil
}
