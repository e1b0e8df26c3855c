package machine

import (
	"fmt"
	"math"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/internal/index"
)

// operation is one operation of a command: how it is planned, and how its
// arguments are written to and read from the replicated log. Every
// operation is a type of its own, registered in operations by its number.
type operation interface {
	plan(p *Planner, cmd *Command, res *Result) error
	encode(e *cmdEncoder, cmd *Command)
	decode(d *cmdDecoder, cmd *Command)
}

// since is an operation added after version 1: the oldest command version
// that carries it. Its decode refuses an older version (v2).
type since interface{ since() uint64 }

// operations are the operations by number (CmdOp).
var operations = [...]operation{
	CmdEnqueue:        opEnqueue{},
	CmdEnqueueBatch:   opEnqueueBatch{},
	CmdClaim:          opClaim{},
	CmdComplete:       opComplete{},
	CmdCompleteBatch:  opCompleteBatch{},
	CmdFail:           opFail{},
	CmdHeartbeat:      opHeartbeat{},
	CmdSnooze:         opSnooze{},
	CmdCancel:         opOnTask{planCancel},
	CmdRedrive:        opOnTask{planRedrive},
	CmdRedriveAll:     opRedriveAll{},
	CmdRunNow:         opOnTask{planRunNow},
	CmdCommit:         opCommit{},
	CmdSetPaused:      opSetPaused{},
	CmdSetLimits:      opSetLimits{},
	CmdCompleteClaim:  opCompleteClaim{},
	CmdHeartbeatBatch: opHeartbeatBatch{},
	CmdBulk:           opBulk{},
	CmdReschedule:     opReschedule{},
}

// operationOf returns the operation numbered op, nil for none.
func operationOf(op CmdOp) operation {
	if int(op) < len(operations) {
		return operations[op]
	}
	return nil
}

type opEnqueue struct{}

func (opEnqueue) plan(p *Planner, cmd *Command, res *Result) error {
	return planEnqueue(p, cmd, res)
}

func (opEnqueue) encode(e *cmdEncoder, cmd *Command) {
	e.spec(&cmd.Task)
	e.vops(cmd.Ops)
}

func (opEnqueue) decode(d *cmdDecoder, cmd *Command) {
	d.spec(&cmd.Task)
	cmd.Ops = d.vops()
}

type opEnqueueBatch struct{}

func (opEnqueueBatch) plan(p *Planner, cmd *Command, res *Result) error {
	return planEnqueueBatch(p, cmd, res)
}

func (opEnqueueBatch) encode(e *cmdEncoder, cmd *Command) {
	e.array(len(cmd.Tasks))
	for i := range cmd.Tasks {
		e.spec(&cmd.Tasks[i])
	}
	e.vops(cmd.Ops)
}

func (opEnqueueBatch) decode(d *cmdDecoder, cmd *Command) {
	n := d.array(dockettype.MaxBatch)
	cmd.Tasks = make([]Spec, n)
	for i := range cmd.Tasks {
		d.spec(&cmd.Tasks[i])
	}
	cmd.Ops = d.vops()
}

type opClaim struct{}

func (opClaim) plan(p *Planner, cmd *Command, res *Result) error {
	return planClaim(p, cmd, res)
}

func (opClaim) encode(e *cmdEncoder, cmd *Command) {
	e.str(cmd.Owner)
	e.int(cmd.Lease)
	e.int(int64(cmd.Max))
	e.bool(cmd.Wait)
}

func (opClaim) decode(d *cmdDecoder, cmd *Command) {
	cmd.Owner = d.str()
	cmd.Lease = d.int()
	cmd.Max = int(d.int())
	cmd.Wait = d.bool()
	if d.err == nil && (cmd.Max < 1 || cmd.Max > dockettype.MaxBatch || cmd.Lease < 1 || cmd.Seed == 0) {
		d.fail(fmt.Errorf("claim of %d for %d µs with seed %d", cmd.Max, cmd.Lease, cmd.Seed))
	}
}

type opComplete struct{}

func (opComplete) plan(p *Planner, cmd *Command, res *Result) error {
	return planComplete(p, cmd, res)
}

func (opComplete) encode(e *cmdEncoder, cmd *Command) {
	e.fence(&cmd.Fence)
	e.bytes(cmd.Result)
	e.vops(cmd.Ops)
}

func (opComplete) decode(d *cmdDecoder, cmd *Command) {
	d.fence(&cmd.Fence)
	cmd.Result = d.bytes()
	cmd.Ops = d.vops()
}

type opCompleteBatch struct{}

func (opCompleteBatch) plan(p *Planner, cmd *Command, res *Result) error {
	return planCompleteBatch(p, cmd, res)
}

func (opCompleteBatch) encode(e *cmdEncoder, cmd *Command) {
	e.array(len(cmd.Fences))
	for i := range cmd.Fences {
		e.fence(&cmd.Fences[i])
	}
}

