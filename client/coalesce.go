package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

// This file coalesces concurrent calls of one kind (Enqueue, Complete,
// Fail, Heartbeat, CompleteAndClaim) to one server into requests of the
// Pipeline service's Each calls, the way a log's group commit gathers
// committers: a call goes out at once, alone, when no request of its kind
// is in flight to the server; calls made while one is in flight gather,
// and go out together in one request when it returns (or as soon as they
// reach a bound on items or bytes), with at most maxEachInFlight requests
// of a kind in flight to a server. No timer is involved, so a lone caller
// waits for nothing. Each call keeps its own retries (retrier.do with the
// same classification, so a gathered call is repeated after a lost answer
// exactly when the call alone would be), its own context (a call whose
// context ends while it gathers leaves the request before it is sent) and
// its own result or error, rebuilt as the single call's answer would have
// been.

const (
	// maxEachItems bounds the calls of one request (the server takes up
	// to server.MaxEachItems).
	maxEachItems = 256
	// maxEachBytes bounds the protobuf bytes of the calls of one request,
	// far below the server's bound on a request even in JSON.
	maxEachBytes = 8 << 20
	// soloBytes: a call this large goes alone. Its bytes are its cost,
	// not the request, and it would hold the others up.
	soloBytes = 256 << 10
	// maxEachInFlight bounds the requests of one kind in flight to one
	// server; calls beyond gather until one returns.
	maxEachInFlight = 4
	// maxYields bounds the yields of a returned request's goroutine to the
	// calls it released (see finished).
	maxYields = 4
	// noEachFor is how long calls to a server that answered an Each call
	// with Unimplemented go alone before the client tries Each again: a
	// server upgraded in place (a rolling upgrade) gets coalesced calls
	// again within it.
	noEachFor = time.Minute
)

// errNoEach is what a gathered call learns when the server has no Each
// call (a server of an older build answered Unimplemented, so nothing
// was done): it makes the call alone instead.
var errNoEach = errors.New("docket: the server does not take coalesced calls")

// coalescer coalesces the calls of one kind: single is the call alone
// (its RPC), each sends many in one request of an Each call.
type coalescer[Req, Res any] struct {
	c      *Client
	single func(*stubs, context.Context, *connect.Request[Req]) (*connect.Response[Res], error)
	each   eachFunc[Req, Res]

	mu    sync.Mutex
	lanes map[string]*lane[Req, Res] // by server
}

// eachFunc sends items in one request and returns, per item, the single
// call's answer or its error, or the error of the whole request.
type eachFunc[Req, Res any] func(ctx context.Context, s *stubs, headers func(http.Header), items []*Req) ([]*Res, []*v1.ItemError, error)

func newCoalescer[Req, Res any](c *Client, single func(*stubs, context.Context, *connect.Request[Req]) (*connect.Response[Res], error),
	each eachFunc[Req, Res]) *coalescer[Req, Res] {
	return &coalescer[Req, Res]{c: c, single: single, each: each, lanes: map[string]*lane[Req, Res]{}}
}

// eachOf is the eachFunc of an Each RPC: wrap makes its request of the
// items, results reads the results of its answer, and split one result
// into the single call's answer (filling res) or its error.
func eachOf[Req, Res, EachReq, EachRes, Result any](
	rpc func(docketv1connect.PipelineClient, context.Context, *connect.Request[EachReq]) (*connect.Response[EachRes], error),
	wrap func([]*Req) *EachReq, results func(*EachRes) []*Result, split func(r *Result, res *Res) *v1.ItemError) eachFunc[Req, Res] {
	return func(ctx context.Context, s *stubs, headers func(http.Header), items []*Req) ([]*Res, []*v1.ItemError, error) {
		req := connect.NewRequest(wrap(items))
		headers(req.Header())
		r, err := rpc(s.pipe, ctx, req)
		if err != nil {
			return nil, nil, err
		}
		rs := results(r.Msg)
		if len(rs) != len(items) {
			return nil, nil, fmt.Errorf("docket: the server answered %d results for %d calls", len(rs), len(items))
		}
		out := make([]*Res, len(rs))
		answers := make([]Res, len(rs)) // one allocation for all
		errs := make([]*v1.ItemError, len(rs))
		for i, x := range rs {
			if errs[i] = split(x, &answers[i]); errs[i] == nil {
				out[i] = &answers[i]
			}
		}
		return out, errs, nil
	}
}

