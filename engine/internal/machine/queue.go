package machine

import (
	"fmt"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/internal/index"
)

func planEnqueue(p *Planner, cmd *Command, res *Result) error {
	var err error
	if res.Enq, err = p.enqueue(cmd.Key(), &cmd.Task); err != nil {
		return err
	}
	_, err = p.ops(cmd.NS, cmd.Ops, nil)
	return err
}

func planEnqueueBatch(p *Planner, cmd *Command, res *Result) error {
	qk := cmd.Key()
	out := res.Enqs
	if len(out) != len(cmd.Tasks) {
		out = make([]dockettype.Enqueued, len(cmd.Tasks), len(cmd.Tasks)+len(cmd.Ops))
	}
	for i := range cmd.Tasks {
		var err error
		if out[i], err = p.enqueue(qk, &cmd.Tasks[i]); err != nil {
			if len(cmd.Tasks) > 1 {
				err = fmt.Errorf("task %d: %w", i, err)
			}
			return err
		}
	}
	res.Enqs = out
	_, err := p.ops(cmd.NS, cmd.Ops, nil)
	return err
}

func planClaim(p *Planner, cmd *Command, res *Result) error {
	qk := cmd.Key()
	res.Leases = p.claimWithin(qk, cmd.Owner, cmd.Lease, cmd.Max, 0)
	if cmd.Wait && len(res.Leases) == 0 {
		res.Due = p.s.ClaimDue(qk, p.s.Store.Queue(qk), p.now)
	}
	return nil
}

