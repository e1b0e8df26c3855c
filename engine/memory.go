package engine

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docketdb/docket/engine/internal/admit"
	"github.com/docketdb/docket/internal/bytesize"
	"github.com/docketdb/docket/internal/index"
)

// The memory budget (Options.MaxMemory) bounds what the state holds: task
// records with their payloads and fields, idempotency keys, KV entries and
// dependencies, as index.Usage estimates them from the records (the same
// figure on every node and after every restart). A write that would take
// the state past the budget is refused with ErrFull and changes nothing;
// writes that free state (complete, fail, cancel, delete) are never
// refused for it, so a full DB can always be drained. A claim adds its
// owner's bytes to each task it leases (the lease record itself is
// counted when the task is admitted): it may use the reserve below, and
// past it leases one task at a time, never refused.
//
// Writes to a namespace's system area (worker presence, schedules) may use
// the same reserve.
//
// A completion that enqueues follow-ups or writes KV entries adds state
// as it frees its task: it may use a reserve of an eighth of the budget
// beyond it, so that a workflow whose steps are queued behind each other
// keeps moving when producers filled the budget; past the reserve it is
// refused with ErrFull too, its lease kept (the worker retries it, or the
// lease expires and the task runs again).
// DefaultMemoryShare is the share of the memory available to the process
// that the budget takes by default: a quarter, so that the Go heap's
// collection slack (the heap may reach twice what is live) and the host
// program fit beside it.
const DefaultMemoryShare = 4

// memoryReserveShare is the share of the budget completions may use
// beyond it.
const memoryReserveShare = 8

// memoryWarnEvery bounds how often the engine logs that the state is
// above memoryWarnPercent of its budget, and how often it logs refusals.
const memoryWarnEvery = time.Minute

// memoryWarnPercent is the share of the budget past which the engine logs
// a warning (once, then at most once a minute while above).
const memoryWarnPercent = 80

// budgetOf is the budget Options.MaxMemory asks for: the value itself,
// none for a negative one, and DefaultMemoryShare of what the machine or
// the cgroup allows for 0 (none where that cannot be read).
func budgetOf(maxMemory int64) int64 {
	switch {
	case maxMemory > 0:
		return maxMemory
	case maxMemory < 0:
		return 0
	}
	return availableMemory() / DefaultMemoryShare
}

// availableMemory is the smaller of the machine's memory and the cgroup's
// limit, 0 where neither can be read.
func availableMemory() int64 {
	var limit int64
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				if kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64); err == nil {
					limit = kb << 10
				}
			}
		}
	}
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n <= 0 { // "max": no limit
			continue
		}
		if limit == 0 || n < limit {
			limit = n
		}
	}
	return limit
}

// admit refuses cmd with ErrFull when what it adds would take the state
// past the budget (the budget and its reserve, for a completion). It is
// called with c.mu held: standalone, as the command is planned, so the
// check and the commit are one step; replicated, on the node that submits
// the command, before it goes to the log (the followers plan what the
// log holds, whatever their own budget).
func (c *core) admit(cmd *command) error {
	threshold := 0
	if c.vals != nil {
		threshold = c.vals.Threshold
	}
	add, completion := admit.Adds(cmd, threshold)
	c.admitClaim(cmd, add)
	if add == 0 {
		return nil
	}
	if err := c.admitQuota(cmd, add, completion); err != nil {
		return err
	}
	if c.budget <= 0 {
		return nil
	}
	used := c.store.Usage().Bytes
	limit := c.budget
	if completion {
		limit += c.budget / memoryReserveShare
	}
	if used+add <= limit {
		c.warnMemory(used + add)
		return nil
	}
	c.memRefused(used, add)
	return fmt.Errorf("%w: the state holds %s of its memory budget of %s (Options.MaxMemory) and this call would add %s; "+
		"complete, cancel or delete tasks, or raise the budget", ErrFull, bytesize.Format(used), bytesize.Format(c.budget), bytesize.Format(add))
}

// admitClaim cuts how many tasks cmd, a claim, leases to what the budget
// and its reserve (and its namespace's byte quota and reserve) hold
// beyond add, what the rest of cmd adds: each task leased adds its
// owner's bytes. Past the reserve a claim still leases one task, so that
// a queue always drains (a state taken past the reserve by what is never
// refused, such as failures' errors, with no lease held, would otherwise
// refuse every claim): the state then passes the reserve by at most the
// owner names of the leases held.
func (c *core) admitClaim(cmd *command, add int64) {
	per := admit.ClaimAdds(cmd)
	if per == 0 {
		return
	}
	fit := int64(cmd.Max)
	if c.budget > 0 {
		room := c.budget + c.budget/memoryReserveShare - c.store.Usage().Bytes - add
		fit = min(fit, max(room, 0)/per)
	}
	ns := idxNS(cmd.NS)
	if q := c.quotaOf(ns); q.MaxBytes > 0 {
		room := q.MaxBytes + q.MaxBytes/memoryReserveShare - c.store.NamespaceUsage(ns).Bytes - add
		fit = min(fit, max(room, 0)/per)
	}
	if fit < int64(cmd.Max) {
		cmd.Max = int(max(fit, 1))
	}
}

// memWarn is the state of the memory warnings, under core.mu.
type memWarn struct {
	above   time.Time // when the last warning about the share was logged
	refused time.Time // when the last refusal was logged
	more    int       // refusals since, not logged yet
}

func (c *core) warnMemory(used int64) {
	if used*100 < c.budget*memoryWarnPercent {
		return
	}
	now := c.clock.Now()
	if !c.memWarn.above.IsZero() && now.Sub(c.memWarn.above) < memoryWarnEvery {
		return
	}
	c.memWarn.above = now
	c.opts.Logger.Warn("docket: the state is near its memory budget; writes that add to it will be refused past it",
		"used", used, "budget", c.budget, "percent", used*100/c.budget)
}

func (c *core) memRefused(used, add int64) {
	now := c.clock.Now()
	if !c.memWarn.refused.IsZero() && now.Sub(c.memWarn.refused) < memoryWarnEvery {
		c.memWarn.more++
		return
	}
	c.opts.Logger.Warn("docket: a write was refused: the memory budget is full",
		"used", used, "budget", c.budget, "adds", add, "refused_since_last_line", c.memWarn.more)
	c.memWarn.refused, c.memWarn.more = now, 0
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
