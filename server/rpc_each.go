package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// This file serves the Each calls of the Pipeline service: many
// independent calls in one request, which the client sends when several
// of its goroutines call at once. Each item runs as the single call would
// alone (the same decoder, the same engine call on the caller's view, so
// the same validation, permissions and errors); only the answer is
// shared. Enqueues go through the engine's pipelined path (EnqueueAsync),
// in the items' order; the calls on a lease run on goroutines of their
// own, at most eachParallel at once per request. Either way the waits for
// durability are deferred to one wait for the whole request
// (engine.DeferDurable), which leads the log's sync once every item is
// logged (on a replicated DB each enqueue waits for the replicated log on
// its own goroutine instead).

// MaxEachItems bounds the items of one Each call; a call with more is
// refused with InvalidArgument before any item runs.
const MaxEachItems = 1000

// eachParallel bounds the items of one Each call on a lease that run at
// once: enough for their commits to share the log's syncs, few enough
// that a caller's calls in progress (Options.MaxCalls) bound the
// goroutines it can make the server start.
const eachParallel = 64

func checkEach(n int) error {
	if n > MaxEachItems {
		return wire.Invalid("%d items in one call, over the limit of %d", n, MaxEachItems)
	}
	return nil
}

// itemError is the outcome of an item that failed with err: what the
// single call's answer would have been (with the leader's URL on a node
// of a cluster that is not the leader), logged as that call's failure
// would be.
func (s *Server) itemError(ctx context.Context, proc string, i int, err error) *v1.ItemError {
	ce := wire.ToConnect(err)
	if s.opts.Cluster != nil {
		if rce, ok := s.redirect(ce).(*connect.Error); ok {
			ce = rce
		}
	}
	ci := infoFrom(ctx)
	s.log.Log(ctx, failureLevel(ce), "docket: item failed", "req", ci.id, "procedure", proc, "item", i,
		"caller", ci.callerID(), "code", ce.Code().String(), "err", ce)
	return wire.PBItemError(ce)
}

// eachParallelDo runs f(0) … f(n-1), at most eachParallel at once, and
// returns when all have. A panic in f is recovered and reported for its
// item, as connect's recovery does for a handler's own goroutine.
func (s *Server) eachParallelDo(ctx context.Context, proc string, n int, f func(i int) error, failed func(i int, err error)) {
	run := func(i int) {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("docket: panic in a call", "req", infoFrom(ctx).id, "procedure", proc, "item", i, "panic", p)
				failed(i, connect.NewError(connect.CodeInternal, fmt.Errorf("docket: internal error")))
			}
		}()
		if err := f(i); err != nil {
			failed(i, err)
		}
	}
	if n == 1 {
		run(0)
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, eachParallel) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				run(i)
			}
		}()
	}
	wg.Wait()
}

