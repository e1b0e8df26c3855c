package server

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

// Message size limits. A request holds at most one commit, which the engine
// bounds at engine.MaxCommitBytes of what it keeps; MaxRequestBytes adds
// the protobuf framing of the largest legal batch, which the engine does
// not count: MaxBatch tasks, each with up to MaxHeaders headers (a map
// entry's tag and lengths: at most 10 bytes) and the tags and lengths of
// its other fields (at most 128 bytes). It is the most Options.MaxRequestBytes
// may be; by default a server takes DefaultMaxRequestBytes, which holds any
// single task the engine takes with its default payload limit (1 MiB, with
// 64 headers of 2 KiB, 10,000 dependencies and an idempotency key: about
// 1.3 MiB) three times over, and keeps what hostile requests can make it
// hold small: a body being read is held in memory whole, and is read only
// while no other large one is (guardedBody). It is 1 KiB under 8 MiB:
// connect reads a body into a buffer of its pool, which it keeps for the
// next request up to 8 MiB; a body past that has connect grow a new
// buffer to twice its size, doubling from 512 bytes, and drop it (under
// two clients sending endless bodies back to back, with 10 MiB a victim's
// enqueue p99 was 48 ms, with this limit 8 ms). A request over the limit is
// refused before it is read (by its Content-Length) or as soon as it
// passes it, and its connection closed; a compressed request is held to it
// as it inflates. Before a request is built, its lists (packed ones
// counted by element) are held to the engine's element limits
// (wire.CheckProto).
//
// A reply (a page of tasks, a batch of leases) may hold several payloads
// per task, hence its larger bound; a reply over it is refused with
// ResourceExhausted rather than sent.
const (
	MaxRequestBytes        = engine.MaxCommitBytes + engine.MaxBatch*(engine.MaxHeaders*10+128)
	DefaultMaxRequestBytes = 8<<20 - 1<<10
	MaxResponseBytes       = 4 * engine.MaxCommitBytes

	compressMinBytes = 64 << 10
)

// jsonCodec is the server's JSON codec under name: the engine's element,
// string and payload limits held before a request is built.
func (s *Server) jsonCodec(name string) *wire.JSONCodec {
	c := wire.NewJSONCodec(name, true)
	c.MaxValueBytes = s.maxValue
	return c
}

// register mounts the network API's handlers on mux, each behind
// authentication and the per-caller call limit.
func (s *Server) register(mux *http.ServeMux) {
	opts := connect.WithHandlerOptions(
		connect.WithCodec(wire.ProtoCodec{MaxValueBytes: s.maxValue}),
		connect.WithCodec(s.jsonCodec(wire.JSONName)),
		connect.WithCodec(s.jsonCodec(wire.JSONCharsetName)),
		connect.WithReadMaxBytes(int(s.opts.MaxRequestBytes)),
		connect.WithSendMaxBytes(MaxResponseBytes),
		// gzip costs more CPU than it saves bytes on a LAN for the small
		// messages most calls carry; large pages to a client that asks
		// for it are still compressed.
		connect.WithCompressMinBytes(compressMinBytes),
		// gzip requests inflate within the request limit and a ratio no
		// request needs, checked as they inflate.
		connect.WithCompression("gzip", newBoundedGzip(s.opts.MaxRequestBytes), func() connect.Compressor { return gzip.NewWriter(nil) }),
		connect.WithRecover(s.recovered),
		connect.WithInterceptors(append([]connect.Interceptor{s.logCalls(), s.slots()}, s.clusterInterceptors()...)...),
	)
	for _, h := range [...]func() (string, http.Handler){
		func() (string, http.Handler) { return docketv1connect.NewQueuesHandler(queuesRPC{s}, opts) },
		func() (string, http.Handler) { return docketv1connect.NewKVHandler(kvRPC{s}, opts) },
		func() (string, http.Handler) { return docketv1connect.NewAdminHandler(adminRPC{s}, opts) },
		func() (string, http.Handler) { return docketv1connect.NewControlsHandler(controlsRPC{s}, opts) },
		func() (string, http.Handler) { return docketv1connect.NewPipelineHandler(pipelineRPC{s}, opts) },
		func() (string, http.Handler) { return docketv1connect.NewPresenceHandler(presenceRPC{s}, opts) },
		func() (string, http.Handler) { return docketv1connect.NewSearchHandler(searchRPC{s}, opts) },
		func() (string, http.Handler) { return docketv1connect.NewQuotasHandler(quotasRPC{s}, opts) },
	} {
		path, handler := h()
		mux.Handle(path, s.authenticate(handler))
	}
	s.registerCluster(mux, opts)
}

