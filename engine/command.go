package engine

import (
	"context"

	"github.com/docketdb/docket/internal/index"
)

// A command is one write call of the API as data: the operation and its
// validated arguments, never its results. Every write is one command
// planned by cmd.plan under the engine lock: standalone, the call plans it
// at once (commit, then the batch is logged); replicated, it is encoded
// (command_codec.go), appended to the replicated log and planned by every
// node as the log applies it (ApplyCommand), so the same state, command and
// time give the same batch everywhere.
type command struct {
	op    cmdOp
	ns    Namespace
	queue string

	// Set only for a replicated log, by the node that submits the command:
	// its clock (apply uses max(now, the last applied time)), a seed for
	// lease secrets (claims) and the planning options a batch depends on,
	// so that a node configured otherwise still plans the same batch.
	now     int64
	seed    uint64
	retain  int64 // Options.RetainCompleted, micros
	idemTTL int64 // Options.IdempotencyTTL, micros

	task   spec    // cmdEnqueue
	tasks  []spec  // cmdEnqueueBatch
	ops    []vop   // cmdEnqueue, cmdEnqueueBatch, cmdComplete (ops then follow-ups), cmdCommit
	owner  string  // cmdClaim, cmdCompleteClaim
	lease  int64   // cmdClaim, cmdCompleteClaim: the lease; cmdHeartbeat, cmdHeartbeatBatch: the extension (micros)
	max    int     // cmdClaim, cmdCompleteClaim
	wait   bool    // cmdClaim from ClaimWait: with nothing leased, say when to retry
	fence  Lease   // cmdComplete, cmdCompleteClaim, cmdFail, cmdHeartbeat, cmdSnooze: ID, Token and Secret
	fences []Lease // cmdCompleteBatch, cmdHeartbeatBatch
	// dup marks the leases of a cmdCompleteBatch or cmdHeartbeatBatch
	// refused before planning because their task appears earlier in the
	// batch.
	dup       []error
	result    []byte // cmdComplete, cmdCompleteClaim
	progress  []byte // cmdHeartbeat, when hasProg
	hasProg   bool
	errMsg    string   // cmdFail
	permanent bool     // cmdFail
	delay     int64    // cmdFail: retry after; cmdSnooze: the snooze (micros)
	id        uint64   // cmdCancel, cmdRedrive, cmdRunNow
	paused    bool     // cmdSetPaused
	limits    Limits   // cmdSetLimits
	bulk      bulkArgs // cmdBulk (search.go)
}

// cmdOp is a command's operation. Part of the replicated log's format.
type cmdOp uint8

const (
	cmdEnqueue       cmdOp = 1
	cmdEnqueueBatch  cmdOp = 2
	cmdClaim         cmdOp = 3
	cmdComplete      cmdOp = 4
	cmdCompleteBatch cmdOp = 5
	cmdFail          cmdOp = 6
	cmdHeartbeat     cmdOp = 7
	cmdSnooze        cmdOp = 8
	cmdCancel        cmdOp = 9
	cmdRedrive       cmdOp = 10
	cmdRedriveAll    cmdOp = 11
	cmdRunNow        cmdOp = 12
	cmdCommit        cmdOp = 13
	cmdSetPaused     cmdOp = 14 // from version 2 on
	cmdSetLimits     cmdOp = 15 // from version 2 on

	cmdCompleteClaim  cmdOp = 20 // queue_batch.go; from version 2 on
	cmdHeartbeatBatch cmdOp = 21 // from version 2 on
	cmdBulk           cmdOp = 22 // search.go; from version 4 on
)

var cmdNames = [...]string{1: "enqueue", 2: "enqueue batch", 3: "claim", 4: "complete", 5: "complete batch",
	6: "fail", 7: "heartbeat", 8: "snooze", 9: "cancel", 10: "redrive", 11: "redrive all", 12: "run now",
	13: "commit", 14: "set paused", 15: "set limits",
	cmdCompleteClaim: "complete and claim", cmdHeartbeatBatch: "heartbeat batch", cmdBulk: "bulk"}