func (h pipelineRPC) EnqueueEach(ctx context.Context, req *connect.Request[v1.EnqueueEachRequest]) (*connect.Response[v1.EnqueueEachResponse], error) {
	items := req.Msg.GetItems()
	if err := checkEach(len(items)); err != nil {
		return nil, fail(err)
	}
	api, err := h.s.api(ctx)
	if err != nil {
		return nil, fail(err)
	}
	proc := req.Spec().Procedure
	results := make([]v1.EnqueueEachResult, len(items))
	out := &v1.EnqueueEachResponse{Results: make([]*v1.EnqueueEachResult, len(items))}
	if db, ok := api.(*engine.DB); ok && !h.s.replicated() {
		// The items are one run of the engine (see enqueueRunner).
		dctx, deferred := engine.DeferDurable(ctx)
		h.s.enqueueEach(ctx, dctx, deferred, db, proc, items, out, results)
		return reply(out)
	}
	enqueued := make([]v1.Enqueued, len(items))
	pending := make([]*engine.Pending, len(items))
	// The items of a request are mostly for one queue: its handle is made
	// once.
	var q engine.Queue
	// Every commit is under way before the first wait, so that they share
	// the sync rounds; a standalone DB commits them in the items' order,
	// each settled as soon as it is logged and applied, and this goroutine
	// then waits for the log once for all of them (leading the sync
	// itself when none is running, with every item's record pending, not
	// handing the wait to the engine's pipeline as the first item's commit
	// would have, which started a round before the other items were in).
	dctx, deferred := engine.DeferDurable(ctx)
	for i, m := range items {
		out.Results[i] = &results[i]
		t, ops, err := decodeEnqueue(m)
		if err != nil {
			results[i].Error = h.s.itemError(ctx, proc, i, err)
			continue
		}
		if ns := wire.Namespace(m.GetNamespace()); q == nil || q.Namespace() != ns || q.Name() != m.GetQueue() {
			q = api.Queue(ns, m.GetQueue())
		}
		pending[i] = q.EnqueueAsync(dctx, t, ops...)
	}
	werr := deferred.Wait()
	for i, p := range pending {
		if p == nil {
			continue
		}
		e, err := p.Wait(ctx)
		if werr != nil && (err == nil || restsOnLog(err)) {
			err = werr // the answer rested on the log, which failed
		}
		if err != nil {
			results[i].Error = h.s.itemError(ctx, proc, i, err)
			continue
		}
		enqueued[i].Id, enqueued[i].Deduplicated = e.ID, e.Deduplicated
		results[i].Enqueued = &enqueued[i]
	}
	return reply(out)
}

// enqueueEach serves EnqueueEach on a DB that commits a run of enqueues
// in as few steps as it can: the items that decode make one run, in the
// items' order, its waits deferred to one wait on deferred.
func (s *Server) enqueueEach(ctx, dctx context.Context, deferred *engine.Deferred, er enqueueRunner, proc string,
	items []*v1.EnqueueRequest, out *v1.EnqueueEachResponse, results []v1.EnqueueEachResult) {
	run := make([]engine.RunEnqueue, 0, len(items))
	at := make([]int, 0, len(items))
	for i, m := range items {
		out.Results[i] = &results[i]
		t, ops, err := decodeEnqueue(m)
		if err != nil {
			results[i].Error = s.itemError(ctx, proc, i, err)
			continue
		}
		run = append(run, engine.RunEnqueue{Namespace: wire.Namespace(m.GetNamespace()), Queue: m.GetQueue(), Task: t, Ops: ops})
		at = append(at, i)
	}
	er.EnqueueRun(dctx, run)
	werr := deferred.Wait()
	enqueued := make([]v1.Enqueued, len(run))
	for j, i := range at {
		r := &run[j]
		err := r.Err
		if werr != nil && (err == nil || restsOnLog(err)) {
			err = werr // the answer rested on the log, which failed
		}
		if err != nil {
			results[i].Error = s.itemError(ctx, proc, i, err)
			continue
		}
		enqueued[j].Id, enqueued[j].Deduplicated = r.Enqueued.ID, r.Enqueued.Deduplicated
		results[i].Enqueued = &enqueued[j]
	}
}

// eachOnLease serves an Each call of calls on a lease: run for each item,
// in parallel, the result of each set by set or its error by setErr. The
// items' commits leave their wait for durability to one wait once all have
// run (engine.DeferDurable), so that one request's commits share the
// log's syncs instead of the first leading a round almost alone; nothing
// is answered before that wait has returned, and if it fails every item
// whose answer rested on it gets its error.
func eachOnLease[Item, Result any](ctx context.Context, s *Server, proc string, items []*Item,
	run func(context.Context, *Item, *Result) error, setErr func(*Result, *v1.ItemError)) ([]*Result, error) {
	if err := checkEach(len(items)); err != nil {
		return nil, fail(err)
	}
	results := make([]Result, len(items))
	out := make([]*Result, len(items))
	for i := range results {
		out[i] = &results[i]
	}
	errs := make([]error, len(items))
	dctx, deferred := engine.DeferDurable(ctx)
	s.eachParallelDo(ctx, proc, len(items), func(i int) error {
		return run(dctx, items[i], &results[i])
	}, func(i int, err error) {
		errs[i] = err
	})
	if werr := deferred.Wait(); werr != nil {
		for i, err := range errs {
			if err == nil || restsOnLog(err) {
				errs[i] = werr
				out[i] = new(Result) // what it would have returned does not hold
			}
		}
	}
	for i, err := range errs {
		if err != nil {
			setErr(out[i], s.itemError(ctx, proc, i, err))
		}
	}
	return out, nil
}

