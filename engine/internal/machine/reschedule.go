package machine

import (
	"fmt"
	"time"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/internal/index"
)

// CmdReschedule is Queue.Reschedule's operation.
const CmdReschedule CmdOp = 23

func init() {
	register(CmdReschedule, "reschedule", Version2, func() Args { return new(Reschedule) })
}

// Reschedule is Queue.Reschedule: a ready, scheduled or waiting task moved
// to a new due time and/or priority. Its arguments are [id at setPriority
// priority] (at in Unix micros, 0 to keep the due time).
type Reschedule struct {
	ID      uint64
	At      int64 // the new due time (micros), 0 to keep it
	Prio    int64 // the new priority, when SetPrio
	SetPrio bool
}

func (*Reschedule) Op() CmdOp { return CmdReschedule }

func (a *Reschedule) encode(e *cmdEncoder) {
	e.uint(a.ID)
	e.int(a.At)
	e.bool(a.SetPrio)
	e.int(a.Prio)
}

func (a *Reschedule) decode(d *cmdDecoder, _ *Command) {
	a.ID, a.At, a.SetPrio, a.Prio = d.uint(), d.int(), d.bool(), d.int()
	if d.err == nil {
		d.fail(a.Check())
	}
}

// maxAt is the first microsecond after the year 9999: a due time is
// before it, as an enqueue's At is.
var maxAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

// Check validates a reschedule's arguments, in the shell and as the
// decoder reads them: a due time after the epoch and before the year
// 10000 (0 keeps the task's), and something to change.
func (a *Reschedule) Check() error {
	switch {
	case a.At < 0 || a.At >= maxAt:
		return invalid("reschedule at %d µs is outside the years 1970-9999", a.At)
	case a.At == 0 && !a.SetPrio:
		return invalid("reschedule with neither a due time nor a priority: nothing to change")
	}
	return nil
}

// plan moves a ready, scheduled or waiting task to a new due time (a.At,
// when set) and priority (a.Prio, when a.SetPrio). A due time at or
// before now makes a scheduled or ready task ready now; a waiting task
// keeps waiting for its dependencies and is due at the new time once they
// complete. A task in flight, dead or completed is a conflict.
func (a *Reschedule) plan(p *Planner, cmd *Command, _ *Result) error {
	t, err := p.s.Task(cmd.Key(), a.ID, p.now)
	if err != nil {
		return err
	}
	switch st := t.StateAt(p.now); st {
	case index.StateReady, index.StateScheduled, index.StateWaiting:
	default:
		return fmt.Errorf("%w: task %d is %s: only a ready, scheduled or waiting task can be rescheduled",
			dockettype.ErrConflict, t.ID, st)
	}
	t, u := p.settle(t) // a lease expired with attempts left: its failed attempt first
	if a.At != 0 {
		u.NotBefore = a.At
		if u.State != index.StateWaiting {
			u.State = index.StateScheduled
			if a.At <= p.now {
				u.State, u.NotBefore = index.StateReady, p.now
			}
		}
	}
	u.Updated = p.now
	if !a.SetPrio || a.Prio == t.Priority {
		p.update(u)
		return nil
	}
	// The priority is part of the record's place in the serving order: the
	// record is put again whole, which moves it in the indexes.
	f := t.With(&u).Fields()
	f.Priority = a.Prio
	p.put(index.Mutation{Kind: index.MutPutTask, Task: f.Task()})
	return nil
}