func (opCompleteBatch) decode(d *cmdDecoder, cmd *Command) {
	n := d.array(dockettype.MaxBatch)
	cmd.Fences = make([]dockettype.Lease, n)
	for i := range cmd.Fences {
		d.fence(&cmd.Fences[i])
	}
	cmd.Dup = RepeatedLeases(cmd.Fences)
}

type opFail struct{}

func (opFail) plan(p *Planner, cmd *Command, res *Result) error {
	return planFail(p, cmd)
}

func (opFail) encode(e *cmdEncoder, cmd *Command) {
	e.fence(&cmd.Fence)
	e.str(cmd.ErrMsg)
	e.bool(cmd.Permanent)
	e.int(cmd.Delay)
}

func (opFail) decode(d *cmdDecoder, cmd *Command) {
	d.fence(&cmd.Fence)
	cmd.ErrMsg = d.str()
	cmd.Permanent = d.bool()
	cmd.Delay = d.int()
}

type opHeartbeat struct{}

func (opHeartbeat) plan(p *Planner, cmd *Command, res *Result) error {
	return planHeartbeat(p, cmd, res)
}

func (opHeartbeat) encode(e *cmdEncoder, cmd *Command) {
	e.fence(&cmd.Fence)
	e.int(cmd.Lease)
	e.bool(cmd.HasProg)
	e.bytes(cmd.Progress)
}

func (opHeartbeat) decode(d *cmdDecoder, cmd *Command) {
	d.fence(&cmd.Fence)
	cmd.Lease = d.int()
	cmd.HasProg = d.bool()
	cmd.Progress = d.bytes()
}

type opSnooze struct{}

func (opSnooze) plan(p *Planner, cmd *Command, res *Result) error {
	return planSnooze(p, cmd)
}

func (opSnooze) encode(e *cmdEncoder, cmd *Command) {
	e.fence(&cmd.Fence)
	e.int(cmd.Delay)
}

func (opSnooze) decode(d *cmdDecoder, cmd *Command) {
	d.fence(&cmd.Fence)
	cmd.Delay = d.int()
}

// opOnTask is an operation on one task of the queue named by its id
// (cancel, redrive, run now): the id is its only argument.
type opOnTask struct {
	planTask func(*Planner, *Command, *index.Task) error
}

func (o opOnTask) plan(p *Planner, cmd *Command, res *Result) error {
	return onTask(p, cmd, o.planTask)
}

func (opOnTask) encode(e *cmdEncoder, cmd *Command) {
	e.uint(cmd.ID)
}

func (opOnTask) decode(d *cmdDecoder, cmd *Command) {
	cmd.ID = d.uint()
}

type opRedriveAll struct{}

func (opRedriveAll) plan(p *Planner, cmd *Command, res *Result) error {
	return planRedriveAll(p, cmd, res)
}

func (opRedriveAll) encode(e *cmdEncoder, cmd *Command) {
}

func (opRedriveAll) decode(d *cmdDecoder, cmd *Command) {
}

type opCommit struct{}

func (opCommit) plan(p *Planner, cmd *Command, res *Result) error {
	return planCommit(p, cmd, res)
}

func (opCommit) encode(e *cmdEncoder, cmd *Command) {
	e.vops(cmd.Ops)
}

func (opCommit) decode(d *cmdDecoder, cmd *Command) {
	cmd.Ops = d.vops()
}

type opSetPaused struct{}

func (opSetPaused) since() uint64 { return Version2 }

func (opSetPaused) plan(p *Planner, cmd *Command, res *Result) error {
	return planSetPaused(p, cmd)
}

func (opSetPaused) encode(e *cmdEncoder, cmd *Command) {
	e.bool(cmd.Paused)
}

func (opSetPaused) decode(d *cmdDecoder, cmd *Command) {
	if d.v2(cmd.Op) {
		cmd.Paused = d.bool()
	}
}

type opSetLimits struct{}

func (opSetLimits) since() uint64 { return Version2 }

func (opSetLimits) plan(p *Planner, cmd *Command, res *Result) error {
	return planSetLimits(p, cmd)
}

func (opSetLimits) encode(e *cmdEncoder, cmd *Command) {
	l := &cmd.Limits
	e.int(int64(l.MaxInFlight))
	e.int(int64(l.Rate))
	e.int(l.Per.Microseconds())
	e.int(int64(l.Burst))
	if e.ver >= Version {
		e.int(int64(l.PartitionMaxInFlight))
		e.int(int64(l.PartitionRate))
		e.int(l.PartitionPer.Microseconds())
		e.int(int64(l.PartitionBurst))
	}
}