// recovered turns a panic in a handler into Internal, logged, so that one
// call cannot take the connection (or the process) with it.
func (s *Server) recovered(ctx context.Context, spec connect.Spec, _ http.Header, p any) error {
	s.log.Error("docket: panic in a call", "req", infoFrom(ctx).id, "procedure", spec.Procedure, "panic", p)
	return connect.NewError(connect.CodeInternal, errors.New("docket: internal error"))
}

// logCalls logs each failed call once: refusals at Info, expected outcomes
// (not found, lease lost, conflict, a caller's deadline) at Debug, failures
// of the server at Warn.
func (s *Server) logCalls() connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			res, err := next(ctx, req)
			if err == nil {
				return res, nil
			}
			ci := infoFrom(ctx)
			s.logFailure(ctx, ci.id, req.Spec().Procedure, ci.callerID(), err)
			return res, err
		}
	})
}

// logFailure logs the failure of one call. Refusals for a caller's limits
// (errBusy) are sampled: a client at its limit may be refused thousands of
// times a second, so at most one such line is logged a second, with the
// number of refusals left unlogged since the last ("unlogged").
func (s *Server) logFailure(ctx context.Context, req, procedure, caller string, err error) {
	level := failureLevel(err)
	if !s.log.Enabled(ctx, level) {
		return
	}
	args := []any{"req", req, "procedure", procedure, "caller", caller, "code", connect.CodeOf(err).String(), "err", err}
	if errors.As(err, new(errBusy)) {
		unlogged, ok := s.busyLog.Allow(s.now(), time.Second)
		if !ok {
			return
		}
		if unlogged > 0 {
			args = append(args, "unlogged", unlogged)
		}
	}
	s.log.Log(ctx, level, "docket: call failed", args...)
}

