package machine

import (
	"fmt"
	"math"
	"sync"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/internal/index"
)

// A command is one write call of the API as data: the operation's
// validated arguments (Args) and the header every operation has, never its
// results. Every write is one command planned by cmd.Plan under the engine
// lock: standalone, the call plans it at once (commit, then the batch is
// logged); replicated, it is encoded (codec.go), appended to the replicated
// log and planned by every node as the log applies it (ApplyCommand), so
// the same state, command and time give the same batch everywhere.
type Command struct {
	NS    dockettype.Namespace
	Queue string

	// Set only for a replicated log, by the node that submits the command:
	// its clock (apply uses max(now, the last applied time)), a seed for
	// lease secrets (claims) and the planning options a batch depends on,
	// so that a node configured otherwise still plans the same batch.
	Now     int64
	Seed    uint64
	Retain  int64 // Options.RetainCompleted, micros
	IdemTTL int64 // Options.IdempotencyTTL, micros

	Args Args // the operation and its arguments: *Enqueue, *Claim, ...
}

// Args are the arguments of one operation, a type of its own (*Enqueue,
// *Claim, *Reschedule, ...) that says its operation and plans, writes and
// reads itself. Each is registered by its number (register) in its file.
type Args interface {
	Op() CmdOp
	plan(p *Planner, cmd *Command, res *Result) error
	// encode writes the arguments after the command's header; decode
	// reads them (cmd holds the header read), failing d on a bad value.
	encode(e *cmdEncoder)
	decode(d *cmdDecoder, cmd *Command)
}

// versioned is Args whose content may need a newer command version than
// its operation's (tasks with new fields, new limits): the oldest that can
// carry it.
type versioned interface{ version() uint64 }

// Op is cmd's operation, 0 for none.
func (cmd *Command) Op() CmdOp {
	if cmd.Args == nil {
		return 0
	}
	return cmd.Args.Op()
}

// CmdOp is a command's operation. Part of the replicated log's format.
type CmdOp uint8

// operation is what the registry knows of an operation.
type operation struct {
	name  string
	since uint64      // the oldest command version that carries it
	new   func() Args // its arguments, zero, to decode into
}

// operations are the registered operations by number.
var operations [64]operation

// register registers operation op, added in command version since, whose
// arguments new returns. Every operation registers itself from its file;
// registering a number twice, or arguments that say another number,
// panics.
func register(op CmdOp, name string, since uint64, new func() Args) {
	switch {
	case int(op) >= len(operations) || op == 0:
		panic(fmt.Sprintf("machine: operation number %d of %q out of range", op, name))
	case operations[op].new != nil:
		panic(fmt.Sprintf("machine: operation %d registered twice (%q and %q)", op, operations[op].name, name))
	case new().Op() != op:
		panic(fmt.Sprintf("machine: the arguments of operation %d (%q) say operation %d", op, name, new().Op()))
	}
	operations[op] = operation{name: name, since: since, new: new}
}

// operationOf returns the operation numbered op, nil for none.
func operationOf(op CmdOp) *operation {
	if int(op) < len(operations) && operations[op].new != nil {
		return &operations[op]
	}
	return nil
}

func (o CmdOp) String() string {
	if op := operationOf(o); op != nil {
		return op.name
	}
	return "invalid"
}

// Result is what planning a command gave the call: which fields are set
// depends on the operation.
type Result struct {
	Seq      uint64                // the last batch the commit saw or wrote (TxResult.Version)
	Enq      dockettype.Enqueued   // CmdEnqueue
	Enqs     []dockettype.Enqueued // CmdEnqueueBatch; the Enqueue ops of CmdComplete, CmdCompleteClaim and CmdCommit
	Leases   []dockettype.Lease    // CmdClaim, CmdCompleteClaim
	Due      int64                 // CmdClaim with wait and nothing leased: next timer or lease (0: none)
	Errs     []error               // CmdCompleteBatch, CmdHeartbeatBatch: one per lease
	Deadline int64                 // CmdHeartbeat, CmdHeartbeatBatch: the new lease deadline
	N        int                   // CmdRedriveAll: tasks redriven; CmdBulk: tasks acted on
	Next     uint64                // CmdBulk: the id the next walk starts from, 0 when done
	Skips    [NSkip]int            // CmdBulk: tasks left as they were, by reason
	IDs      []uint64              // CmdBulk: tasks removed while in flight (their lease watches fire)
}

func (cmd *Command) Key() index.QueueKey {
	return index.QueueKey{Namespace: idxNS(cmd.NS), Name: cmd.Queue}
}

// Plan plans cmd with p, writing what the call returns into res. It reads
// nothing but the state, the command and p.now.
//
// The operations of the task path are planned by direct calls: a call
// through the Args interface makes cmd and res escape, so that each commit
// allocated them. The others are planned on copies, which only they
// allocate.
func (cmd *Command) Plan(p *Planner, res *Result) error {
	switch a := cmd.Args.(type) {
	case *Enqueue:
		return a.plan(p, cmd, res)
	case *EnqueueBatch:
		return a.plan(p, cmd, res)
	case *Claim:
		return a.plan(p, cmd, res)
	case *Complete:
		return a.plan(p, cmd, res)
	case *CompleteBatch:
		return a.plan(p, cmd, res)
	case *CompleteClaim:
		return a.plan(p, cmd, res)
	case *Fail:
		return a.plan(p, cmd, res)
	case *Heartbeat:
		return a.plan(p, cmd, res)
	case nil:
		return invalid("command without an operation")
	}
	c, r := *cmd, *res
	err := cmd.Args.plan(p, &c, &r)
	*res = r
	return err
}

// Spec and TxOp, a validated Task and Op, are package validate's.
type (
	Spec = validate.Spec
	TxOp = validate.TxOp
)

// Backoff is base * 2^(attempts-1), capped at max.
func Backoff(base, max int64, attempts uint32) int64 {
	shift := uint(0)
	if attempts > 1 {
		shift = uint(attempts - 1)
	}
	if shift > 62 {
		return max
	}
	if base > math.MaxInt64>>shift {
		return max
	}
	d := base << shift
	if d > max {
		return max
	}
	return d
}

// RepeatedLeases returns, one per lease, ErrLeaseLost for a lease whose task
// appears earlier in leases and nil for the others.
func RepeatedLeases(leases []dockettype.Lease) []error {
	errs := make([]error, len(leases))
	if len(leases) > 1 {
		seen := make(map[uint64]struct{}, len(leases))
		for i := range leases {
			if _, dup := seen[leases[i].ID]; dup {
				errs[i] = fmt.Errorf("%w: task %d appears twice in the batch", dockettype.ErrLeaseLost, leases[i].ID)
			}
			seen[leases[i].ID] = struct{}{}
		}
	}
	return errs
}

// Pool keeps arguments of one type for reuse. A command holds its
// arguments behind the Args interface, through which they escape: the
// task path takes them from a pool, so that a call allocates none.
type Pool[T any] struct{ p sync.Pool }

// The pools of the task path's arguments.
var (
	Enqueues       Pool[Enqueue]
	Claims         Pool[Claim]
	Completes      Pool[Complete]
	CompleteClaims Pool[CompleteClaim]
)

// Get returns zero arguments.
func (p *Pool[T]) Get() *T {
	if a, ok := p.p.Get().(*T); ok {
		return a
	}
	return new(T)
}

// Put clears a and keeps it for Get: call it once nothing holds a.
func (p *Pool[T]) Put(a *T) {
	*a = *new(T)
	p.p.Put(a)
}
