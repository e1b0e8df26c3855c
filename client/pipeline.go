package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

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
	a := &asyncEnqueue{ctx: ctx, c: c, settle: settle, repeatable: repeatableOps([]engine.Task{t}, ops)}
	wire.PBTaskInto(t, &a.task)
	a.msg = v1.EnqueueRequest{Namespace: q.pb, Queue: q.name, Task: &a.task, Ops: wire.PBOps(ops)}
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
			a.rest(err)
		}
		return p
	}
	a.h, a.conn = h, conn
	bound := c.opts.CallTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= bound {
		bound = 0 // the context's end comes first
	}
	if ctx.Done() != nil {
		a.mu.Lock()
		a.unwatch = context.AfterFunc(ctx, a.cancelled)
		a.mu.Unlock()
	}
	a.wrap.Enqueue = &a.msg
	a.call.Call = &a.wrap
	a.pending.to = a
	n, _, err := conn.send(&a.call, &a.pending, bound, false)
	if err != nil {
		a.finish(nil, err)
		return p
	}
	a.id.Store(n)
	return p
}

// asyncEnqueue is one EnqueueAsync on a session: the call, its place among
// the connection's pending calls, and how it settles, in one allocation.
type asyncEnqueue struct {
	ctx        context.Context
	c          *Client
	h          *sessionHost
	conn       *sessionConn
	settle     func(engine.Enqueued, error)
	repeatable bool

	task    v1.Task
	msg     v1.EnqueueRequest
	wrap    v1.Call_Enqueue
	call    v1.Call
	pending pendingCall

	// The Reply its answer is decoded into (replyFor).
	reply    v1.Reply
	rwrap    v1.Reply_Enqueue
	res      v1.EnqueueResponse
	enqueued v1.Enqueued

	id   atomic.Uint64
	once atomic.Bool
	// mu guards unwatch, which finish (on another goroutine, maybe at
	// once) calls.
	mu      sync.Mutex
	unwatch func() bool
}

func (a *asyncEnqueue) deliver(r *v1.Reply, err error) { a.finish(r, err) }

// enqueueReply is the number of a Reply's field of an Enqueue's answer.
var enqueueReply = (&v1.Reply{}).ProtoReflect().Descriptor().Fields().ByName("enqueue").Number()

// replyFor gives the reader a Reply wired for an Enqueue's answer, to
// decode it without allocating; finish takes what it needs from it.
func (a *asyncEnqueue) replyFor(kind protowire.Number) *v1.Reply {
	if kind != enqueueReply {
		return nil
	}
	a.res.Enqueued = &a.enqueued
	a.rwrap.Enqueue = &a.res
	a.reply.Reply = &a.rwrap
	return &a.reply
}

// cancelled is the end of the call's context: the call is forgotten.
func (a *asyncEnqueue) cancelled() {
	a.conn.remove(a.id.Load())
	a.finish(nil, a.ctx.Err())
}

// finish settles the call with its reply, or hands an error that allows
// it to the retries; once.
func (a *asyncEnqueue) finish(r *v1.Reply, err error) {
	if a.once.Swap(true) {
		return
	}
	a.mu.Lock()
	if a.unwatch != nil {
		a.unwatch()
	}
	a.mu.Unlock()
	a.h.calls.release()
	<-a.c.async
	if err == nil {
		err = replyError(r)
	}
	if err == nil {
		if res := r.GetEnqueue(); res != nil {
			a.settle(wire.Enqueued(res.Enqueued), nil)
			return
		}
		err = fmt.Errorf("docket: the server answered call %d with %T", r.GetId(), r.GetReply())
	}
	a.rest(err)
}

// rest is the rest of the call, after a first try that failed: the
// retries Enqueue would make, on a goroutine of its own.
func (a *asyncEnqueue) rest(first error) {
	go func() {
		res, _, err := invokeAfter(a.ctx, a.c, a.repeatable, a.c.opts.CallTimeout, opEnqueue, queuesOf,
			docketv1connect.QueuesClient.Enqueue, &a.msg, first)
		if err != nil {
			a.settle(engine.Enqueued{}, err)
			return
		}
		a.settle(wire.Enqueued(res.Enqueued), nil)
	}()
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
