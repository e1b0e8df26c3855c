package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

func pipelineOf(s *stubs) docketv1connect.PipelineClient { return s.pipe }

// EnqueueAsync is Enqueue over the network, made in the calling goroutine:
// it returns once the server has answered (the commit is durable, or
// refused), with a Pending that is already settled. No goroutine is
// started and nothing stays in flight; to have many enqueues in flight
// over the network, call from several goroutines (their calls share
// requests: see Coalescing in the package documentation) or use
// EnqueueBatch. It is repeated after a lost answer exactly when Enqueue
// is.
func (q *queue) EnqueueAsync(ctx context.Context, t engine.Task, ops ...engine.Op) *engine.Pending {
	p, settle := engine.NewPending()
	settle(q.Enqueue(ctx, t, ops...))
	return p
}

// CompleteAndClaim is not repeated after a lost answer, as Claim is not:
// the leases a first try took would be held by nobody until they expire.
// The error then matches ErrOutcomeUnknown.
func (q *queue) CompleteAndClaim(ctx context.Context, l engine.Lease, d engine.Done, owner string, lease time.Duration, max int) (engine.TxResult, []engine.Lease, error) {
	res, _, err := q.c.completeClaims.call(ctx, false,
		&v1.CompleteAndClaimRequest{Namespace: q.pb, Queue: q.name, Lease: wire.PBLeaseRef(l), Done: wire.PBDone(d),
			Owner: owner, ClaimLease: wire.PBDuration(lease), Max: wire.Int32(max)})
	if err != nil {
		return engine.TxResult{}, nil, err
	}
	return wire.TxResult(res.Result), wire.Leases(res.Leases), nil
}

// HeartbeatBatch is fenced: repeated after a lost answer, when a lease the
// first try extended still answers nil (extending again is harmless). On
// success each extended lease holds the new deadline (the server's time).
func (q *queue) HeartbeatBatch(ctx context.Context, leases []*engine.Lease, extend time.Duration) ([]error, error) {
	refs := make([]*v1.LeaseRef, len(leases))
	for i, l := range leases {
		if l == nil {
			return nil, fmt.Errorf("%w: lease %d is nil", engine.ErrInvalid, i)
		}
		refs[i] = wire.PBLeaseRef(*l)
	}
	res, retried, err := invokeBounded(ctx, q.c, true, q.c.opts.CallTimeout, pipelineOf, docketv1connect.PipelineClient.HeartbeatBatch,
		&v1.HeartbeatBatchRequest{Namespace: q.pb, Queue: q.name, Leases: refs, Extend: wire.PBDuration(extend)})
	if err != nil {
		return nil, err
	}
	if len(res.Errors) != len(leases) {
		return nil, fmt.Errorf("docket: the server answered %d outcomes for %d leases", len(res.Errors), len(leases))
	}
	dl, dlErr := wire.Time("deadline", res.Deadline)
	errs := make([]error, len(leases))
	for i, e := range res.Errors {
		errs[i] = wire.Error(e)
		switch {
		case errs[i] != nil && retried && errors.Is(errs[i], engine.ErrLeaseLost):
			errs[i] = mayHaveApplied(errs[i])
		case errs[i] == nil && dlErr == nil:
			leases[i].Deadline = dl
		}
	}
	return errs, nil
}
