package wire

import (
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/docketdb/docket/engine"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// Invalid returns an error wrapping engine.ErrInvalid.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{engine.ErrInvalid}, args...)...)
}

// Namespace converts a namespace; nil is the zero namespace (which the
// engine refuses, naming the empty field).
func Namespace(pb *v1.Namespace) engine.Namespace {
	return engine.NS(pb.GetProject(), pb.GetScope())
}

// PBNamespace converts a namespace.
func PBNamespace(ns engine.Namespace) *v1.Namespace {
	return &v1.Namespace{Project: ns.Project, Scope: ns.Scope}
}

// Duration converts a duration; nil is 0. A malformed one (nanos out of
// range, signs that disagree, beyond what time.Duration holds) is ErrInvalid.
func Duration(field string, pb *durationpb.Duration) (time.Duration, error) {
	if pb == nil {
		return 0, nil
	}
	if err := pb.CheckValid(); err != nil {
		return 0, Invalid("%s: %v", field, err)
	}
	const maxSec = math.MaxInt64 / int64(time.Second)
	if s := pb.GetSeconds(); s > maxSec || s < -maxSec {
		return 0, Invalid("%s of %d s is out of range", field, s)
	}
	return pb.AsDuration(), nil
}

// PBDuration converts a duration; 0 is nil.
func PBDuration(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

// Time converts a timestamp; nil is the zero time.
func Time(field string, pb *timestamppb.Timestamp) (time.Time, error) {
	if pb == nil {
		return time.Time{}, nil
	}
	if err := pb.CheckValid(); err != nil {
		return time.Time{}, Invalid("%s: %v", field, err)
	}
	return pb.AsTime(), nil
}

// PBTime converts a time; the zero time is nil.
func PBTime(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// timeOf converts a timestamp the server sent; it is well formed, and a
// malformed one reads as the zero time.
func timeOf(pb *timestamppb.Timestamp) time.Time {
	t, _ := Time("", pb)
	return t
}

func durationOf(pb *durationpb.Duration) time.Duration {
	d, _ := Duration("", pb)
	return d
}

// toInt converts a 64-bit count to int, refusing what int cannot hold.
func toInt(field string, n int64) (int, error) {
	if int64(int(n)) != n {
		return 0, Invalid("%s %d is out of range", field, n)
	}
	return int(n), nil
}

// Task converts a task to enqueue; nil is the zero task.
func Task(pb *v1.Task) (engine.Task, error) {
	if pb == nil {
		return engine.Task{}, nil
	}
	t := engine.Task{
		Payload:        pb.Payload,
		Kind:           pb.Kind,
		MaxAttempts:    int(pb.MaxAttempts),
		IdempotencyKey: pb.IdempotencyKey,
		Headers:        pb.Headers,
		Partition:      pb.Partition,
	}
	var err error
	if t.Priority, err = toInt("priority", pb.Priority); err != nil {
		return t, err
	}
	if t.Delay, err = Duration("delay", pb.Delay); err != nil {
		return t, err
	}
	if t.At, err = Time("at", pb.At); err != nil {
		return t, err
	}
	if t.BackoffBase, err = Duration("backoff base", pb.BackoffBase); err != nil {
		return t, err
	}
	if t.BackoffMax, err = Duration("backoff max", pb.BackoffMax); err != nil {
		return t, err
	}
	if t.Unique, err = Unique(pb.Unique); err != nil {
		return t, err
	}
	return t, taskDeps(pb, &t)
}

// PBTask converts a task to enqueue.
func PBTask(t engine.Task) *v1.Task {
	pb := &v1.Task{}
	PBTaskInto(t, pb)
	return pb
}

// PBTaskInto is PBTask into pb, a Task with nothing set (one the caller
// holds in a larger allocation).
func PBTaskInto(t engine.Task, pb *v1.Task) {
	pb.Payload = t.Payload
	pb.Kind = t.Kind
	pb.Delay = PBDuration(t.Delay)
	pb.At = PBTime(t.At)
	pb.Priority = int64(t.Priority)
	pb.MaxAttempts = clampInt32(t.MaxAttempts)
	pb.BackoffBase = PBDuration(t.BackoffBase)
	pb.BackoffMax = PBDuration(t.BackoffMax)
	pb.IdempotencyKey = t.IdempotencyKey
	pb.Headers = t.Headers
	pb.Unique = PBUnique(t.Unique)
	pb.Partition = t.Partition
	pbTaskDeps(t, pb)
}

// Int32 converts a count or limit, keeping one out of range out of range
// (so that the server refuses it) instead of letting it wrap into range.
func Int32(n int) int32 { return clampInt32(n) }

func clampInt32(n int) int32 {
	switch {
	case n > math.MaxInt32:
		return math.MaxInt32
	case n < math.MinInt32:
		return math.MinInt32
	}
	return int32(n)
}

// Tasks converts tasks to enqueue, naming the one that is malformed.
func Tasks(pbs []*v1.Task) ([]engine.Task, error) {
	out := make([]engine.Task, len(pbs))
	for i, pb := range pbs {
		t, err := Task(pb)
		if err != nil {
			return nil, fmt.Errorf("task %d: %w", i, err)
		}
		out[i] = t
	}
	return out, nil
}

// PBTasks converts tasks to enqueue, the messages from one allocation.
func PBTasks(ts []engine.Task) []*v1.Task {
	out := make([]*v1.Task, len(ts))
	msgs := make([]v1.Task, len(ts))
	for i := range ts {
		m := &msgs[i]
		PBTaskInto(ts[i], m)
		out[i] = m
	}
	return out
}

// Ops converts the ops of a transaction. An op with nothing set is
// ErrInvalid.
func Ops(pbs []*v1.Op) ([]engine.Op, error) {
	if len(pbs) == 0 {
		return nil, nil
	}
	out := make([]engine.Op, len(pbs))
	for i, pb := range pbs {
		var op engine.Op
		switch o := pb.GetOp().(type) {
		case *v1.Op_Set:
			op = engine.Set(o.Set.GetKey(), o.Set.GetValue())
		case *v1.Op_Delete:
			op = engine.Delete(o.Delete.GetKey())
		case *v1.Op_IfVersion:
			op = engine.IfVersion(o.IfVersion.GetKey(), o.IfVersion.GetVersion())
		case *v1.Op_IfExists:
			op = engine.IfExists(o.IfExists.GetKey())
		case *v1.Op_IfAbsent:
			op = engine.IfAbsent(o.IfAbsent.GetKey())
		case *v1.Op_Enqueue:
			t, err := Task(o.Enqueue.GetTask())
			if err != nil {
				return nil, fmt.Errorf("op %d: %w", i, err)
			}
			op = engine.Enqueue(o.Enqueue.GetQueue(), t)
		default:
			return nil, Invalid("op %d is empty (set one of set, delete, ifVersion, ifExists, ifAbsent, enqueue)", i)
		}
		out[i] = op
	}
	return out, nil
}

// PBOps converts the ops of a transaction; the zero Op becomes an empty op,
// which the server refuses as the engine would.
func PBOps(ops []engine.Op) []*v1.Op {
	if len(ops) == 0 {
		return nil
	}
	out := make([]*v1.Op, len(ops))
	for i, op := range ops {
		pb := &v1.Op{}
		switch op.Kind() {
		case engine.OpSet:
			pb.Op = &v1.Op_Set{Set: &v1.SetOp{Key: op.Key(), Value: op.Value()}}
		case engine.OpDelete:
			pb.Op = &v1.Op_Delete{Delete: &v1.DeleteOp{Key: op.Key()}}
		case engine.OpIfVersion:
			pb.Op = &v1.Op_IfVersion{IfVersion: &v1.IfVersionOp{Key: op.Key(), Version: op.Version()}}
		case engine.OpIfExists:
			pb.Op = &v1.Op_IfExists{IfExists: &v1.KeyOp{Key: op.Key()}}
		case engine.OpIfAbsent:
			pb.Op = &v1.Op_IfAbsent{IfAbsent: &v1.KeyOp{Key: op.Key()}}
		case engine.OpEnqueue:
			pb.Op = &v1.Op_Enqueue{Enqueue: &v1.EnqueueOp{Queue: op.Queue(), Task: PBTask(op.Task())}}
		}
		out[i] = pb
	}
	return out
}

// LeaseRef converts what a fenced call presents of a lease: id, token and
// secret, which is all the engine checks. nil is the zero lease, which no
// task matches.
func LeaseRef(pb *v1.LeaseRef) engine.Lease {
	return engine.Lease{ID: pb.GetId(), Token: pb.GetToken(), Secret: pb.GetSecret()}
}

// PBLeaseRef converts a lease to what a fenced call presents of it.
func PBLeaseRef(l engine.Lease) *v1.LeaseRef {
	return &v1.LeaseRef{Id: l.ID, Token: l.Token, Secret: l.Secret}
}

// PBLease converts a claimed task.
func PBLease(l engine.Lease) *v1.Lease {
	m := new(v1.Lease)
	fillLease(m, &l, PBNamespace(l.Namespace), PBTime(l.Deadline), PBTime(l.EnqueuedAt))
	return m
}

func fillLease(m *v1.Lease, l *engine.Lease, ns *v1.Namespace, deadline, enqueuedAt *timestamppb.Timestamp) {
	m.Id = l.ID
	m.Namespace = ns
	m.Queue = l.Queue
	m.Kind = l.Kind
	m.Payload = l.Payload
	m.Headers = l.Headers
	m.Progress = l.Progress
	m.Priority = int64(l.Priority)
	m.Attempt = clampInt32(l.Attempt)
	m.MaxAttempts = clampInt32(l.MaxAttempts)
	m.Owner = l.Owner
	m.Token = l.Token
	m.Secret = l.Secret
	m.Deadline = deadline
	m.EnqueuedAt = enqueuedAt
	m.Partition = l.Partition
}

// Lease converts a claimed task the server sent.
func Lease(pb *v1.Lease) engine.Lease {
	return engine.Lease{
		ID:          pb.GetId(),
		Namespace:   Namespace(pb.GetNamespace()),
		Queue:       pb.GetQueue(),
		Kind:        pb.GetKind(),
		Payload:     pb.GetPayload(),
		Headers:     pb.GetHeaders(),
		Progress:    pb.GetProgress(),
		Priority:    int(pb.GetPriority()),
		Attempt:     int(pb.GetAttempt()),
		MaxAttempts: int(pb.GetMaxAttempts()),
		Owner:       pb.GetOwner(),
		Token:       pb.GetToken(),
		Secret:      pb.GetSecret(),
		Deadline:    timeOf(pb.GetDeadline()),
		EnqueuedAt:  timeOf(pb.GetEnqueuedAt()),
		Partition:   pb.GetPartition(),
	}
}

// PBLeases converts claimed tasks. The messages, their timestamps and the
// namespace that consecutive leases share come from a few allocations, not
// five per lease: a claim of a hundred leases made a thousand objects for
// the collector. The messages are for sending, not for changing.
func PBLeases(ls []engine.Lease) []*v1.Lease {
	out := make([]*v1.Lease, len(ls))
	msgs := make([]v1.Lease, len(ls))
	times := newTimeSlab(2 * len(ls))
	var ns *v1.Namespace
	for i := range ls {
		l := &ls[i]
		if ns == nil || ns.Project != l.Namespace.Project || ns.Scope != l.Namespace.Scope {
			ns = PBNamespace(l.Namespace)
		}
		fillLease(&msgs[i], l, ns, times.next(l.Deadline), times.next(l.EnqueuedAt))
		out[i] = &msgs[i]
	}
	return out
}

// timeSlab hands out timestamps from one allocation.
type timeSlab struct{ ts []timestamppb.Timestamp }

func newTimeSlab(n int) timeSlab { return timeSlab{ts: make([]timestamppb.Timestamp, n)} }

// next is PBTime from the slab (nil for the zero time, as PBTime).
func (s *timeSlab) next(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() || len(s.ts) == 0 {
		return PBTime(t)
	}
	m := &s.ts[0]
	s.ts = s.ts[1:]
	m.Seconds, m.Nanos = t.Unix(), int32(t.Nanosecond())
	return m
}

// PBLeaseRefs converts leases to what a batch of fenced calls presents,
// from one allocation.
func PBLeaseRefs(ls []engine.Lease) []*v1.LeaseRef {
	out := make([]*v1.LeaseRef, len(ls))
	refs := make([]v1.LeaseRef, len(ls))
	for i := range ls {
		r := &refs[i]
		r.Id, r.Token, r.Secret = ls[i].ID, ls[i].Token, ls[i].Secret
		out[i] = r
	}
	return out
}

// Leases converts claimed tasks the server sent.
func Leases(pbs []*v1.Lease) []engine.Lease {
	if len(pbs) == 0 {
		return nil
	}
	out := make([]engine.Lease, len(pbs))
	for i, pb := range pbs {
		out[i] = Lease(pb)
	}
	return out
}

// Done converts what a completion commits.
func Done(pb *v1.Done) (engine.Done, error) {
	d := engine.Done{Result: pb.GetResult()}
	var err error
	if d.Ops, err = Ops(pb.GetOps()); err != nil {
		return d, err
	}
	if fs := pb.GetFollowUps(); len(fs) > 0 {
		d.FollowUps = make([]engine.FollowUp, len(fs))
		for i, f := range fs {
			t, err := Task(f.GetTask())
			if err != nil {
				return d, fmt.Errorf("follow-up %d: %w", i, err)
			}
			d.FollowUps[i] = engine.FollowUp{Queue: f.GetQueue(), Task: t}
		}
	}
	return d, nil
}

// PBDone converts what a completion commits.
func PBDone(d engine.Done) *v1.Done {
	pb := &v1.Done{Result: d.Result, Ops: PBOps(d.Ops)}
	for _, f := range d.FollowUps {
		pb.FollowUps = append(pb.FollowUps, &v1.FollowUp{Queue: f.Queue, Task: PBTask(f.Task)})
	}
	return pb
}

// Failure converts a failed attempt.
func Failure(pb *v1.Failure) (engine.Failure, error) {
	f := engine.Failure{Err: pb.GetError(), Permanent: pb.GetPermanent()}
	var err error
	f.RetryAfter, err = Duration("retry after", pb.GetRetryAfter())
	return f, err
}

// PBFailure converts a failed attempt. Its error text is cut as the
// engine records it (engine.ErrorText): a server takes no string over
// MaxStringBytes, and keeps no more than engine.MaxErrorBytes of this one.
func PBFailure(f engine.Failure) *v1.Failure {
	return &v1.Failure{Error: engine.ErrorText(f.Err), Permanent: f.Permanent, RetryAfter: PBDuration(f.RetryAfter)}
}

// PBEnqueued converts the outcomes of enqueues.
func PBEnqueued(es ...engine.Enqueued) []*v1.Enqueued {
	out := make([]*v1.Enqueued, len(es))
	msgs := make([]v1.Enqueued, len(es))
	for i, e := range es {
		m := &msgs[i]
		m.Id, m.Deduplicated = e.ID, e.Deduplicated
		out[i] = m
	}
	return out
}

// Enqueued converts the outcome of an enqueue.
func Enqueued(pb *v1.Enqueued) engine.Enqueued {
	return engine.Enqueued{ID: pb.GetId(), Deduplicated: pb.GetDeduplicated()}
}

// EnqueuedList converts the outcomes of enqueues.
func EnqueuedList(pbs []*v1.Enqueued) []engine.Enqueued {
	if len(pbs) == 0 {
		return nil
	}
	out := make([]engine.Enqueued, len(pbs))
	for i, pb := range pbs {
		out[i] = Enqueued(pb)
	}
	return out
}

// PBTxResult converts the outcome of a transaction.
func PBTxResult(r engine.TxResult) *v1.TxResult {
	return &v1.TxResult{Version: r.Version, Enqueued: PBEnqueued(r.Enqueued...)}
}

// TxResult converts the outcome of a transaction.
func TxResult(pb *v1.TxResult) engine.TxResult {
	return engine.TxResult{Version: pb.GetVersion(), Enqueued: EnqueuedList(pb.GetEnqueued())}
}

// PBTaskInfo converts a task record.
func PBTaskInfo(t engine.TaskInfo) *v1.TaskInfo {
	pb := &v1.TaskInfo{
		Id:              t.ID,
		Namespace:       PBNamespace(t.Namespace),
		Queue:           t.Queue,
		Kind:            t.Kind,
		State:           v1.State(t.State),
		Payload:         t.Payload,
		Headers:         t.Headers,
		Priority:        int64(t.Priority),
		Attempts:        clampInt32(t.Attempts),
		MaxAttempts:     clampInt32(t.MaxAttempts),
		NotBefore:       PBTime(t.NotBefore),
		Owner:           t.Owner,
		Token:           t.Token,
		LeaseUntil:      PBTime(t.LeaseUntil),
		Progress:        t.Progress,
		Result:          t.Result,
		LastError:       t.LastError,
		IdempotencyKey:  t.IdempotencyKey,
		BackoffBase:     PBDuration(t.BackoffBase),
		BackoffMax:      PBDuration(t.BackoffMax),
		CreatedAt:       PBTime(t.CreatedAt),
		UpdatedAt:       PBTime(t.UpdatedAt),
		WaitingOn:       t.WaitingOn,
		Dependents:      t.Dependents,
		OnParentFailure: v1.DependencyPolicy(t.OnParentFailure),
		Partition:       t.Partition,
		Unreadable:      t.Unreadable,
	}
	for _, e := range t.Errors {
		pb.Errors = append(pb.Errors, &v1.AttemptError{Attempt: clampInt32(e.Attempt), At: PBTime(e.At), Error: e.Error})
	}
	return pb
}

// TaskInfo converts a task record the server sent.
func TaskInfo(pb *v1.TaskInfo) engine.TaskInfo {
	t := engine.TaskInfo{
		ID:              pb.GetId(),
		Namespace:       Namespace(pb.GetNamespace()),
		Queue:           pb.GetQueue(),
		Kind:            pb.GetKind(),
		State:           engine.State(pb.GetState()),
		Payload:         pb.GetPayload(),
		Headers:         pb.GetHeaders(),
		Priority:        int(pb.GetPriority()),
		Attempts:        int(pb.GetAttempts()),
		MaxAttempts:     int(pb.GetMaxAttempts()),
		NotBefore:       timeOf(pb.GetNotBefore()),
		Owner:           pb.GetOwner(),
		Token:           pb.GetToken(),
		LeaseUntil:      timeOf(pb.GetLeaseUntil()),
		Progress:        pb.GetProgress(),
		Result:          pb.GetResult(),
		LastError:       pb.GetLastError(),
		IdempotencyKey:  pb.GetIdempotencyKey(),
		BackoffBase:     durationOf(pb.GetBackoffBase()),
		BackoffMax:      durationOf(pb.GetBackoffMax()),
		CreatedAt:       timeOf(pb.GetCreatedAt()),
		UpdatedAt:       timeOf(pb.GetUpdatedAt()),
		WaitingOn:       pb.GetWaitingOn(),
		Dependents:      pb.GetDependents(),
		OnParentFailure: engine.DependencyPolicy(pb.GetOnParentFailure()),
		Partition:       pb.GetPartition(),
		Unreadable:      pb.GetUnreadable(),
	}
	for _, e := range pb.GetErrors() {
		t.Errors = append(t.Errors, engine.AttemptError{Attempt: int(e.GetAttempt()), At: timeOf(e.GetAt()), Error: e.GetError()})
	}
	return t
}

// PBCounts converts per-state counts.
func PBCounts(c engine.Counts) *v1.Counts {
	return &v1.Counts{Ready: int64(c.Ready), Scheduled: int64(c.Scheduled), InFlight: int64(c.InFlight),
		Dead: int64(c.Dead), Completed: int64(c.Completed), Waiting: int64(c.Waiting)}
}

// Counts converts per-state counts the server sent.
func Counts(pb *v1.Counts) engine.Counts {
	return engine.Counts{Ready: int(pb.GetReady()), Scheduled: int(pb.GetScheduled()), InFlight: int(pb.GetInFlight()),
		Dead: int(pb.GetDead()), Completed: int(pb.GetCompleted()), Waiting: int(pb.GetWaiting())}
}

// PBEntry converts a KV entry.
func PBEntry(e engine.Entry) *v1.Entry {
	return &v1.Entry{Key: e.Key, Value: e.Value, Version: e.Version}
}

// Entry converts a KV entry the server sent.
func Entry(pb *v1.Entry) engine.Entry {
	return engine.Entry{Key: pb.GetKey(), Value: pb.GetValue(), Version: pb.GetVersion()}
}

// PBQueueInfo converts a queue's summary.
func PBQueueInfo(q engine.QueueInfo) *v1.QueueInfo {
	t := q.Totals
	return &v1.QueueInfo{
		Namespace:   PBNamespace(q.Namespace),
		Name:        q.Name,
		Counts:      PBCounts(q.Counts),
		OldestReady: PBTime(q.OldestReady),
		Totals: &v1.Totals{Enqueued: t.Enqueued, Claimed: t.Claimed, Completed: t.Completed,
			Retried: t.Retried, DeadLettered: t.DeadLettered},
		Paused: q.Paused,
		Limits: PBLimits(q.Limits),
	}
}

// QueueInfo converts a queue's summary the server sent.
func QueueInfo(pb *v1.QueueInfo) engine.QueueInfo {
	t := pb.GetTotals()
	return engine.QueueInfo{
		Namespace:   Namespace(pb.GetNamespace()),
		Name:        pb.GetName(),
		Counts:      Counts(pb.GetCounts()),
		OldestReady: timeOf(pb.GetOldestReady()),
		Totals: engine.Totals{Enqueued: t.GetEnqueued(), Claimed: t.GetClaimed(), Completed: t.GetCompleted(),
			Retried: t.GetRetried(), DeadLettered: t.GetDeadLettered()},
		Paused: pb.GetPaused(),
		Limits: limitsOf(pb.GetLimits()),
	}
}

// PBStats converts the engine's counters.
func PBStats(s engine.Stats) *v1.Stats {
	return &v1.Stats{Seq: s.Seq, Tasks: int64(s.Tasks), Commits: s.Commits, Enqueued: s.Enqueued,
		Claimed: s.Claimed, Completed: s.Completed, Retried: s.Retried, DeadLettered: s.DeadLettered,
		Reclaimed: s.Reclaimed, LeaseLost: s.LeaseLost, Denied: s.Denied, LogSyncs: s.LogSyncs,
		LogBytes: s.LogBytes, Snapshots: s.Snapshots, Memory: s.Memory, MemoryBudget: s.MemoryBudget,
		ValueLogBytes: s.ValueLogBytes, ValueLiveBytes: s.ValueLiveBytes, UnreadableValues: s.UnreadableValues}
}

// Stats converts the engine's counters the server sent.
func Stats(pb *v1.Stats) engine.Stats {
	return engine.Stats{Seq: pb.GetSeq(), Tasks: int(pb.GetTasks()), Commits: pb.GetCommits(),
		Enqueued: pb.GetEnqueued(), Claimed: pb.GetClaimed(), Completed: pb.GetCompleted(),
		Retried: pb.GetRetried(), DeadLettered: pb.GetDeadLettered(), Reclaimed: pb.GetReclaimed(),
		LeaseLost: pb.GetLeaseLost(), Denied: pb.GetDenied(), LogSyncs: pb.GetLogSyncs(),
		LogBytes: pb.GetLogBytes(), Snapshots: pb.GetSnapshots(), Memory: pb.GetMemory(), MemoryBudget: pb.GetMemoryBudget(),
		ValueLogBytes: pb.GetValueLogBytes(), ValueLiveBytes: pb.GetValueLiveBytes(), UnreadableValues: pb.GetUnreadableValues()}
}
