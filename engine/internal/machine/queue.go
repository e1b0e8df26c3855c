package machine

import (
	"fmt"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/internal/index"
)

// The operations of leases: claims and what a lease's holder does with
// its task.
const (
	CmdClaim          CmdOp = 3
	CmdComplete       CmdOp = 4
	CmdCompleteBatch  CmdOp = 5
	CmdFail           CmdOp = 6
	CmdHeartbeat      CmdOp = 7
	CmdSnooze         CmdOp = 8
	CmdCompleteClaim  CmdOp = 20
	CmdHeartbeatBatch CmdOp = 21
)

func init() {
	register(CmdClaim, "claim", Version1, func() Args { return new(Claim) })
	register(CmdComplete, "complete", Version1, func() Args { return new(Complete) })
	register(CmdCompleteBatch, "complete batch", Version1, func() Args { return new(CompleteBatch) })
	register(CmdFail, "fail", Version1, func() Args { return new(Fail) })
	register(CmdHeartbeat, "heartbeat", Version1, func() Args { return new(Heartbeat) })
	register(CmdSnooze, "snooze", Version1, func() Args { return new(Snooze) })
	register(CmdCompleteClaim, "complete and claim", Version2, func() Args { return new(CompleteClaim) })
	register(CmdHeartbeatBatch, "heartbeat batch", Version2, func() Args { return new(HeartbeatBatch) })
}

// Claim is Queue.Claim and ClaimWait: up to Max tasks leased to Owner for
// Lease micros. Its arguments are [owner lease max wait]; the command
// carries a seed other than 0.
type Claim struct {
	Owner string
	Lease int64
	Max   int
	Wait  bool // from ClaimWait: with nothing leased, say when to retry (Result.Due)
}

func (*Claim) Op() CmdOp { return CmdClaim }

func (a *Claim) encode(e *cmdEncoder) {
	e.str(a.Owner)
	e.int(a.Lease)
	e.int(int64(a.Max))
	e.bool(a.Wait)
}

func (a *Claim) decode(d *cmdDecoder, cmd *Command) {
	a.Owner, a.Lease, a.Max, a.Wait = d.str(), d.int(), int(d.int()), d.bool()
	if d.err == nil && (a.Max < 1 || a.Max > dockettype.MaxBatch || a.Lease < 1 || cmd.Seed == 0) {
		d.fail(fmt.Errorf("claim of %d for %d µs with seed %d", a.Max, a.Lease, cmd.Seed))
	}
}

func (a *Claim) plan(p *Planner, cmd *Command, res *Result) error {
	qk := cmd.Key()
	res.Leases = p.claimWithin(qk, a.Owner, a.Lease, a.Max, 0)
	if a.Wait && len(res.Leases) == 0 {
		res.Due = p.s.ClaimDue(qk, p.s.Store.Queue(qk), p.now)
	}
	return nil
}

// Complete is Lease.Complete: the fenced task ends with Result, then ops
// (its follow-ups). Its arguments are [fence result [vop...]].
type Complete struct {
	Fence  dockettype.Lease // ID, Token and Secret
	Result []byte
	Ops    []TxOp
}

func (*Complete) Op() CmdOp         { return CmdComplete }
func (a *Complete) version() uint64 { return specsVersion(nil, a.Ops) }

func (a *Complete) encode(e *cmdEncoder) {
	e.fence(&a.Fence)
	e.bytes(a.Result)
	e.vops(a.Ops)
}

func (a *Complete) decode(d *cmdDecoder, _ *Command) {
	d.fence(&a.Fence)
	a.Result = d.bytes()
	a.Ops = d.vops()
}

func (a *Complete) plan(p *Planner, cmd *Command, res *Result) error {
	t, err := p.fenced(cmd.Key(), &a.Fence)
	if err != nil {
		return err
	}
	p.complete(t, a.Result)
	res.Enqs, err = p.ops(cmd.NS, a.Ops, nil)
	return err
}

// complete plans the end of a fenced task: deleted, or kept as completed
// with its result when retention is on.
//
// Tasks the batch enqueues after it are its follow-ups: each records the
// task as its parent, and a kept completed task lists them.
func (p *Planner) complete(t *index.Task, result []byte) {
	p.parent, p.parentMut = t.ID, -1
	if p.s.Retain > 0 {
		u := index.UpdateOf(t)
		u.State, u.Owner, u.LeaseUntil, u.Updated, u.Secret = index.StateCompleted, "", 0, p.now, 0
		u.Flags, u.Result = index.UpdResult, result
		p.parentMut = len(p.B.Mutations)
		p.update(u)
	} else {
		p.put(index.Mutation{Kind: index.MutDeleteTask, Update: index.TaskUpdate{ID: t.ID, Flags: index.UpdCompleted}})
	}
	p.ended(t)
	p.Event(dockettype.EvCompleted, t.Queue.Key, p.now-t.Created)
	p.parentEnded(t.ID, parentCompleted)
}

