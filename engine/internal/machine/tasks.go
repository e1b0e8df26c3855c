package machine

import (
	"fmt"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/internal/index"
)

// The operations on tasks of a queue by id, and on its dead tasks.
const (
	CmdCancel     CmdOp = 9
	CmdRedrive    CmdOp = 10
	CmdRedriveAll CmdOp = 11
	CmdRunNow     CmdOp = 12
)

func init() {
	register(CmdCancel, "cancel", Version1, func() Args { return new(Cancel) })
	register(CmdRedrive, "redrive", Version1, func() Args { return new(Redrive) })
	register(CmdRedriveAll, "redrive all", Version1, func() Args { return new(RedriveAll) })
	register(CmdRunNow, "run now", Version1, func() Args { return new(RunNow) })
}

// Cancel is Queue.Cancel: task ID deleted. Its arguments are [id].
type Cancel struct{ ID uint64 }

func (*Cancel) Op() CmdOp                          { return CmdCancel }
func (a *Cancel) encode(e *cmdEncoder)             { e.uint(a.ID) }
func (a *Cancel) decode(d *cmdDecoder, _ *Command) { a.ID = d.uint() }

func (a *Cancel) plan(p *Planner, cmd *Command, _ *Result) error {
	t, err := p.s.Task(cmd.Key(), a.ID, p.now)
	if err != nil {
		return err
	}
	p.cancel(cmd.Key(), t)
	return nil
}

func (p *Planner) cancel(qk index.QueueKey, t *index.Task) {
	if t.State == index.StateWaiting {
		p.cutWaits(t.ID)
	}
	p.put(index.Mutation{Kind: index.MutDeleteTask, Update: index.TaskUpdate{ID: t.ID}})
	if t.State != index.StateCompleted {
		p.ended(t)
	}
	p.Event(dockettype.EvCancelled, qk, 0)
	p.parentEnded(t.ID, parentCancelled)
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

// Redrive is Queue.Redrive: dead task ID ready again with its attempts
// reset. Its arguments are [id].
type Redrive struct{ ID uint64 }

func (*Redrive) Op() CmdOp                          { return CmdRedrive }
func (a *Redrive) encode(e *cmdEncoder)             { e.uint(a.ID) }
func (a *Redrive) decode(d *cmdDecoder, _ *Command) { a.ID = d.uint() }

func (a *Redrive) plan(p *Planner, cmd *Command, _ *Result) error {
	t, err := p.s.Task(cmd.Key(), a.ID, p.now)
	if err != nil {
		return err
	}
	if st := t.StateAt(p.now); st != index.StateDead {
		return fmt.Errorf("%w: task %d is %s, not dead", dockettype.ErrConflict, t.ID, st)
	}
	p.redrive(t)
	return nil
}

// RunNow is Queue.RunNow: scheduled task ID ready now. Its arguments are
// [id].
type RunNow struct{ ID uint64 }

func (*RunNow) Op() CmdOp                          { return CmdRunNow }
func (a *RunNow) encode(e *cmdEncoder)             { e.uint(a.ID) }
func (a *RunNow) decode(d *cmdDecoder, _ *Command) { a.ID = d.uint() }

func (a *RunNow) plan(p *Planner, cmd *Command, _ *Result) error {
	t, err := p.s.Task(cmd.Key(), a.ID, p.now)
	if err != nil {
		return err
	}
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

// RedriveAll is Queue.RedriveAll: up to MaxBatch dead tasks of the queue
// ready again (Result.N of them). It has no arguments.
type RedriveAll struct{}

func (*RedriveAll) Op() CmdOp                    { return CmdRedriveAll }
func (*RedriveAll) encode(*cmdEncoder)           {}
func (*RedriveAll) decode(*cmdDecoder, *Command) {}

func (*RedriveAll) plan(p *Planner, cmd *Command, res *Result) error {
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
