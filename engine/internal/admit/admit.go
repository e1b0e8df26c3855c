// Package admit says what a command adds to the state before it is
// planned: the bytes the memory budget bounds, the tasks a namespace's
// quota counts. The shell admits a command with it, under its lock, before
// the machine plans it. Adds and the other functions are pure; an Admitter
// (budget.go) refuses what the memory budget or a quota does not hold,
// keeping the quotas as last parsed and the state of its warnings, under
// the shell's lock.
package admit

import (
	"strings"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/engine/internal/machine"
	"github.com/docketdb/docket/internal/index"
)

// Adds estimates the bytes cmd adds to the state if it is planned as
// asked, and whether it is a completion (which may use the reserve).
// Zero means it adds nothing the budget bounds. A payload or result of at
// least outOfLine bytes (0: none is) is kept on disk, the state holding a
// reference to it (engine.Options.ValueThreshold), and counts as that.
func Adds(cmd *machine.Command, outOfLine int) (n int64, completion bool) {
	switch a := cmd.Args.(type) {
	case *machine.Enqueue:
		return specAdds(&a.Task, outOfLine) + opsAdd(a.Ops, outOfLine), false
	case *machine.EnqueueBatch:
		for i := range a.Tasks {
			n += specAdds(&a.Tasks[i], outOfLine)
		}
		return n + opsAdd(a.Ops, outOfLine), false
	case *machine.Commit:
		// The system area (worker presence, schedules, a periodic task's
		// last tick) is written by the runtime that drains the queues: it
		// may use the reserve, so that workers stay visible and schedules
		// keep their place while the budget is full.
		return opsAdd(a.Ops, outOfLine), systemOnly(a.Ops)
	case *machine.Complete:
		return valueAdds(len(a.Result), outOfLine) + opsAdd(a.Ops, outOfLine), true
	case *machine.CompleteClaim:
		return valueAdds(len(a.Result), outOfLine) + opsAdd(a.Ops, outOfLine), true
	}
	return 0, false
}

// ClaimAdds is what each task cmd leases adds to the state: its owner's
// bytes (the lease record itself is counted from the task's admission,
// see index.TaskBytes); and the most it leases, which Admit may lower.
// 0 and nil for a command that leases nothing.
func ClaimAdds(cmd *machine.Command) (int64, *int) {
	switch a := cmd.Args.(type) {
	case *machine.Claim:
		return int64(len(a.Owner)), &a.Max
	case *machine.CompleteClaim:
		return int64(len(a.Owner)), &a.Max
	}
	return 0, nil
}

// ops returns the ops of cmd: those of an enqueue, a completion or a
// commit, nil for the others.
func ops(cmd *machine.Command) []machine.TxOp {
	switch a := cmd.Args.(type) {
	case *machine.Enqueue:
		return a.Ops
	case *machine.EnqueueBatch:
		return a.Ops
	case *machine.Commit:
		return a.Ops
	case *machine.Complete:
		return a.Ops
	case *machine.CompleteClaim:
		return a.Ops
	}
	return nil
}

// systemOnly reports whether every write of ops is to the system area.
func systemOnly(ops []machine.TxOp) bool {
	for i := range ops {
		if ops[i].Kind == dockettype.OpEnqueue || !strings.HasPrefix(ops[i].Key, dockettype.ReservedPrefix) {
			return false
		}
	}
	return len(ops) > 0
}

// specAdds is what a task of s adds: its record as index.TaskBytes counts
// it (s.size holds its variable fields' lengths), a map entry per header,
// its idempotency key and dependencies, and the lease record its first
// claim adds, so that claiming what the budget admitted stays within it.
func specAdds(s *machine.Spec, outOfLine int) int64 {
	n := index.TaskCost + index.ExtraCost + int64(s.Size) + index.DepCost*int64(len(s.Deps)+len(s.Sibs)) +
		index.HeaderCost*int64(len(s.Headers)) + index.RunCost
	if p := len(s.Payload); outOfLine > 0 && p >= outOfLine {
		n += valueAdds(p, outOfLine) - int64(p)
	}
	if s.Idem != "" {
		n += index.IdemCost + int64(len(s.Idem))
	}
	return n
}

// valueAdds is what a value of n bytes adds: itself, or its reference
// when it is kept on disk.
func valueAdds(n, outOfLine int) int64 {
	if outOfLine > 0 && n >= outOfLine {
		return index.RefsCost
	}
	return int64(n)
}

func opsAdd(ops []machine.TxOp, outOfLine int) int64 {
	var n int64
	for i := range ops {
		switch op := &ops[i]; op.Kind {
		case dockettype.OpSet:
			n += index.KVCost + int64(len(op.Key)+len(op.Value))
		case dockettype.OpEnqueue:
			n += specAdds(&op.Spec, outOfLine)
		}
	}
	return n
}

// TasksAdded counts the tasks cmd adds if it is planned as asked.
func TasksAdded(cmd *machine.Command) int64 {
	var n int64
	switch a := cmd.Args.(type) {
	case *machine.Enqueue:
		n = 1
	case *machine.EnqueueBatch:
		n = int64(len(a.Tasks))
	}
	ops := ops(cmd)
	for i := range ops {
		if ops[i].Kind == dockettype.OpEnqueue {
			n++
		}
	}
	return n
}

// OnlyQuota reports whether cmd writes nothing but a quota record: setting
// a quota is never refused for the quota it replaces.
func OnlyQuota(cmd *machine.Command) bool {
	a, ok := cmd.Args.(*machine.Commit)
	if !ok || len(a.Ops) == 0 {
		return false
	}
	for i := range a.Ops {
		if a.Ops[i].Key != dockettype.QuotaKey || a.Ops[i].Kind == dockettype.OpEnqueue {
			return false
		}
	}
	return true
}