// CompleteClaim is Lease.CompleteAndClaim: a Complete, then a claim as
// Claim's (without a wait). Its arguments are Complete's, then [owner
// lease max]; the command carries a seed other than 0.
type CompleteClaim struct {
	Complete
	Owner string
	Lease int64
	Max   int
}

func (*CompleteClaim) Op() CmdOp { return CmdCompleteClaim }

func (a *CompleteClaim) encode(e *cmdEncoder) {
	a.Complete.encode(e)
	e.str(a.Owner)
	e.int(a.Lease)
	e.int(int64(a.Max))
}

func (a *CompleteClaim) decode(d *cmdDecoder, cmd *Command) {
	a.Complete.decode(d, cmd)
	a.Owner, a.Lease, a.Max = d.str(), d.int(), int(d.int())
	if d.err == nil && (a.Max < 1 || a.Max > dockettype.MaxBatch || a.Lease < 1 || cmd.Seed == 0) {
		d.fail(fmt.Errorf("complete and claim of %d for %d µs with seed %d", a.Max, a.Lease, cmd.Seed))
	}
}

func (a *CompleteClaim) plan(p *Planner, cmd *Command, res *Result) error {
	if err := a.Complete.plan(p, cmd, res); err != nil {
		return err
	}
	// The completed task is in flight and its follow-ups are not stored
	// yet: the claim cannot take them. The claim is planned within the
	// queue's settings as Claim's is, the completed task's slot of an
	// in-flight bound (and of its partition's) already free.
	res.Leases = p.claimWithin(cmd.Key(), a.Owner, a.Lease, a.Max, a.Fence.ID)
	return nil
}

// CompleteBatch is Queue.CompleteBatch: the fenced tasks end, with no
// result. Its arguments are [[fence...]].
type CompleteBatch struct {
	Fences []dockettype.Lease
	// Dup marks the leases refused before planning because their task
	// appears earlier in the batch (RepeatedLeases).
	Dup []error
}

func (*CompleteBatch) Op() CmdOp                          { return CmdCompleteBatch }
func (a *CompleteBatch) encode(e *cmdEncoder)             { e.fences(a.Fences) }
func (a *CompleteBatch) decode(d *cmdDecoder, _ *Command) { a.Fences, a.Dup = d.fences() }

func (a *CompleteBatch) plan(p *Planner, cmd *Command, res *Result) error {
	qk := cmd.Key()
	errs := a.Dup
	for i := range a.Fences {
		if errs[i] != nil {
			p.Event(dockettype.EvLeaseLost, qk, 0)
			continue
		}
		t, err := p.fenced(qk, &a.Fences[i])
		if err != nil {
			errs[i] = err
			continue
		}
		p.complete(t, nil)
	}
	res.Errs = errs
	return nil
}

// Fail is Lease.Fail: the fenced task is retried after Delay micros (0:
// its backoff), or dead when Permanent or out of attempts. Its arguments
// are [fence error permanent retryAfter].
type Fail struct {
	Fence     dockettype.Lease
	ErrMsg    string
	Permanent bool
	Delay     int64
}

func (*Fail) Op() CmdOp { return CmdFail }

func (a *Fail) encode(e *cmdEncoder) {
	e.fence(&a.Fence)
	e.str(a.ErrMsg)
	e.bool(a.Permanent)
	e.int(a.Delay)
}

func (a *Fail) decode(d *cmdDecoder, _ *Command) {
	d.fence(&a.Fence)
	a.ErrMsg, a.Permanent, a.Delay = d.str(), d.bool(), d.int()
}

func (a *Fail) plan(p *Planner, cmd *Command, _ *Result) error {
	qk := cmd.Key()
	t, err := p.fenced(qk, &a.Fence)
	if err != nil {
		return err
	}
	var u index.TaskUpdate
	if a.Permanent || t.Attempts >= t.MaxAttempts() {
		u = p.release(t, 0)
		u.State, u.NotBefore = index.StateDead, t.NotBefore
		p.Event(dockettype.EvDead, qk, 0)
	} else {
		delay := a.Delay
		if delay <= 0 {
			delay = Backoff(t.BackoffBase(), t.BackoffMax(), t.Attempts)
		}
		u = p.release(t, delay)
		p.Event(dockettype.EvRetried, qk, 0)
	}
	u.Flags, u.LastError = index.UpdLastError|index.UpdAddError, a.ErrMsg
	u.ErrAttempt, u.ErrAt = t.Attempts, p.now
	p.update(u)
	if u.State == index.StateDead {
		p.parentEnded(t.ID, parentDied)
	}
	return nil
}