// call makes one call of the kind: coalesced with others to the same
// server unless Options.NoCoalesce, tried and repeated as invokeBounded
// does. retried says whether a try was sent and got no answer.
func (co *coalescer[Req, Res]) call(ctx context.Context, repeatable bool, msg *Req) (res *Res, retried bool, err error) {
	c := co.c
	if c.opts.NoCoalesce {
		return invokeBounded(ctx, c, repeatable, c.opts.CallTimeout, func(s *stubs) *stubs { return s }, co.single, msg)
	}
	if err := c.usable(ctx); err != nil {
		return nil, false, err
	}
	size := proto.Size(any(msg).(proto.Message))
	res, retried, err = tries(ctx, c, repeatable, func(ctx context.Context, base string) (*Res, error) {
		return co.lane(base).do(ctx, msg, size)
	})
	var unsent unsentError
	if errors.As(err, &unsent) {
		// Not sent, and no try before was (retrier.do answers
		// ErrOutcomeUnknown then): nothing was done.
		return nil, retried, unsent.err
	}
	if err != nil {
		return nil, retried, c.fail(ctx, err)
	}
	return res, retried, nil
}

// lane returns the lane of the server at base.
func (co *coalescer[Req, Res]) lane(base string) *lane[Req, Res] {
	co.mu.Lock()
	defer co.mu.Unlock()
	l := co.lanes[base]
	if l == nil {
		l = &lane[Req, Res]{co: co, s: co.c.stub(base)}
		co.lanes[base] = l
	}
	return l
}

// lane is the calls of one kind to one server: the requests in flight and
// the calls gathering for the next.
type lane[Req, Res any] struct {
	co *coalescer[Req, Res]
	s  *stubs
	// noEach is, in the client's clock's nanoseconds, until when calls go
	// alone: the server answered an Each call with Unimplemented (0: never).
	noEach atomic.Int64

	mu       sync.Mutex
	inflight int              // requests in flight
	open     *batch[Req, Res] // the calls gathering, nil when none
	full     []*batch[Req, Res]
	waiting  int // calls gathered and not sent
}

// batch is the calls of one request to be.
type batch[Req, Res any] struct {
	ws    []*waiter[Req, Res]
	bytes int
}

// waiter is one gathered call.
type waiter[Req, Res any] struct {
	ctx  context.Context
	msg  *Req
	sent bool // under the lane's mu: in a request, or about to be
	gone bool // under the lane's mu: left before it was sent
	done chan struct{}
	res  *Res
	err  error
}

// do makes one try of a call: alone when nothing of its kind is in flight
// to the server, else gathered into the next request.
func (l *lane[Req, Res]) do(ctx context.Context, msg *Req, size int) (*Res, error) {
	if size > soloBytes || l.eachless() {
		return l.single(ctx, msg)
	}
	l.mu.Lock()
	if l.inflight == 0 {
		// Nothing in flight: nothing gathers either (a request's return
		// sends what gathered behind it).
		l.inflight++
		l.mu.Unlock()
		defer l.finished(0, false)
		return l.single(ctx, msg)
	}
	w := &waiter[Req, Res]{ctx: ctx, msg: msg, done: make(chan struct{})}
	l.gather(w, size)
	n := l.waiting
	l.mu.Unlock()
	if h := l.co.c.gathered; h != nil {
		h(n)
	}
	select {
	case <-w.done:
		return l.outcome(ctx, w)
	case <-ctx.Done():
	}
	l.mu.Lock()
	sent := w.sent
	if !sent {
		w.gone = true
		l.waiting--
	}
	l.mu.Unlock()
	if !sent {
		return nil, unsentError{ctx.Err()}
	}
	select {
	case <-w.done:
		return l.outcome(ctx, w)
	default:
	}
	// Sent, the call's outcome is not known: fail (through retrier.do)
	// reports it as it does for a call alone whose context ended.
	return nil, ctx.Err()
}