// failureLevel is the level of the log line about a failed call.
func failureLevel(err error) slog.Level {
	if errors.Is(err, engine.ErrNotLeader) {
		return slog.LevelDebug // a node of a cluster sending the client to the leader
	}
	switch connect.CodeOf(err) {
	case connect.CodeNotFound, connect.CodeFailedPrecondition, connect.CodeAborted,
		connect.CodeCanceled, connect.CodeDeadlineExceeded:
		return slog.LevelDebug
	case connect.CodeInternal, connect.CodeUnknown, connect.CodeDataLoss, connect.CodeUnavailable:
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

// fail is the error a handler returns for err.
func fail(err error) error { return wire.ToConnect(err) }

func (s *Server) queue(ctx context.Context, ns *v1.Namespace, name string) (engine.Queue, error) {
	api, err := s.api(ctx)
	if err != nil {
		return nil, err
	}
	return api.Queue(wire.Namespace(ns), name), nil
}

func (s *Server) kv(ctx context.Context, ns *v1.Namespace) (engine.KV, error) {
	api, err := s.api(ctx)
	if err != nil {
		return nil, err
	}
	return api.KV(wire.Namespace(ns)), nil
}

// unavailable is the answer of a server that did not take a call: the
// header tells a client it may send it again elsewhere or later.
func unavailable(why string) error {
	ce := connect.NewError(connect.CodeUnavailable, errors.New("docket: server "+why))
	ce.Meta().Set(wire.UnavailableHeader, why)
	return ce
}

func reply[T any](m *T) (*connect.Response[T], error) { return connect.NewResponse(m), nil }

// answer is the reply of a handler whose work returned m or err.
func answer[T any](m *T, err error) (*connect.Response[T], error) {
	if err != nil {
		return nil, fail(err)
	}
	return reply(m)
}

type queuesRPC struct{ s *Server }

var _ docketv1connect.QueuesHandler = queuesRPC{}

func (h queuesRPC) Enqueue(ctx context.Context, req *connect.Request[v1.EnqueueRequest]) (*connect.Response[v1.EnqueueResponse], error) {
	return answer(h.s.runEnqueue(ctx, req.Msg))
}

// enqueueRunner is a DB that commits a run of enqueues in as few engine
// steps as it can (engine.DB.EnqueueRun), each with the outcome it would
// have had alone.
type enqueueRunner interface {
	EnqueueRun(context.Context, []engine.RunEnqueue)
}

// enqueueProc is the procedure of an Enqueue call, for the logs.
const enqueueProc = docketv1connect.QueuesEnqueueProcedure

// enqueueRunner returns the caller's view of the DB as an enqueueRunner
// when it is an *engine.DB itself, nil otherwise: an API that wraps one
// (embedding it, its Queue overridden) has its enqueues made through its
// own queues, one by one; so has a caller without a view (each call then
// fails alone, as it would).
func (s *Server) enqueueRunner(ctx context.Context) enqueueRunner {
	api, err := s.api(ctx)
	if err != nil {
		return nil
	}
	if db, ok := api.(*engine.DB); ok {
		return db
	}
	return nil
}

func (s *Server) runEnqueue(ctx context.Context, m *v1.EnqueueRequest) (*v1.EnqueueResponse, error) {
	t, ops, err := decodeEnqueue(m)
	if err != nil {
		return nil, err
	}
	q, err := s.queue(ctx, m.GetNamespace(), m.GetQueue())
	if err != nil {
		return nil, err
	}
	res, err := q.Enqueue(ctx, t, ops...)
	if err != nil {
		return nil, err
	}
	return &v1.EnqueueResponse{Enqueued: wire.PBEnqueued(res)[0]}, nil
}

func (h queuesRPC) EnqueueBatch(ctx context.Context, req *connect.Request[v1.EnqueueBatchRequest]) (*connect.Response[v1.EnqueueBatchResponse], error) {
	return answer(h.s.runEnqueueBatch(ctx, req.Msg))
}

func (s *Server) runEnqueueBatch(ctx context.Context, m *v1.EnqueueBatchRequest) (*v1.EnqueueBatchResponse, error) {
	ts, ops, err := decodeEnqueueBatch(m)
	if err != nil {
		return nil, err
	}
	q, err := s.queue(ctx, m.GetNamespace(), m.GetQueue())
	if err != nil {
		return nil, err
	}
	res, err := q.EnqueueBatch(ctx, ts, ops...)
	if err != nil {
		return nil, err
	}
	return &v1.EnqueueBatchResponse{Enqueued: wire.PBEnqueued(res...)}, nil
}

func (h queuesRPC) Claim(ctx context.Context, req *connect.Request[v1.ClaimRequest]) (*connect.Response[v1.ClaimResponse], error) {
	return answer(h.s.runClaim(ctx, req.Msg))
}

func (s *Server) runClaim(ctx context.Context, m *v1.ClaimRequest) (*v1.ClaimResponse, error) {
	a, err := decodeClaim(m.GetOwner(), m.GetLease(), m.GetMax())
	if err != nil {
		return nil, err
	}
	q, err := s.queue(ctx, m.GetNamespace(), m.GetQueue())
	if err != nil {
		return nil, err
	}
	ls, err := q.Claim(ctx, a.owner, a.lease, a.max)
	if err != nil {
		return nil, err
	}
	return &v1.ClaimResponse{Leases: wire.PBLeases(ls)}, nil
}

// ClaimWait parks the call in the engine's own wait (woken by an enqueue, a
// timer or an expiring lease; nothing polls) for at most the smallest of
// the request's max_wait, the server's MaxWait and the call's deadline. A
// wait the server ends (its bound, or a drain) answers with no leases; one
// the caller ends answers with the caller's context error.
func (h queuesRPC) ClaimWait(ctx context.Context, req *connect.Request[v1.ClaimWaitRequest]) (*connect.Response[v1.ClaimWaitResponse], error) {
	return answer(h.s.runClaimWait(ctx, req.Msg))
}

// runClaimWait runs a ClaimWait call. A session's call may also be ended
// by its Abandon (sessionWaitOf(ctx)), which answers as the server's own end
// of the wait does: with what it has.
func (s *Server) runClaimWait(ctx context.Context, m *v1.ClaimWaitRequest) (*v1.ClaimWaitResponse, error) {
	a, wait, err := decodeClaimWait(m)
	if err != nil {
		return nil, err
	}
	q, err := s.queue(ctx, m.GetNamespace(), m.GetQueue())
	if err != nil {
		return nil, err
	}
	if s.Draining() {
		return nil, unavailable("draining")
	}
	wctx, release, err := s.park(ctx, wait)
	if err != nil {
		return nil, err
	}
	defer release()
	if s.onPark != nil {
		s.onPark()
	}
	ls, err := q.ClaimWait(wctx, a.owner, a.lease, a.max)
	if err != nil {
		if errors.Is(context.Cause(wctx), errRevoked) {
			return nil, connect.NewError(connect.CodeUnauthenticated, errRevoked)
		}
		if ctx.Err() == nil && wctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			return &v1.ClaimWaitResponse{}, nil
		}
		return nil, err
	}
	return &v1.ClaimWaitResponse{Leases: wire.PBLeases(ls)}, nil
}

func (h queuesRPC) Complete(ctx context.Context, req *connect.Request[v1.CompleteRequest]) (*connect.Response[v1.CompleteResponse], error) {
	return answer(h.s.runComplete(ctx, req.Msg))
}

// runComplete runs a Complete call (alone, or an item of CompleteEach).
func (s *Server) runComplete(ctx context.Context, m *v1.CompleteRequest) (*v1.CompleteResponse, error) {
	l, d, err := decodeComplete(m)
	if err != nil {
		return nil, err
	}
	q, err := s.queue(ctx, m.GetNamespace(), m.GetQueue())
	if err != nil {
		return nil, err
	}
	res, err := q.Complete(ctx, l, d)
	if err != nil {
		return nil, err
	}
	return &v1.CompleteResponse{Result: wire.PBTxResult(res)}, nil
}

func (h queuesRPC) CompleteBatch(ctx context.Context, req *connect.Request[v1.CompleteBatchRequest]) (*connect.Response[v1.CompleteBatchResponse], error) {
	return answer(h.s.runCompleteBatch(ctx, req.Msg))
}

func (s *Server) runCompleteBatch(ctx context.Context, m *v1.CompleteBatchRequest) (*v1.CompleteBatchResponse, error) {
	q, err := s.queue(ctx, m.GetNamespace(), m.GetQueue())
	if err != nil {
		return nil, err
	}
	errs, err := q.CompleteBatch(ctx, decodeCompleteBatch(m))
	if err != nil {
		return nil, err
	}
	return &v1.CompleteBatchResponse{Errors: wire.PBErrors(errs)}, nil
}

func (h queuesRPC) Fail(ctx context.Context, req *connect.Request[v1.FailRequest]) (*connect.Response[v1.FailResponse], error) {
	return answer(h.s.runFail(ctx, req.Msg))
}

// runFail runs a Fail call (alone, or an item of FailEach).
func (s *Server) runFail(ctx context.Context, m *v1.FailRequest) (*v1.FailResponse, error) {
	l, f, err := decodeFail(m)
	if err != nil {
		return nil, err
	}
	q, err := s.queue(ctx, m.GetNamespace(), m.GetQueue())
	if err != nil {
		return nil, err
	}
	if err := q.Fail(ctx, l, f); err != nil {
		return nil, err
	}
	return &v1.FailResponse{}, nil
}

func (h queuesRPC) Heartbeat(ctx context.Context, req *connect.Request[v1.HeartbeatRequest]) (*connect.Response[v1.HeartbeatResponse], error) {
	return answer(h.s.runHeartbeat(ctx, req.Msg))
}

// runHeartbeat runs a Heartbeat call (alone, or an item of HeartbeatEach).
func (s *Server) runHeartbeat(ctx context.Context, m *v1.HeartbeatRequest) (*v1.HeartbeatResponse, error) {
	l, extend, progress, err := decodeHeartbeat(m)
	if err != nil {
		return nil, err
	}
	q, err := s.queue(ctx, m.GetNamespace(), m.GetQueue())
	if err != nil {
		return nil, err
	}
	if err := q.Heartbeat(ctx, &l, extend, progress); err != nil {
		return nil, err
	}
	return &v1.HeartbeatResponse{Deadline: wire.PBTime(l.Deadline)}, nil
}

func (h queuesRPC) Snooze(ctx context.Context, req *connect.Request[v1.SnoozeRequest]) (*connect.Response[v1.SnoozeResponse], error) {
	return answer(h.s.runSnooze(ctx, req.Msg))
}

func (s *Server) runSnooze(ctx context.Context, m *v1.SnoozeRequest) (*v1.SnoozeResponse, error) {
	l, d, err := decodeSnooze(m)
	if err != nil {
		return nil, err
	}
	q, err := s.queue(ctx, m.GetNamespace(), m.GetQueue())
	if err != nil {
		return nil, err
	}
	if err := q.Snooze(ctx, l, d); err != nil {
		return nil, err
	}
	return &v1.SnoozeResponse{}, nil
}

// onQueue runs f on the queue a request names, and answers out once f
// succeeded.
func onQueue[T any](ctx context.Context, s *Server, ns *v1.Namespace, queue string, out *T, f func(engine.Queue) error) (*T, error) {
	q, err := s.queue(ctx, ns, queue)
	if err != nil {
		return nil, err
	}
	if err := f(q); err != nil {
		return nil, err
	}
	return out, nil
}

func (h queuesRPC) List(ctx context.Context, req *connect.Request[v1.ListRequest]) (*connect.Response[v1.ListResponse], error) {
	return answer(h.s.runList(ctx, req.Msg))
}

func (s *Server) runList(ctx context.Context, m *v1.ListRequest) (*v1.ListResponse, error) {
	out := &v1.ListResponse{}
	return onQueue(ctx, s, m.GetNamespace(), m.GetQueue(), out, func(q engine.Queue) error {
		p, err := q.List(ctx, decodeList(m))
		if err != nil {
			return err
		}
		out.Tasks, out.Next = make([]*v1.TaskInfo, len(p.Tasks)), p.Next
		for i, t := range p.Tasks {
			out.Tasks[i] = wire.PBTaskInfo(t)
		}
		return nil
	})
}

func (h queuesRPC) Counts(ctx context.Context, req *connect.Request[v1.CountsRequest]) (*connect.Response[v1.CountsResponse], error) {
	return answer(h.s.runCounts(ctx, req.Msg))
}

func (s *Server) runCounts(ctx context.Context, m *v1.CountsRequest) (*v1.CountsResponse, error) {
	out := &v1.CountsResponse{}
	return onQueue(ctx, s, m.GetNamespace(), m.GetQueue(), out, func(q engine.Queue) error {
		c, err := q.Counts(ctx)
		out.Counts = wire.PBCounts(c)
		return err
	})
}

type kvRPC struct{ s *Server }

var _ docketv1connect.KVHandler = kvRPC{}

func (h kvRPC) Get(ctx context.Context, req *connect.Request[v1.KVGetRequest]) (*connect.Response[v1.KVGetResponse], error) {
	return answer(h.s.runKVGet(ctx, req.Msg))
}

func (s *Server) runKVGet(ctx context.Context, m *v1.KVGetRequest) (*v1.KVGetResponse, error) {
	kv, err := s.kv(ctx, m.GetNamespace())
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, m.GetKey())
	if err != nil {
		return nil, err
	}
	return &v1.KVGetResponse{Entry: wire.PBEntry(e)}, nil
}

