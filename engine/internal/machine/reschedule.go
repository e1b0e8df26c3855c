package machine

import (
	"fmt"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/internal/index"
)

// opReschedule is the operation of Queue.Reschedule (CmdReschedule): a
// ready, scheduled or waiting task moved to a new due time and/or
// priority. Its arguments are [id at setPriority priority].
type opReschedule struct{}

func (opReschedule) since() uint64 { return Version2 }

func (opReschedule) plan(p *Planner, cmd *Command, res *Result) error {
	return onTask(p, cmd, planReschedule)
}

func (opReschedule) encode(e *cmdEncoder, cmd *Command) {
	e.uint(cmd.ID)
	e.int(cmd.At)
	e.bool(cmd.SetPrio)
	e.int(cmd.Prio)
}

func (opReschedule) decode(d *cmdDecoder, cmd *Command) {
	if !d.v2(cmd.Op) {
		return
	}
	cmd.ID = d.uint()
	cmd.At = d.int()
	cmd.SetPrio = d.bool()
	cmd.Prio = d.int()
	if d.err == nil {
		d.fail(validate.Reschedule(cmd.At, cmd.SetPrio, cmd.Prio))
	}
}

// planReschedule moves a ready, scheduled or waiting task to a new due time
// (cmd.At, when set) and priority (cmd.Prio, when cmd.SetPrio). A due time
// at or before now makes a scheduled or ready task ready now; a waiting task
// keeps waiting for its dependencies and is due at the new time once they
// complete. A task in flight, dead or completed is a conflict.
func planReschedule(p *Planner, cmd *Command, t *index.Task) error {
	switch st := t.StateAt(p.now); st {
	case index.StateReady, index.StateScheduled, index.StateWaiting:
	default:
		return fmt.Errorf("%w: task %d is %s: only a ready, scheduled or waiting task can be rescheduled",
			dockettype.ErrConflict, t.ID, st)
	}
	t, u := p.settle(t) // a lease expired with attempts left: its failed attempt first
	if cmd.At != 0 {
		u.NotBefore = cmd.At
		if u.State != index.StateWaiting {
			u.State = index.StateScheduled
			if cmd.At <= p.now {
				u.State, u.NotBefore = index.StateReady, p.now
			}
		}
	}
	u.Updated = p.now
	if !cmd.SetPrio || cmd.Prio == t.Priority {
		p.update(u)
		return nil
	}
	// The priority is part of the record's place in the serving order: the
	// record is put again whole, which moves it in the indexes.
	f := t.With(&u).Fields()
	f.Priority = cmd.Prio
	p.put(index.Mutation{Kind: index.MutPutTask, Task: f.Task()})
	return nil
}
