package machine

import (
	"fmt"
	"math"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/internal/index"
)

// A command is one write call of the API as data: the operation and its
// validated arguments, never its results. Every write is one command
// planned by cmd.plan under the engine lock: standalone, the call plans it
// at once (commit, then the batch is logged); replicated, it is encoded
// (command_codec.go), appended to the replicated log and planned by every
// node as the log applies it (ApplyCommand), so the same state, command and
// time give the same batch everywhere.
type Command struct {
	Op    CmdOp
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

	Task   Spec               // CmdEnqueue
	Tasks  []Spec             // CmdEnqueueBatch
	Ops    []TxOp             // CmdEnqueue, CmdEnqueueBatch, CmdComplete (ops then follow-ups), CmdCommit
	Owner  string             // CmdClaim, CmdCompleteClaim
	Lease  int64              // CmdClaim, CmdCompleteClaim: the lease; CmdHeartbeat, CmdHeartbeatBatch: the extension (micros)
	Max    int                // CmdClaim, CmdCompleteClaim
	Wait   bool               // CmdClaim from ClaimWait: with nothing leased, say when to retry
	Fence  dockettype.Lease   // CmdComplete, CmdCompleteClaim, CmdFail, CmdHeartbeat, CmdSnooze: ID, Token and Secret
	Fences []dockettype.Lease // CmdCompleteBatch, CmdHeartbeatBatch
	// dup marks the leases of a cmdCompleteBatch or cmdHeartbeatBatch
	// refused before planning because their task appears earlier in the
	// batch.
	Dup       []error
	Result    []byte // CmdComplete, CmdCompleteClaim
	Progress  []byte // CmdHeartbeat, when hasProg
	HasProg   bool
	ErrMsg    string            // CmdFail
	Permanent bool              // CmdFail
	Delay     int64             // CmdFail: retry after; CmdSnooze: the snooze (micros)
	ID        uint64            // CmdCancel, CmdRedrive, CmdRunNow, CmdReschedule
	At        int64             // CmdReschedule: the new due time (micros), 0 to keep it
	Prio      int64             // CmdReschedule: the new priority, when SetPrio
	SetPrio   bool              // CmdReschedule
	Paused    bool              // CmdSetPaused
	Limits    dockettype.Limits // CmdSetLimits
	Bulk      BulkArgs          // CmdBulk (search.go)
}

// CmdOp is a command's operation. Part of the replicated log's format.
type CmdOp uint8

const (
	CmdEnqueue       CmdOp = 1
	CmdEnqueueBatch  CmdOp = 2
	CmdClaim         CmdOp = 3
	CmdComplete      CmdOp = 4
	CmdCompleteBatch CmdOp = 5
	CmdFail          CmdOp = 6
	CmdHeartbeat     CmdOp = 7
	CmdSnooze        CmdOp = 8
	CmdCancel        CmdOp = 9
	CmdRedrive       CmdOp = 10
	CmdRedriveAll    CmdOp = 11
	CmdRunNow        CmdOp = 12
	CmdCommit        CmdOp = 13
	CmdSetPaused     CmdOp = 14 // from version 2 on
	CmdSetLimits     CmdOp = 15 // from version 2 on

	CmdCompleteClaim  CmdOp = 20 // queue_batch.go; from version 2 on
	CmdHeartbeatBatch CmdOp = 21 // from version 2 on
	CmdBulk           CmdOp = 22 // search.go; from version 4 on
	CmdReschedule     CmdOp = 23 // from version 2 on
)

var cmdNames = [...]string{1: "enqueue", 2: "enqueue batch", 3: "claim", 4: "complete", 5: "complete batch",
	6: "fail", 7: "heartbeat", 8: "snooze", 9: "cancel", 10: "redrive", 11: "redrive all", 12: "run now",
	13: "commit", 14: "set paused", 15: "set limits",
	CmdCompleteClaim: "complete and claim", CmdHeartbeatBatch: "heartbeat batch", CmdBulk: "bulk", CmdReschedule: "reschedule"}

func (o CmdOp) String() string {
	if int(o) < len(cmdNames) && cmdNames[o] != "" {
		return cmdNames[o]
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
// The commands of the task path are planned by direct calls: a call
// through the operation interface makes cmd and res escape, so that each
// commit allocated them (a command is over a kilobyte). The others are
// planned on copies, which only they allocate.
func (cmd *Command) Plan(p *Planner, res *Result) error {
	switch cmd.Op {
	case CmdEnqueue:
		return planEnqueue(p, cmd, res)
	case CmdEnqueueBatch:
		return planEnqueueBatch(p, cmd, res)
	case CmdClaim:
		return planClaim(p, cmd, res)
	case CmdComplete:
		return planComplete(p, cmd, res)
	case CmdCompleteBatch:
		return planCompleteBatch(p, cmd, res)
	case CmdCompleteClaim:
		return planCompleteClaim(p, cmd, res)
	case CmdFail:
		return planFail(p, cmd)
	case CmdHeartbeat:
		return planHeartbeat(p, cmd, res)
	}
	o := operationOf(cmd.Op)
	if o == nil {
		return invalid("command %d", cmd.Op)
	}
	c, r := *cmd, *res
	err := o.plan(p, &c, &r)
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