func (h kvRPC) Scan(ctx context.Context, req *connect.Request[v1.KVScanRequest]) (*connect.Response[v1.KVScanResponse], error) {
	return answer(h.s.runKVScan(ctx, req.Msg))
}

func (s *Server) runKVScan(ctx context.Context, m *v1.KVScanRequest) (*v1.KVScanResponse, error) {
	kv, err := s.kv(ctx, m.GetNamespace())
	if err != nil {
		return nil, err
	}
	es, err := kv.Scan(ctx, decodeScan(m))
	if err != nil {
		return nil, err
	}
	out := &v1.KVScanResponse{Entries: make([]*v1.Entry, len(es))}
	for i, e := range es {
		out.Entries[i] = wire.PBEntry(e)
	}
	return out, nil
}

func (h kvRPC) Commit(ctx context.Context, req *connect.Request[v1.KVCommitRequest]) (*connect.Response[v1.KVCommitResponse], error) {
	return answer(h.s.runKVCommit(ctx, req.Msg))
}

func (s *Server) runKVCommit(ctx context.Context, m *v1.KVCommitRequest) (*v1.KVCommitResponse, error) {
	ops, err := decodeCommit(m)
	if err != nil {
		return nil, err
	}
	kv, err := s.kv(ctx, m.GetNamespace())
	if err != nil {
		return nil, err
	}
	res, err := kv.Commit(ctx, ops...)
	if err != nil {
		return nil, err
	}
	return &v1.KVCommitResponse{Result: wire.PBTxResult(res)}, nil
}

