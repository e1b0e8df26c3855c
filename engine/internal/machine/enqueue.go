package machine

import (
	"fmt"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/internal/index"
)

// The operations that add tasks and write the KV store.
const (
	CmdEnqueue      CmdOp = 1
	CmdEnqueueBatch CmdOp = 2
	CmdCommit       CmdOp = 13
)

func init() {
	register(CmdEnqueue, "enqueue", Version1, func() Args { return new(Enqueue) })
	register(CmdEnqueueBatch, "enqueue batch", Version1, func() Args { return new(EnqueueBatch) })
	register(CmdCommit, "commit", Version1, func() Args { return new(Commit) })
}

// Enqueue is Queue.Enqueue: a task, then ops. Its arguments are
// [spec [vop...]].
type Enqueue struct {
	Task Spec
	Ops  []TxOp
}

func (*Enqueue) Op() CmdOp              { return CmdEnqueue }
func (a *Enqueue) version() uint64      { return max(specVersion(&a.Task), specsVersion(nil, a.Ops)) }
func (a *Enqueue) encode(e *cmdEncoder) { e.spec(&a.Task); e.vops(a.Ops) }

func (a *Enqueue) decode(d *cmdDecoder, _ *Command) {
	d.spec(&a.Task)
	a.Ops = d.vops()
}

func (a *Enqueue) plan(p *Planner, cmd *Command, res *Result) error {
	var err error
	if res.Enq, err = p.enqueue(cmd.Key(), &a.Task); err != nil {
		return err
	}
	_, err = p.ops(cmd.NS, a.Ops, nil)
	return err
}

// EnqueueBatch is Queue.EnqueueBatch: tasks, then ops. Its arguments are
// [[spec...] [vop...]].
type EnqueueBatch struct {
	Tasks []Spec
	Ops   []TxOp
}

func (*EnqueueBatch) Op() CmdOp         { return CmdEnqueueBatch }
func (a *EnqueueBatch) version() uint64 { return specsVersion(a.Tasks, a.Ops) }

func (a *EnqueueBatch) encode(e *cmdEncoder) {
	e.array(len(a.Tasks))
	for i := range a.Tasks {
		e.spec(&a.Tasks[i])
	}
	e.vops(a.Ops)
}

func (a *EnqueueBatch) decode(d *cmdDecoder, _ *Command) {
	a.Tasks = make([]Spec, d.array(dockettype.MaxBatch))
	for i := range a.Tasks {
		d.spec(&a.Tasks[i])
	}
	a.Ops = d.vops()
}

func (a *EnqueueBatch) plan(p *Planner, cmd *Command, res *Result) error {
	qk := cmd.Key()
	out := res.Enqs
	if len(out) != len(a.Tasks) {
		out = make([]dockettype.Enqueued, len(a.Tasks), len(a.Tasks)+len(a.Ops))
	}
	for i := range a.Tasks {
		var err error
		if out[i], err = p.enqueue(qk, &a.Tasks[i]); err != nil {
			if len(a.Tasks) > 1 {
				err = fmt.Errorf("task %d: %w", i, err)
			}
			return err
		}
	}
	res.Enqs = out
	_, err := p.ops(cmd.NS, a.Ops, nil)
	return err
}

// Commit is KV.Commit: ops alone. Its arguments are [[vop...]].
type Commit struct{ Ops []TxOp }

func (*Commit) Op() CmdOp              { return CmdCommit }
func (a *Commit) version() uint64      { return specsVersion(nil, a.Ops) }
func (a *Commit) encode(e *cmdEncoder) { e.vops(a.Ops) }

func (a *Commit) decode(d *cmdDecoder, _ *Command) { a.Ops = d.vops() }

func (a *Commit) plan(p *Planner, cmd *Command, res *Result) error {
	var err error
	res.Enqs, err = p.ops(cmd.NS, a.Ops, nil)
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