// eachless reports whether the server answered an Each call with
// Unimplemented less than noEachFor ago: calls then go alone.
func (l *lane[Req, Res]) eachless() bool {
	until := l.noEach.Load()
	return until != 0 && l.co.c.now().UnixNano() < until
}

// unsentError is the error of a gathered call whose context ended before
// it was sent: nothing was done, and the call returns the context's error.
type unsentError struct{ err error }

func (e unsentError) Error() string { return e.err.Error() }
func (e unsentError) Unwrap() error { return e.err }

// outcome is what a gathered call got.
func (l *lane[Req, Res]) outcome(ctx context.Context, w *waiter[Req, Res]) (*Res, error) {
	if errors.Is(w.err, errNoEach) {
		return l.single(ctx, w.msg)
	}
	return w.res, w.err
}

// single makes a call alone.
func (l *lane[Req, Res]) single(ctx context.Context, msg *Req) (*Res, error) {
	return try(ctx, l.co.c, l.s, l.co.c.opts.CallTimeout, l.co.single, msg)
}

// gather adds w to the calls gathering, closing the batch when a bound is
// reached. Under mu.
func (l *lane[Req, Res]) gather(w *waiter[Req, Res], size int) {
	if l.open != nil && l.open.bytes+size > maxEachBytes {
		l.full = append(l.full, l.open)
		l.open = nil
	}
	if l.open == nil {
		l.open = &batch[Req, Res]{}
	}
	l.open.ws = append(l.open.ws, w)
	l.open.bytes += size
	l.waiting++
	if len(l.open.ws) >= maxEachItems {
		l.full = append(l.full, l.open)
		l.open = nil
	}
	l.dispatch(false, false)
}

// finished ends a request that released calls (their outcomes are
// told): what gathered behind it goes out. A caller that makes its next
// call as soon as it has an outcome (a producer, a worker's loop) is
// runnable now, and about to gather; sent at once, the request would go
// without it, and the calls would settle into two groups that take turns,
// each paying a round trip and a commit for half the callers. So, as the
// log's group commit does for the committers an fsync released, the
// goroutine yields to them first (the request still counts as in flight,
// so they gather rather than go alone), while they keep coming, until as
// many gather as were released, at most maxYields times; no timer is
// involved, and a caller that does not call again costs one yield.
//
// With keep, the caller is a sender (see sends), and finished returns the
// first of the requests to go out for it to send next, instead of
// starting a goroutine for it.
func (l *lane[Req, Res]) finished(released int, keep bool) []*waiter[Req, Res] {
	l.mu.Lock()
	defer l.mu.Unlock()
	want := l.waiting + released
	for range maxYields {
		if released == 0 || l.waiting >= want {
			break
		}
		before := l.waiting
		l.mu.Unlock()
		runtime.Gosched()
		l.mu.Lock()
		if l.waiting == before {
			break
		}
	}
	l.inflight--
	return l.dispatch(true, keep)
}

// dispatch sends the full batches, and the open one when withOpen, while
// fewer than maxEachInFlight requests are in flight, each on a sender
// goroutine of its own, except that with keep the first is returned for
// the caller to send. Under mu.
func (l *lane[Req, Res]) dispatch(withOpen, keep bool) (first []*waiter[Req, Res]) {
	for l.inflight < maxEachInFlight {
		var b *batch[Req, Res]
		switch {
		case len(l.full) > 0:
			b = l.full[0]
			l.full[0] = nil
			l.full = l.full[1:]
		case withOpen && l.open != nil:
			b, l.open = l.open, nil
		default:
			return first
		}
		ws := b.ws[:0]
		for _, w := range b.ws {
			if !w.gone {
				w.sent = true
				ws = append(ws, w)
			}
		}
		l.waiting -= len(ws)
		if len(ws) == 0 {
			continue
		}
		l.inflight++
		if keep && first == nil {
			first = ws
			continue
		}
		go l.sends(ws)
	}
	return first
}