type adminRPC struct{ s *Server }

var _ docketv1connect.AdminHandler = adminRPC{}

// dbAdmin is what a DB offers beyond engine.API for its operator.
type dbAdmin interface {
	Stats() engine.Stats
	Checkpoint(context.Context) error
	Verify() error
}

// everyNamespace is matched only by a grant on */*.
var everyNamespace = engine.NS("*", "*")

// admin returns the DB for a call that concerns every namespace (Stats,
// Checkpoint, Verify). Without tokens every call is the program's own;
// with them the caller needs the admin permission on every namespace.
func (s *Server) admin(ctx context.Context, call string) (dbAdmin, error) {
	if ci := infoFrom(ctx); ci.caller != nil {
		if s.opts.Tokens == nil || s.opts.Tokens.Allowed(*ci.caller, everyNamespace, engine.PermAdmin) != engine.PermAdmin {
			return nil, fmt.Errorf("%w: caller %q lacks admin on */* (%s concerns every namespace)",
				engine.ErrPermission, ci.caller.ID, call)
		}
	}
	a, ok := s.db.(dbAdmin)
	if !ok {
		return nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("docket: %s is not served here", call))
	}
	return a, nil
}

func (h adminRPC) Queues(ctx context.Context, req *connect.Request[v1.QueuesRequest]) (*connect.Response[v1.QueuesResponse], error) {
	return answer(h.s.runQueues(ctx, req.Msg))
}