// restsOnLog reports whether a call's error is a refusal, which the engine
// gives only once the batches it rests on are durable, like a success.
func restsOnLog(err error) bool {
	return errors.Is(err, engine.ErrNotFound) || errors.Is(err, engine.ErrLeaseLost) || errors.Is(err, engine.ErrConflict)
}

func (h pipelineRPC) CompleteEach(ctx context.Context, req *connect.Request[v1.CompleteEachRequest]) (*connect.Response[v1.CompleteEachResponse], error) {
	out, err := eachOnLease(ctx, h.s, req.Spec().Procedure, req.Msg.GetItems(),
		func(ctx context.Context, m *v1.CompleteRequest, r *v1.CompleteEachResult) error {
			res, err := h.s.runComplete(ctx, m)
			if err == nil {
				r.Result = res.Result
			}
			return err
		}, func(r *v1.CompleteEachResult, e *v1.ItemError) { r.Error = e })
	if err != nil {
		return nil, err
	}
	return reply(&v1.CompleteEachResponse{Results: out})
}

func (h pipelineRPC) FailEach(ctx context.Context, req *connect.Request[v1.FailEachRequest]) (*connect.Response[v1.FailEachResponse], error) {
	out, err := eachOnLease(ctx, h.s, req.Spec().Procedure, req.Msg.GetItems(),
		func(ctx context.Context, m *v1.FailRequest, _ *v1.FailEachResult) error {
			_, err := h.s.runFail(ctx, m)
			return err
		}, func(r *v1.FailEachResult, e *v1.ItemError) { r.Error = e })
	if err != nil {
		return nil, err
	}
	return reply(&v1.FailEachResponse{Results: out})
}

func (h pipelineRPC) HeartbeatEach(ctx context.Context, req *connect.Request[v1.HeartbeatEachRequest]) (*connect.Response[v1.HeartbeatEachResponse], error) {
	out, err := eachOnLease(ctx, h.s, req.Spec().Procedure, req.Msg.GetItems(),
		func(ctx context.Context, m *v1.HeartbeatRequest, r *v1.HeartbeatEachResult) error {
			res, err := h.s.runHeartbeat(ctx, m)
			if err == nil {
				r.Deadline = res.Deadline
			}
			return err
		}, func(r *v1.HeartbeatEachResult, e *v1.ItemError) { r.Error = e })
	if err != nil {
		return nil, err
	}
	return reply(&v1.HeartbeatEachResponse{Results: out})
}

func (h pipelineRPC) CompleteAndClaimEach(ctx context.Context, req *connect.Request[v1.CompleteAndClaimEachRequest]) (*connect.Response[v1.CompleteAndClaimEachResponse], error) {
	out, err := eachOnLease(ctx, h.s, req.Spec().Procedure, req.Msg.GetItems(),
		func(ctx context.Context, m *v1.CompleteAndClaimRequest, r *v1.CompleteAndClaimEachResult) error {
			res, err := h.s.runCompleteAndClaim(ctx, m)
			if err == nil {
				r.Result, r.Leases = res.Result, res.Leases
			}
			return err
		}, func(r *v1.CompleteAndClaimEachResult, e *v1.ItemError) { r.Error = e })
	if err != nil {
		return nil, err
	}
	return reply(&v1.CompleteAndClaimEachResponse{Results: out})
}