// sends makes the request of ws, then, on the same goroutine, each
// request that the return of the one before sends out, until a return
// sends none. A request goes through connect and net/http on a deep
// stack: a goroutine started for each one grew its stack anew (about a
// tenth of the CPU of a coalesced request on loopback, and a wait for the
// goroutine to be scheduled before the request went out); a sender that
// keeps going grows it once.
func (l *lane[Req, Res]) sends(ws []*waiter[Req, Res]) {
	for ws != nil {
		l.send(ws)
		ws = l.finished(len(ws), true)
	}
}

// send makes one request of gathered calls and tells each its outcome.
func (l *lane[Req, Res]) send(ws []*waiter[Req, Res]) {
	if len(ws) == 1 {
		// Alone after all: the call itself, on its own context.
		w := ws[0]
		w.res, w.err = l.single(w.ctx, w.msg)
		close(w.done)
		return
	}
	ctx, cancel, bound := requestContext(ws, l.co.c.opts.CallTimeout)
	defer cancel()
	msgs := make([]*Req, len(ws))
	for i, w := range ws {
		msgs[i] = w.msg
	}
	res, errs, err := l.co.each(ctx, l.s, func(h http.Header) { l.co.c.setHeaders(ctx, h) }, msgs)
	switch {
	case err == nil:
	case unimplemented(err):
		l.noEach.Store(l.co.c.now().Add(noEachFor).UnixNano())
		err = errNoEach
	case ctx.Err() != nil || connect.CodeOf(err) == connect.CodeDeadlineExceeded:
		err = fmt.Errorf("%w within %v: %w", errNoAnswer, bound, err)
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		// Every call gets this error: its headers are made now, on one
		// goroutine (Meta makes them when first asked), and only read
		// from then on.
		ce.Meta()
	}
	for i, w := range ws {
		switch {
		case err != nil:
			w.err = err
		case errs[i] != nil:
			w.err = itemError(errs[i], bound)
		default:
			w.res = res[i]
		}
		close(w.done)
	}
}

// requestContext is the context of a request of gathered calls: none of
// the callers' own, which each honours by itself (a caller whose context
// ends stops waiting), but the latest of their bounds, each the earlier
// of its deadline and CallTimeout from now, as for a call alone.
func requestContext[Req, Res any](ws []*waiter[Req, Res], callTimeout time.Duration) (context.Context, context.CancelFunc, time.Duration) {
	now := time.Now()
	var latest time.Time
	for _, w := range ws {
		dl, ok := w.ctx.Deadline()
		if bound := now.Add(callTimeout); !ok || (callTimeout > 0 && bound.Before(dl)) {
			dl = bound
		}
		if dl.After(latest) {
			latest = dl
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), latest)
	return ctx, cancel, latest.Sub(now)
}

// unimplemented reports an answer of a server that has no such call.
func unimplemented(err error) bool {
	var ce *connect.Error
	return errors.As(err, &ce) && ce.Code() == connect.CodeUnimplemented && wire.Detail(ce) == nil
}

// itemError is the error of a gathered call that failed: the single call's
// answer, rebuilt. An item that ended with the request's context (its
// deadline passed on the server) was cut, as a call alone cut by its
// bound is: sent without an answer.
func itemError(pb *v1.ItemError, bound time.Duration) error {
	ce := wire.ItemError(pb)
	switch ce.Code() {
	case connect.CodeDeadlineExceeded, connect.CodeCanceled:
		return fmt.Errorf("%w within %v: %w", errNoAnswer, bound, ce)
	}
	return ce
}

