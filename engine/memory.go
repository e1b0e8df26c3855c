package engine

import (
	"cmp"
	"slices"

	"github.com/docketdb/docket/engine/internal/admit"
	"github.com/docketdb/docket/internal/index"
)

// The memory budget and the namespaces' quotas are package admit's.

// DefaultMemoryShare is the share of the memory available to the process
// that the budget takes by default: a quarter, so that the Go heap's
// collection slack (the heap may reach twice what is live) and the host
// program fit beside it.
const DefaultMemoryShare = admit.DefaultMemoryShare

// memoryReserveShare is the share of the budget completions may use
// beyond it.
const memoryReserveShare = admit.ReserveShare

func budgetOf(maxMemory int64) int64 { return admit.BudgetOf(maxMemory) }
func availableMemory() int64         { return admit.AvailableMemory() }

// admit refuses cmd with ErrFull when what it adds would take the state
// past the budget or its namespace past its quota (admit.Admitter). Call
// with mu held.
func (c *core) admit(cmd *command) error { return c.adm.Admit(c.store, cmd, c.threshold()) }

// threshold is the size from which a value goes to the value log, 0 when
// none does.
func (c *core) threshold() int {
	if c.vals == nil {
		return 0
	}
	return c.vals.Threshold
}

// NamespaceUsage is what one namespace's state takes, as the memory budget
// counts it: its tasks, and the bytes of their records with its
// idempotency keys and KV entries.
type NamespaceUsage struct {
	Namespace Namespace
	Tasks     int
	Bytes     int64
}

// Usage returns what each namespace holding anything takes, the largest
// first, at most max of them (all for max <= 0). Like Stats it is the
// program's: a view for a caller (As) gets none.
func (d *DB) Usage(max int) []NamespaceUsage {
	if d.caller != nil {
		return nil
	}
	c := d.c
	c.mu.Lock()
	var out []NamespaceUsage
	c.store.NamespacesUsage(func(ns index.Namespace, u index.Usage) bool {
		out = append(out, NamespaceUsage{Namespace: NS(ns.Project, ns.Scope), Tasks: int(u.Tasks), Bytes: u.Bytes})
		return true
	})
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b NamespaceUsage) int {
		if a.Bytes != b.Bytes {
			return cmp.Compare(b.Bytes, a.Bytes)
		}
		return cmp.Or(cmp.Compare(a.Namespace.Project, b.Namespace.Project), cmp.Compare(a.Namespace.Scope, b.Namespace.Scope))
	})
	if max > 0 && len(out) > max {
		out = out[:max]
	}
	return out
}
