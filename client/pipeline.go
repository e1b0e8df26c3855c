package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

func pipelineOf(s *stubs) docketv1connect.PipelineClient { return s.pipe }

// EnqueueAsync is Enqueue with the call left in flight: on a session it
// returns once the call is written, with a Pending that the server's
// answer settles, so that one goroutine can have many enqueues in flight.
// They are bounded as the engine's are: at most engine.DefaultMaxInFlight
// per client, and at most the server's bound on a caller's calls
// (Welcome.max_calls) with the client's other calls; at the bound,
// EnqueueAsync waits for a call to end, or for ctx to end (the Pending
// then holds ctx's error: nothing was sent). A call that fails in a way
// that allows a repeat is repeated exactly as Enqueue's would be, on a
// goroutine of its own. Over unary RPCs (Options.Transport), EnqueueAsync
// makes the call in the calling goroutine and returns a settled Pending.
func (q *queue) EnqueueAsync(ctx context.Context, t engine.Task, ops ...engine.Op) *engine.Pending {
	p, settle := engine.NewPending()
	c := q.c
	if !c.useSession(ctx) {
		settle(q.Enqueue(ctx, t, ops...))
		return p
	}
	if err := c.usable(ctx); err != nil {
		settle(engine.Enqueued{}, err)
		return p
	}
	repeatable := repeatableOps([]engine.Task{t}, ops)
	msg := &v1.EnqueueRequest{Namespace: q.pb, Queue: q.name, Task: wire.PBTask(t), Ops: wire.PBOps(ops)}
	// The rest of the call, after a first try that failed: the retries
	// Enqueue would make, on a goroutine of its own.
	rest := func(first error) {
		go func() {
			res, _, err := invokeAfter(ctx, c, repeatable, c.opts.CallTimeout, opEnqueue, queuesOf,
				docketv1connect.QueuesClient.Enqueue, msg, first)
			if err != nil {
				settle(engine.Enqueued{}, err)
				return
			}
			settle(wire.Enqueued(res.Enqueued), nil)
		}()
	}
	select {
	case c.async <- struct{}{}:
	case <-ctx.Done():
		settle(engine.Enqueued{}, ctx.Err())
		return p
	}
	h := c.sessionHost(c.r.eps.current())
	conn, err := h.get(ctx, c.opts.CallTimeout)
	if err == nil {
		err = h.calls.acquire(ctx)
	}
	if err != nil {
		<-c.async
		if errors.Is(err, errNoSession) {
			settle(q.Enqueue(ctx, t, ops...))
		} else {
			rest(err)
		}
		return p
	}
	var (
		once atomic.Bool
		id   atomic.Uint64
		// mu guards the timer and the context's watch, which finish
		// (on another goroutine, maybe at once) stops.
		mu      sync.Mutex
		timer   *time.Timer
		unwatch func() bool
	)
	finish := func(r *v1.Reply, err error) {
		if once.Swap(true) {
			return
		}
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		if unwatch != nil {
			unwatch()
		}
		mu.Unlock()
		h.calls.release()
		<-c.async
		if err == nil {
			err = replyError(r)
		}
		if err == nil {
			if res := r.GetEnqueue(); res != nil {
				settle(wire.Enqueued(res.Enqueued), nil)
				return
			}
			err = fmt.Errorf("docket: the server answered call %d with %T", r.GetId(), r.GetReply())
		}
		rest(err)
	}
	bound := c.opts.CallTimeout
	mu.Lock()
	if dl, ok := ctx.Deadline(); bound > 0 && (!ok || time.Until(dl) > bound) {
		timer = time.AfterFunc(bound, func() {
			conn.remove(id.Load())
			finish(nil, fmt.Errorf("%w within %v", errNoAnswer, bound))
		})
	}
	if ctx.Done() != nil {
		unwatch = context.AfterFunc(ctx, func() {
			conn.remove(id.Load())
			finish(nil, ctx.Err())
		})
	}
	mu.Unlock()
	n, err := conn.send(opEnqueue.wrap(msg), finish)
	if err != nil {
		finish(nil, err)
		return p
	}
	id.Store(n)
	return p
}

// CompleteAndClaim is not repeated after a lost answer, as Claim is not:
// the leases a first try took would be held by nobody until they expire.
// The error then matches ErrOutcomeUnknown.
func (q *queue) CompleteAndClaim(ctx context.Context, l engine.Lease, d engine.Done, owner string, lease time.Duration, max int) (engine.TxResult, []engine.Lease, error) {
	res, err := invoke(ctx, q.c, false, opCompleteAndClaim, pipelineOf, docketv1connect.PipelineClient.CompleteAndClaim,
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
	res, retried, err := invokeBounded(ctx, q.c, true, q.c.opts.CallTimeout, opHeartbeatBatch, pipelineOf, docketv1connect.PipelineClient.HeartbeatBatch,
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