// coalescers makes the coalescers of the calls that are coalesced.
func (c *Client) coalescers() {
	c.enqueues = newCoalescer(c, func(s *stubs, ctx context.Context, r *connect.Request[v1.EnqueueRequest]) (*connect.Response[v1.EnqueueResponse], error) {
		return s.q.Enqueue(ctx, r)
	}, eachOf(docketv1connect.PipelineClient.EnqueueEach,
		func(items []*v1.EnqueueRequest) *v1.EnqueueEachRequest { return &v1.EnqueueEachRequest{Items: items} },
		(*v1.EnqueueEachResponse).GetResults,
		func(r *v1.EnqueueEachResult, res *v1.EnqueueResponse) *v1.ItemError {
			if r.Error != nil {
				return r.Error
			}
			res.Enqueued = r.Enqueued
			return nil
		}))
	c.completes = newCoalescer(c, func(s *stubs, ctx context.Context, r *connect.Request[v1.CompleteRequest]) (*connect.Response[v1.CompleteResponse], error) {
		return s.q.Complete(ctx, r)
	}, eachOf(docketv1connect.PipelineClient.CompleteEach,
		func(items []*v1.CompleteRequest) *v1.CompleteEachRequest {
			return &v1.CompleteEachRequest{Items: items}
		},
		(*v1.CompleteEachResponse).GetResults,
		func(r *v1.CompleteEachResult, res *v1.CompleteResponse) *v1.ItemError {
			if r.Error != nil {
				return r.Error
			}
			res.Result = r.Result
			return nil
		}))
	c.fails = newCoalescer(c, func(s *stubs, ctx context.Context, r *connect.Request[v1.FailRequest]) (*connect.Response[v1.FailResponse], error) {
		return s.q.Fail(ctx, r)
	}, eachOf(docketv1connect.PipelineClient.FailEach,
		func(items []*v1.FailRequest) *v1.FailEachRequest { return &v1.FailEachRequest{Items: items} },
		(*v1.FailEachResponse).GetResults,
		func(r *v1.FailEachResult, _ *v1.FailResponse) *v1.ItemError {
			if r.Error != nil {
				return r.Error
			}
			return nil
		}))
	c.heartbeats = newCoalescer(c, func(s *stubs, ctx context.Context, r *connect.Request[v1.HeartbeatRequest]) (*connect.Response[v1.HeartbeatResponse], error) {
		return s.q.Heartbeat(ctx, r)
	}, eachOf(docketv1connect.PipelineClient.HeartbeatEach,
		func(items []*v1.HeartbeatRequest) *v1.HeartbeatEachRequest {
			return &v1.HeartbeatEachRequest{Items: items}
		},
		(*v1.HeartbeatEachResponse).GetResults,
		func(r *v1.HeartbeatEachResult, res *v1.HeartbeatResponse) *v1.ItemError {
			if r.Error != nil {
				return r.Error
			}
			res.Deadline = r.Deadline
			return nil
		}))
	c.completeClaims = newCoalescer(c, func(s *stubs, ctx context.Context, r *connect.Request[v1.CompleteAndClaimRequest]) (*connect.Response[v1.CompleteAndClaimResponse], error) {
		return s.pipe.CompleteAndClaim(ctx, r)
	}, eachOf(docketv1connect.PipelineClient.CompleteAndClaimEach,
		func(items []*v1.CompleteAndClaimRequest) *v1.CompleteAndClaimEachRequest {
			return &v1.CompleteAndClaimEachRequest{Items: items}
		},
		(*v1.CompleteAndClaimEachResponse).GetResults,
		func(r *v1.CompleteAndClaimEachResult, res *v1.CompleteAndClaimResponse) *v1.ItemError {
			if r.Error != nil {
				return r.Error
			}
			res.Result, res.Leases = r.Result, r.Leases
			return nil
		}))
}
