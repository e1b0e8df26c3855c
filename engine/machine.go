package engine

import (
	"github.com/docketdb/docket/engine/internal/machine"
	"github.com/docketdb/docket/internal/index"
)

// The state machine (planning a command into a batch) is package machine;
// these are its names as the shell uses them.
type (
	command    = machine.Command
	cmdResult  = machine.Result
	spec       = machine.Spec
	vop        = machine.TxOp
	planner    = machine.Planner
	taskFilter = machine.TaskFilter
)

const (
	nSkip         = machine.NSkip
	skipReady     = machine.SkipReady
	skipInFlight  = machine.SkipInFlight
	skipWaiting   = machine.SkipWaiting
	skipCompleted = machine.SkipCompleted
	skipDead      = machine.SkipDead
	skipPending   = machine.SkipPending
)

var skipNames = machine.SkipNames

// LeaseSecret derives the secret of the lease of task id with token from a
// batch seed: the first 8 bytes of SHA-256(seed, id, token), little-endian,
// never 0 (0 means "no secret").
func LeaseSecret(seed, id, token uint64) uint64 { return machine.LeaseSecret(seed, id, token) }

func decodeCommand(data []byte, cmd *command) error { return machine.Decode(data, cmd) }

func compileFilter(f *Filter) (taskFilter, error) { return machine.CompileFilter(f) }

// state is the machine's view of c: its store and the options planning
// reads, as they are now. Call with mu held.
func (c *core) state() *machine.State {
	c.mstate = machine.State{Store: c.store, Retain: c.opts.RetainCompleted.Microseconds(),
		IdemTTL: c.opts.IdempotencyTTL.Microseconds(), Entropy: c.entropy}
	return &c.mstate
}

func (c *core) task(qk index.QueueKey, id uint64, now int64) (*index.Task, error) {
	return c.state().Task(qk, id, now)
}

func (c *core) doneBefore(now int64) int64 { return c.state().DoneBefore(now) }

func (c *core) claimDue(qk index.QueueKey, iq *index.Queue, now int64) int64 {
	return c.state().ClaimDue(qk, iq, now)
}

// planCmd admits cmd and plans it with p: a standalone commit's plan. A
// replicated command was admitted where it was submitted, and
// ApplyCommand plans it as it is.
func (c *core) planCmd(p *planner, cmd *command, res *cmdResult) error {
	if err := c.admit(cmd); err != nil {
		return err
	}
	return cmd.Plan(p, res)
}