func (opSetLimits) decode(d *cmdDecoder, cmd *Command) {
	if !d.v2(cmd.Op) {
		return
	}
	l := &cmd.Limits
	l.MaxInFlight, l.Rate = int(d.small()), int(d.small())
	l.Per, l.Burst = micros(d.int()), int(d.small())
	if d.ver >= Version {
		l.PartitionMaxInFlight, l.PartitionRate = int(d.small()), int(d.small())
		l.PartitionPer, l.PartitionBurst = micros(d.int()), int(d.small())
	}
	if d.err == nil {
		d.fail(validate.Limits(*l))
	}
}

type opCompleteClaim struct{}

func (opCompleteClaim) since() uint64 { return Version2 }

func (opCompleteClaim) plan(p *Planner, cmd *Command, res *Result) error {
	return planCompleteClaim(p, cmd, res)
}

func (opCompleteClaim) encode(e *cmdEncoder, cmd *Command) {
	e.fence(&cmd.Fence)
	e.bytes(cmd.Result)
	e.vops(cmd.Ops)
	e.str(cmd.Owner)
	e.int(cmd.Lease)
	e.int(int64(cmd.Max))
}

func (opCompleteClaim) decode(d *cmdDecoder, cmd *Command) {
	if !d.v2(cmd.Op) {
		return
	}
	d.fence(&cmd.Fence)
	cmd.Result = d.bytes()
	cmd.Ops = d.vops()
	cmd.Owner = d.str()
	cmd.Lease = d.int()
	cmd.Max = int(d.int())
	if d.err == nil && (cmd.Max < 1 || cmd.Max > dockettype.MaxBatch || cmd.Lease < 1 || cmd.Seed == 0) {
		d.fail(fmt.Errorf("complete and claim of %d for %d µs with seed %d", cmd.Max, cmd.Lease, cmd.Seed))
	}
}

type opHeartbeatBatch struct{}

func (opHeartbeatBatch) since() uint64 { return Version2 }

func (opHeartbeatBatch) plan(p *Planner, cmd *Command, res *Result) error {
	return planHeartbeatBatch(p, cmd, res)
}

func (opHeartbeatBatch) encode(e *cmdEncoder, cmd *Command) {
	e.array(len(cmd.Fences))
	for i := range cmd.Fences {
		e.fence(&cmd.Fences[i])
	}
	e.int(cmd.Lease)
}

func (opHeartbeatBatch) decode(d *cmdDecoder, cmd *Command) {
	if !d.v2(cmd.Op) {
		return
	}
	n := d.array(dockettype.MaxBatch)
	cmd.Fences = make([]dockettype.Lease, n)
	for i := range cmd.Fences {
		d.fence(&cmd.Fences[i])
	}
	cmd.Dup = RepeatedLeases(cmd.Fences)
	cmd.Lease = d.int()
	if d.err == nil && cmd.Lease < 1 {
		d.fail(fmt.Errorf("heartbeat batch extending by %d µs", cmd.Lease))
	}
}

type opBulk struct{}

func (opBulk) since() uint64 { return Version2 }

func (opBulk) plan(p *Planner, cmd *Command, res *Result) error {
	return planBulk(p, cmd, res)
}

func (opBulk) encode(e *cmdEncoder, cmd *Command) {
	b := &cmd.Bulk
	f := &b.Filter
	e.uint(uint64(b.Action))
	e.uint(b.From)
	e.int(int64(b.Scan))
	e.array(len(f.States))
	for _, st := range f.States {
		e.uint(uint64(st))
	}
	e.uint(uint64(f.Retrying))
	e.str(f.Kind)
	e.str(f.Error)
	e.str(f.Partition)
	e.str(f.HeaderKey)
	e.str(f.HeaderValue)
	e.uint(f.MinID)
	e.uint(f.MaxID)
	since, before := int64(math.MinInt64), int64(math.MaxInt64)
	if !f.EnqueuedSince.IsZero() {
		since = f.EnqueuedSince.UnixMicro()
	}
	if !f.EnqueuedBefore.IsZero() {
		before = f.EnqueuedBefore.UnixMicro()
	}
	e.int(since)
	e.int(before)
}

func (opBulk) decode(d *cmdDecoder, cmd *Command) {
	if !d.v2(cmd.Op) {
		return
	}
	d.bulk(&cmd.Bulk)
}

// onTask plans an operation on one task of the command's queue.
func onTask(p *Planner, cmd *Command, plan func(*Planner, *Command, *index.Task) error) error {
	t, err := p.s.Task(cmd.Key(), cmd.ID, p.now)
	if err != nil {
		return err
	}
	return plan(p, cmd, t)
}

// v2 refuses an operation added in version 2 in a version 1 command.
func (d *cmdDecoder) v2(op CmdOp) bool {
	if d.ver == Version1 {
		d.fail(fmt.Errorf("operation %d in a version 1 command", op))
		return false
	}
	return true
}