// Heartbeat is Lease.Heartbeat: the fenced task's lease extended by Lease
// micros, its progress set when HasProg. Its arguments are [fence extend
// hasProgress progress].
type Heartbeat struct {
	Fence    dockettype.Lease
	Lease    int64
	HasProg  bool
	Progress []byte
}

func (*Heartbeat) Op() CmdOp { return CmdHeartbeat }

func (a *Heartbeat) encode(e *cmdEncoder) {
	e.fence(&a.Fence)
	e.int(a.Lease)
	e.bool(a.HasProg)
	e.bytes(a.Progress)
}

func (a *Heartbeat) decode(d *cmdDecoder, _ *Command) {
	d.fence(&a.Fence)
	a.Lease, a.HasProg, a.Progress = d.int(), d.bool(), d.bytes()
}

func (a *Heartbeat) plan(p *Planner, cmd *Command, res *Result) error {
	t, err := p.fenced(cmd.Key(), &a.Fence)
	if err != nil {
		return err
	}
	u := index.UpdateOf(t)
	u.LeaseUntil, u.Updated = p.now+a.Lease, p.now
	if a.HasProg {
		u.Flags, u.Progress = index.UpdProgress, a.Progress
	}
	res.Deadline = u.LeaseUntil
	p.update(u)
	return nil
}

// HeartbeatBatch is Queue.HeartbeatBatch: the fenced tasks' leases
// extended by Lease micros. Its arguments are [[fence...] extend].
type HeartbeatBatch struct {
	Fences []dockettype.Lease
	Dup    []error // as CompleteBatch's
	Lease  int64
}

func (*HeartbeatBatch) Op() CmdOp { return CmdHeartbeatBatch }

func (a *HeartbeatBatch) encode(e *cmdEncoder) {
	e.fences(a.Fences)
	e.int(a.Lease)
}

func (a *HeartbeatBatch) decode(d *cmdDecoder, _ *Command) {
	a.Fences, a.Dup = d.fences()
	if a.Lease = d.int(); d.err == nil && a.Lease < 1 {
		d.fail(fmt.Errorf("heartbeat batch extending by %d µs", a.Lease))
	}
}

func (a *HeartbeatBatch) plan(p *Planner, cmd *Command, res *Result) error {
	qk := cmd.Key()
	errs := a.Dup
	res.Deadline = p.now + a.Lease
	for i := range a.Fences {
		if errs[i] != nil {
			p.Event(dockettype.EvLeaseLost, qk, 0)
			continue
		}
		t, err := p.fenced(qk, &a.Fences[i])
		if err != nil {
			errs[i] = err
			continue
		}
		u := index.UpdateOf(t)
		u.LeaseUntil, u.Updated = res.Deadline, p.now
		p.update(u)
	}
	res.Errs = errs
	return nil
}

// Snooze is Lease.Snooze: the fenced task back to waiting for Delay
// micros, the attempt not counted. Its arguments are [fence delay].
type Snooze struct {
	Fence dockettype.Lease
	Delay int64
}

func (*Snooze) Op() CmdOp { return CmdSnooze }

func (a *Snooze) encode(e *cmdEncoder) {
	e.fence(&a.Fence)
	e.int(a.Delay)
}

func (a *Snooze) decode(d *cmdDecoder, _ *Command) {
	d.fence(&a.Fence)
	a.Delay = d.int()
}

func (a *Snooze) plan(p *Planner, cmd *Command, _ *Result) error {
	t, err := p.fenced(cmd.Key(), &a.Fence)
	if err != nil {
		return err
	}
	u := p.release(t, a.Delay)
	u.Attempts = t.Attempts - 1
	p.update(u)
	return nil
}

// release plans a leased task's return to waiting: no owner, claimable
// again after delay micros (at once when delay is 0).
func (p *Planner) release(t *index.Task, delay int64) index.TaskUpdate {
	u := index.UpdateOf(t)
	u.Owner, u.LeaseUntil, u.Updated, u.Secret = "", 0, p.now, 0
	u.State, u.NotBefore = index.StateScheduled, p.now+delay
	if delay <= 0 {
		u.State, u.NotBefore = index.StateReady, p.now
	}
	return u
}