func (o cmdOp) String() string {
	if int(o) < len(cmdNames) && cmdNames[o] != "" {
		return cmdNames[o]
	}
	return "invalid"
}

// cmdResult is what planning a command gave the call: which fields are set
// depends on the operation.
type cmdResult struct {
	seq      uint64     // the last batch the commit saw or wrote (TxResult.Version)
	enq      Enqueued   // cmdEnqueue
	enqs     []Enqueued // cmdEnqueueBatch; the Enqueue ops of cmdComplete, cmdCompleteClaim and cmdCommit
	leases   []Lease    // cmdClaim, cmdCompleteClaim
	due      int64      // cmdClaim with wait and nothing leased: next timer or lease (0: none)
	errs     []error    // cmdCompleteBatch, cmdHeartbeatBatch: one per lease
	deadline int64      // cmdHeartbeat, cmdHeartbeatBatch: the new lease deadline
	n        int        // cmdRedriveAll: tasks redriven; cmdBulk: tasks acted on
	next     uint64     // cmdBulk: the id the next walk starts from, 0 when done
	skips    [nSkip]int // cmdBulk: tasks left as they were, by reason
	ids      []uint64   // cmdBulk: tasks removed while in flight (their lease watches fire)
}

func (cmd *command) key() index.QueueKey {
	return index.QueueKey{Namespace: idxNS(cmd.ns), Name: cmd.queue}
}

// exec runs a validated command: planned and committed here, or, on a
// replicated DB, submitted to the log and planned as it applies.
func (c *core) exec(ctx context.Context, cmd *command, res *cmdResult) error {
	if c.repl != nil {
		return c.submit(ctx, cmd, res)
	}
	seq, err := c.commit(ctx, func(p *planner) error { return cmd.plan(p, res) })
	res.seq = seq
	return err
}

// plan plans cmd with p, writing what the call returns into res. It reads
// nothing but the state, the command and p.now.
func (cmd *command) plan(p *planner, res *cmdResult) error {
	if p.c.repl == nil {
		// A replicated command was admitted where it was submitted.
		if err := p.c.admit(cmd); err != nil {
			return err
		}
	}
	switch cmd.op {
	case cmdEnqueue:
		return planEnqueue(p, cmd, res)
	case cmdEnqueueBatch:
		return planEnqueueBatch(p, cmd, res)
	case cmdClaim:
		return planClaim(p, cmd, res)
	case cmdComplete:
		return planComplete(p, cmd, res)
	case cmdCompleteBatch:
		return planCompleteBatch(p, cmd, res)
	case cmdFail:
		return planFail(p, cmd)
	case cmdHeartbeat:
		return planHeartbeat(p, cmd, res)
	case cmdSnooze:
		return planSnooze(p, cmd)
	case cmdCancel, cmdRedrive, cmdRunNow:
		t, err := p.c.task(cmd.key(), cmd.id, p.now)
		if err != nil {
			return err
		}
		switch cmd.op {
		case cmdCancel:
			return planCancel(p, cmd, t)
		case cmdRedrive:
			return planRedrive(p, cmd, t)
		}
		return planRunNow(p, cmd, t)
	case cmdRedriveAll:
		return planRedriveAll(p, cmd, res)
	case cmdCommit:
		return planCommit(p, cmd, res)
	case cmdSetPaused:
		return planSetPaused(p, cmd)
	case cmdSetLimits:
		return planSetLimits(p, cmd)
	case cmdCompleteClaim:
		return planCompleteClaim(p, cmd, res)
	case cmdHeartbeatBatch:
		return planHeartbeatBatch(p, cmd, res)
	case cmdBulk:
		return planBulk(p, cmd, res)
	}
	return invalid("command %d", cmd.op)
}
