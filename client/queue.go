package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

// queue is a handle on a queue of a server.
type queue struct {
	c    *Client
	ns   engine.Namespace
	name string
	pb   *v1.Namespace
}

var _ engine.Queue = (*queue)(nil)

func (q *queue) Namespace() engine.Namespace { return q.ns }
func (q *queue) Name() string                { return q.name }

// repeatableOps reports whether a commit of these tasks and ops can be sent
// twice without doing anything twice: every task and every enqueue op
// carries an idempotency key (a repeat finds its task and is deduplicated),
// and the other ops only assert (a repeat asserts again). A KV write could
// overwrite what another caller wrote in between.
func repeatableOps(tasks []engine.Task, ops []engine.Op) bool {
	for i := range tasks {
		if tasks[i].IdempotencyKey == "" {
			return false
		}
	}
	for _, op := range ops {
		switch op.Kind() {
		case engine.OpIfVersion, engine.OpIfExists, engine.OpIfAbsent:
		case engine.OpEnqueue:
			if op.Task().IdempotencyKey == "" {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// Enqueue is repeated after a lost answer only when t (and every enqueue
// op) has an idempotency key and the ops write no KV entry; a repeat that
// finds the first try's task returns its id with Deduplicated set.
func (q *queue) Enqueue(ctx context.Context, t engine.Task, ops ...engine.Op) (engine.Enqueued, error) {
	res, err := invoke(ctx, q.c, repeatableOps([]engine.Task{t}, ops), opEnqueue, queuesOf, docketv1connect.QueuesClient.Enqueue,
		&v1.EnqueueRequest{Namespace: q.pb, Queue: q.name, Task: wire.PBTask(t), Ops: wire.PBOps(ops)})
	if err != nil {
		return engine.Enqueued{}, err
	}
	return wire.Enqueued(res.Enqueued), nil
}

// EnqueueBatch is repeated as Enqueue is, when every task has a key.
func (q *queue) EnqueueBatch(ctx context.Context, tasks []engine.Task, ops ...engine.Op) ([]engine.Enqueued, error) {
	res, err := invoke(ctx, q.c, repeatableOps(tasks, ops), opEnqueueBatch, queuesOf, docketv1connect.QueuesClient.EnqueueBatch,
		&v1.EnqueueBatchRequest{Namespace: q.pb, Queue: q.name, Tasks: wire.PBTasks(tasks), Ops: wire.PBOps(ops)})
	if err != nil {
		return nil, err
	}
	return wire.EnqueuedList(res.Enqueued), nil
}

// Claim is never repeated after a lost answer: the leases it took would be
// held by nobody until they expire. The error then matches
// ErrOutcomeUnknown.
func (q *queue) Claim(ctx context.Context, owner string, lease time.Duration, max int) ([]engine.Lease, error) {
	res, err := invoke(ctx, q.c, false, opClaim, claimOf, (*connect.Client[v1.ClaimRequest, wire.LeaseList]).CallUnary,
		&v1.ClaimRequest{Namespace: q.pb, Queue: q.name, Owner: owner, Lease: wire.PBDuration(lease), Max: wire.Int32(max)})
	if err != nil {
		return nil, err
	}
	return res.Leases, nil
}

// ClaimWait long-polls the server: each poll waits there, woken by the
// engine, for at most Options.PollWait (or what is left of ctx), and an
// empty answer is followed by the next poll until ctx ends (ctx's error)
// or the client is closed (ErrClosed). A poll whose answer is lost is not
// repeated: its error matches ErrOutcomeUnknown.
func (q *queue) ClaimWait(ctx context.Context, owner string, lease time.Duration, max int) ([]engine.Lease, error) {
	c := q.c
	wctx, cancel := context.WithCancel(context.WithValue(ctx, longPoll{}, true))
	defer cancel()
	stop := context.AfterFunc(c.closing, cancel)
	defer stop()
	req := &v1.ClaimWaitRequest{Namespace: q.pb, Queue: q.name, Owner: owner, Lease: wire.PBDuration(lease),
		Max: wire.Int32(max), MaxWait: wire.PBDuration(c.opts.PollWait)}
	// A poll the server holds for PollWait gets this much longer before
	// the client gives up on the connection.
	bound := c.opts.PollWait + 15*time.Second
	for {
		res, _, err := invokeBounded(wctx, c, false, bound, opClaimWait, claimWaitOf, (*connect.Client[v1.ClaimWaitRequest, wire.LeaseList]).CallUnary, req)
		switch {
		case err == nil && len(res.Leases) > 0:
			return res.Leases, nil
		case err == nil:
			continue // the server's bound or a drain: ask again
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case c.closed.Load():
			return nil, errClosed
		}
		return nil, err
	}
}

// fenced runs a fenced call, which is repeated after a lost answer: the
// lease's token makes a repeat do nothing once the first try took effect.
// That repeat answers ErrLeaseLost, which the error then says.
func fenced[Req, Res any](ctx context.Context, q *queue, op *sessionOp[Req, Res],
	rpc func(docketv1connect.QueuesClient, context.Context, *connect.Request[Req]) (*connect.Response[Res], error), msg *Req) (*Res, error) {
	res, retried, err := invokeBounded(ctx, q.c, true, q.c.opts.CallTimeout, op, queuesOf, rpc, msg)
	return res, fencedErr(err, retried)
}

func fencedErr(err error, retried bool) error {
	if err != nil && retried && errors.Is(err, engine.ErrLeaseLost) {
		return mayHaveApplied(err)
	}
	return err
}

// Complete is fenced: repeated after a lost answer.
func (q *queue) Complete(ctx context.Context, l engine.Lease, d engine.Done) (engine.TxResult, error) {
	if err := l.CheckQueue(q.ns, q.name); err != nil {
		return engine.TxResult{}, err
	}
	res, err := fenced(ctx, q, opComplete, docketv1connect.QueuesClient.Complete,
		&v1.CompleteRequest{Namespace: q.pb, Queue: q.name, Lease: wire.PBLeaseRef(l), Done: wire.PBDone(d)})
	if err != nil {
		return engine.TxResult{}, err
	}
	return wire.TxResult(res.Result), nil
}

// CompleteBatch is fenced: repeated after a lost answer, when a lease the
// first try completed answers ErrLeaseLost saying so.
func (q *queue) CompleteBatch(ctx context.Context, leases []engine.Lease) ([]error, error) {
	for i := range leases {
		if err := leases[i].CheckQueue(q.ns, q.name); err != nil {
			return nil, err
		}
	}
	refs := wire.PBLeaseRefs(leases)
	res, retried, err := invokeBounded(ctx, q.c, true, q.c.opts.CallTimeout, opCompleteBatch, queuesOf, docketv1connect.QueuesClient.CompleteBatch,
		&v1.CompleteBatchRequest{Namespace: q.pb, Queue: q.name, Leases: refs})
	if err != nil {
		return nil, err
	}
	if len(res.Errors) != len(leases) {
		return nil, fmt.Errorf("docket: the server answered %d outcomes for %d leases", len(res.Errors), len(leases))
	}
	errs := make([]error, len(leases))
	for i, e := range res.Errors {
		errs[i] = wire.Error(e)
		if errs[i] != nil && retried && errors.Is(errs[i], engine.ErrLeaseLost) {
			errs[i] = mayHaveApplied(errs[i])
		}
	}
	return errs, nil
}

// Fail is fenced: repeated after a lost answer.
func (q *queue) Fail(ctx context.Context, l engine.Lease, f engine.Failure) error {
	if err := l.CheckQueue(q.ns, q.name); err != nil {
		return err
	}
	_, err := fenced(ctx, q, opFail, docketv1connect.QueuesClient.Fail,
		&v1.FailRequest{Namespace: q.pb, Queue: q.name, Lease: wire.PBLeaseRef(l), Failure: wire.PBFailure(f)})
	return err
}

// Heartbeat is fenced: repeated after a lost answer. On success l holds
// the new deadline (the server's time) and progress.
func (q *queue) Heartbeat(ctx context.Context, l *engine.Lease, extend time.Duration, progress []byte) error {
	if l == nil {
		return fmt.Errorf("%w: nil lease", engine.ErrInvalid)
	}
	if err := l.CheckQueue(q.ns, q.name); err != nil {
		return err
	}
	res, err := fenced(ctx, q, opHeartbeat, docketv1connect.QueuesClient.Heartbeat,
		&v1.HeartbeatRequest{Namespace: q.pb, Queue: q.name, Lease: wire.PBLeaseRef(*l), Extend: wire.PBDuration(extend), Progress: progress})
	if err != nil {
		return err
	}
	if dl, err := wire.Time("deadline", res.Deadline); err == nil {
		l.Deadline = dl
	}
	if progress != nil {
		l.Progress = append([]byte(nil), progress...)
	}
	return nil
}

// Snooze is fenced: repeated after a lost answer.
func (q *queue) Snooze(ctx context.Context, l engine.Lease, d time.Duration) error {
	if err := l.CheckQueue(q.ns, q.name); err != nil {
		return err
	}
	_, err := fenced(ctx, q, opSnooze, docketv1connect.QueuesClient.Snooze,
		&v1.SnoozeRequest{Namespace: q.pb, Queue: q.name, Lease: wire.PBLeaseRef(l), Delay: wire.PBDuration(d)})
	return err
}

func (q *queue) List(ctx context.Context, o engine.ListOptions) (engine.Page, error) {
	res, err := invoke(ctx, q.c, true, opList, queuesOf, docketv1connect.QueuesClient.List,
		&v1.ListRequest{Namespace: q.pb, Queue: q.name, State: v1.State(o.State), Limit: wire.Int32(o.Limit), Cursor: o.Cursor})
	if err != nil {
		return engine.Page{}, err
	}
	p := engine.Page{Next: res.Next}
	if len(res.Tasks) > 0 {
		p.Tasks = make([]engine.TaskInfo, len(res.Tasks))
		for i, t := range res.Tasks {
			p.Tasks[i] = wire.TaskInfo(t)
		}
	}
	return p, nil
}

func (q *queue) Counts(ctx context.Context) (engine.Counts, error) {
	res, err := invoke(ctx, q.c, true, opCounts, queuesOf, docketv1connect.QueuesClient.Counts,
		&v1.CountsRequest{Namespace: q.pb, Queue: q.name})
	if err != nil {
		return engine.Counts{}, err
	}
	return wire.Counts(res.Counts), nil
}

// kv is a handle on the KV entries of a namespace of a server.
type kv struct {
	c  *Client
	ns engine.Namespace
	pb *v1.Namespace
}

var _ engine.KV = (*kv)(nil)

func (k *kv) Namespace() engine.Namespace { return k.ns }

func (k *kv) Get(ctx context.Context, key string) (engine.Entry, error) {
	res, err := invoke(ctx, k.c, true, opKVGet, kvOf, docketv1connect.KVClient.Get, &v1.KVGetRequest{Namespace: k.pb, Key: key})
	if err != nil {
		return engine.Entry{}, err
	}
	return wire.Entry(res.Entry), nil
}

func (k *kv) Scan(ctx context.Context, o engine.ScanOptions) ([]engine.Entry, error) {
	res, err := invoke(ctx, k.c, true, opKVScan, kvOf, docketv1connect.KVClient.Scan,
		&v1.KVScanRequest{Namespace: k.pb, Prefix: o.Prefix, Start: o.Start, End: o.End, Limit: wire.Int32(o.Limit)})
	if err != nil {
		return nil, err
	}
	var out []engine.Entry
	for _, e := range res.Entries {
		out = append(out, wire.Entry(e))
	}
	return out, nil
}

// Commit is repeated after a lost answer only when it writes no KV entry
// and every enqueue in it has an idempotency key (see Enqueue).
func (k *kv) Commit(ctx context.Context, ops ...engine.Op) (engine.TxResult, error) {
	res, err := invoke(ctx, k.c, repeatableOps(nil, ops), opKVCommit, kvOf, docketv1connect.KVClient.Commit,
		&v1.KVCommitRequest{Namespace: k.pb, Ops: wire.PBOps(ops)})
	if err != nil {
		return engine.TxResult{}, err
	}
	return wire.TxResult(res.Result), nil
}