func planComplete(p *Planner, cmd *Command, res *Result) error {
	t, err := p.fenced(cmd.Key(), &cmd.Fence)
	if err != nil {
		return err
	}
	p.complete(t, cmd.Result)
	res.Enqs, err = p.ops(cmd.NS, cmd.Ops, nil)
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

func planCompleteBatch(p *Planner, cmd *Command, res *Result) error {
	qk := cmd.Key()
	errs := cmd.Dup
	for i := range cmd.Fences {
		if errs[i] != nil {
			p.Event(dockettype.EvLeaseLost, qk, 0)
			continue
		}
		t, err := p.fenced(qk, &cmd.Fences[i])
		if err != nil {
			errs[i] = err
			continue
		}
		p.complete(t, nil)
	}
	res.Errs = errs
	return nil
}

func planFail(p *Planner, cmd *Command) error {
	qk := cmd.Key()
	t, err := p.fenced(qk, &cmd.Fence)
	if err != nil {
		return err
	}
	var u index.TaskUpdate
	if cmd.Permanent || t.Attempts >= t.MaxAttempts() {
		u = p.release(t, 0)
		u.State, u.NotBefore = index.StateDead, t.NotBefore
		p.Event(dockettype.EvDead, qk, 0)
	} else {
		delay := cmd.Delay
		if delay <= 0 {
			delay = Backoff(t.BackoffBase(), t.BackoffMax(), t.Attempts)
		}
		u = p.release(t, delay)
		p.Event(dockettype.EvRetried, qk, 0)
	}
	u.Flags, u.LastError = index.UpdLastError|index.UpdAddError, cmd.ErrMsg
	u.ErrAttempt, u.ErrAt = t.Attempts, p.now
	p.update(u)
	if u.State == index.StateDead {
		p.parentEnded(t.ID, parentDied)
	}
	return nil
}

func planHeartbeat(p *Planner, cmd *Command, res *Result) error {
	t, err := p.fenced(cmd.Key(), &cmd.Fence)
	if err != nil {
		return err
	}
	u := index.UpdateOf(t)
	u.LeaseUntil, u.Updated = p.now+cmd.Lease, p.now
	if cmd.HasProg {
		u.Flags, u.Progress = index.UpdProgress, cmd.Progress
	}
	res.Deadline = u.LeaseUntil
	p.update(u)
	return nil
}

func planSnooze(p *Planner, cmd *Command) error {
	t, err := p.fenced(cmd.Key(), &cmd.Fence)
	if err != nil {
		return err
	}
	u := p.release(t, cmd.Delay)
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

func planCancel(p *Planner, cmd *Command, t *index.Task) error {
	if t.State == index.StateWaiting {
		p.cutWaits(t.ID)
	}
	p.put(index.Mutation{Kind: index.MutDeleteTask, Update: index.TaskUpdate{ID: t.ID}})
	if t.State != index.StateCompleted {
		p.ended(t)
	}
	p.Event(dockettype.EvCancelled, cmd.Key(), 0)
	p.parentEnded(t.ID, parentCancelled)
	return nil
}

// Task returns the stored record of task id of queue qk as of now. A task
// of another queue or namespace is reported exactly like one that does not
// exist, and so is a retained completion whose retention has passed at now
// (housekeeping deletes it with the next commit). Call with mu held.
func (s *State) Task(qk index.QueueKey, id uint64, now int64) (*index.Task, error) {
	t, ok := s.Store.Task(id)
	if !ok || t.Queue.Key != qk || t.State == index.StateCompleted && t.Updated() <= s.DoneBefore(now) {
		return nil, fmt.Errorf("%w: task %d in queue %q", dockettype.ErrNotFound, id, qk.Name)
	}
	return t, nil
}

// DoneBefore is the time at or before which a retained completion has
// been forgotten at now, 0 when completions are not retained.
func (s *State) DoneBefore(now int64) int64 {
	if r := s.Retain; r > 0 {
		return now - r
	}
	return 0
}

func planRedrive(p *Planner, _ *Command, t *index.Task) error {
	if st := t.StateAt(p.now); st != index.StateDead {
		return fmt.Errorf("%w: task %d is %s, not dead", dockettype.ErrConflict, t.ID, st)
	}
	p.redrive(t)
	return nil
}

func planRunNow(p *Planner, _ *Command, t *index.Task) error {
	switch st := t.StateAt(p.now); st {
	case index.StateReady:
		return nil // also a due timer or an expired lease: claimable now
	case index.StateScheduled:
		u := index.UpdateOf(t)
		u.State, u.NotBefore, u.Updated = index.StateReady, p.now, p.now
		p.update(u)
		return nil
	default:
		return invalid("task %d is %s: only a scheduled task can be run now", t.ID, st)
	}
}

func (p *Planner) redrive(t *index.Task) {
	_, u := p.settle(t) // an expired last lease is dead: store that first
	if t.State == index.StateInFlight {
		p.parentEnded(t.ID, parentDied) // its death is stored now
	}
	u.State, u.Attempts, u.NotBefore, u.Updated = index.StateReady, 0, p.now, p.now
	p.update(u)
	p.Event(dockettype.EvRedriven, t.Queue.Key, 0)
}

func planRedriveAll(p *Planner, cmd *Command, res *Result) error {
	iq := p.s.Store.Queue(cmd.Key())
	if iq == nil {
		return nil
	}
	n := 0
	// Dead now: stored dead, and expired last leases.
	for _, d := range iq.DeadAt(p.now, 0, false, dockettype.MaxBatch, nil) {
		t, _ := p.s.Store.Task(d.ID)
		p.redrive(t)
		n++
	}
	res.N = n
	return nil
}

func planCompleteClaim(p *Planner, cmd *Command, res *Result) error {
	if err := planComplete(p, cmd, res); err != nil {
		return err
	}
	// The completed task is in flight and its follow-ups are not stored
	// yet: the claim cannot take them. The claim is planned within the
	// queue's settings as Claim's is, the completed task's slot of an
	// in-flight bound (and of its partition's) already free.
	res.Leases = p.claimWithin(cmd.Key(), cmd.Owner, cmd.Lease, cmd.Max, cmd.Fence.ID)
	return nil
}

func planHeartbeatBatch(p *Planner, cmd *Command, res *Result) error {
	qk := cmd.Key()
	errs := cmd.Dup
	res.Deadline = p.now + cmd.Lease
	for i := range cmd.Fences {
		if errs[i] != nil {
			p.Event(dockettype.EvLeaseLost, qk, 0)
			continue
		}
		t, err := p.fenced(qk, &cmd.Fences[i])
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

func planCommit(p *Planner, cmd *Command, res *Result) error {
	var err error
	res.Enqs, err = p.ops(cmd.NS, cmd.Ops, nil)
	return err
}

// ops plans validated ops in namespace ns: assertions first, against the
// state before the commit, then writes and enqueues in order.
func (p *Planner) ops(ns dockettype.Namespace, ops []TxOp, enq []dockettype.Enqueued) ([]dockettype.Enqueued, error) {
	ins := idxNS(ns)
	for i := range ops {
		op := &ops[i]
		var k index.AssertKind
		switch op.Kind {
		case dockettype.OpIfVersion:
			k = index.AssertKVVersion
		case dockettype.OpIfExists:
			k = index.AssertKVExists
		case dockettype.OpIfAbsent:
			k = index.AssertKVAbsent
		default:
			continue
		}
		e, ok := p.s.Store.KV(ins, op.Key)
		switch {
		case k == index.AssertKVExists && !ok:
			return nil, fmt.Errorf("%w: key %q does not exist", dockettype.ErrConflict, op.Key)
		case k == index.AssertKVAbsent && ok:
			return nil, fmt.Errorf("%w: key %q exists", dockettype.ErrConflict, op.Key)
		case k == index.AssertKVVersion && !ok:
			return nil, fmt.Errorf("%w: key %q does not exist (want version %d)", dockettype.ErrConflict, op.Key, op.Version)
		case k == index.AssertKVVersion && e.Version != op.Version:
			return nil, fmt.Errorf("%w: key %q has version %d, not %d", dockettype.ErrConflict, op.Key, e.Version, op.Version)
		}
		p.B.Assertions = append(p.B.Assertions, index.Assertion{Kind: k, NS: ins, Key: op.Key, Version: op.Version})
	}
	for i := range ops {
		op := &ops[i]
		switch op.Kind {
		case dockettype.OpSet:
			p.B.Mutations = append(p.B.Mutations, index.Mutation{Kind: index.MutSetKV,
				KV: index.KV{Namespace: ins, Key: op.Key, Value: op.Value}})
		case dockettype.OpDelete:
			p.B.Mutations = append(p.B.Mutations, index.Mutation{Kind: index.MutDeleteKV,
				KV: index.KV{Namespace: ins, Key: op.Key}})
		case dockettype.OpEnqueue:
			e, err := p.enqueue(index.QueueKey{Namespace: ins, Name: op.Queue}, &op.Spec)
			if err != nil {
				return nil, err
			}
			enq = append(enq, e)
		}
	}
	return enq, nil
}