func (s *Server) runQueues(ctx context.Context, _ *v1.QueuesRequest) (*v1.QueuesResponse, error) {
	api, err := s.api(ctx)
	if err != nil {
		return nil, err
	}
	qs, err := api.Queues(ctx)
	if err != nil {
		return nil, err
	}
	out := &v1.QueuesResponse{Queues: make([]*v1.QueueInfo, len(qs))}
	for i, q := range qs {
		out.Queues[i] = wire.PBQueueInfo(q)
	}
	return out, nil
}

func (h adminRPC) Stats(ctx context.Context, _ *connect.Request[v1.StatsRequest]) (*connect.Response[v1.StatsResponse], error) {
	a, err := h.s.admin(ctx, "Stats")
	if err != nil {
		return nil, fail(err)
	}
	return reply(&v1.StatsResponse{Stats: wire.PBStats(a.Stats())})
}

func (h adminRPC) Checkpoint(ctx context.Context, _ *connect.Request[v1.CheckpointRequest]) (*connect.Response[v1.CheckpointResponse], error) {
	a, err := h.s.admin(ctx, "Checkpoint")
	if err != nil {
		return nil, fail(err)
	}
	if err := a.Checkpoint(ctx); err != nil {
		return nil, fail(err)
	}
	return reply(&v1.CheckpointResponse{})
}

func (h adminRPC) Verify(ctx context.Context, _ *connect.Request[v1.VerifyRequest]) (*connect.Response[v1.VerifyResponse], error) {
	a, err := h.s.admin(ctx, "Verify")
	if err != nil {
		return nil, fail(err)
	}
	if err := a.Verify(); err != nil {
		return nil, fail(err)
	}
	return reply(&v1.VerifyResponse{})
}

func (h adminRPC) Health(ctx context.Context, _ *connect.Request[v1.HealthRequest]) (*connect.Response[v1.HealthResponse], error) {
	draining, err := h.s.readiness(ctx)
	res := &v1.HealthResponse{Ready: !draining && err == nil, Draining: draining}
	switch {
	case draining:
		res.Reason = "draining"
	case err != nil:
		res.Reason = err.Error()
	}
	return reply(res)
}
