package engine

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/docketdb/docket/engine/internal/machine"
	"github.com/docketdb/docket/engine/internal/valuelog"
	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/vlog"
)

// DefaultValueThreshold is Options.ValueThreshold when it is 0.
const DefaultValueThreshold = 1024

// values is the value log of a DB on disk (package valuelog), and log its
// files.
type values struct {
	*valuelog.Log
	log *vlog.Log
}

type (
	want     = valuelog.Want
	badValue = valuelog.Bad
)

var (
	wants    = valuelog.Wants
	vlogKind = valuelog.VlogKind
	errGone  = valuelog.ErrGone
)

// unreadableEvery is the least time between two log lines about values
// that cannot be read.
const unreadableEvery = valuelog.Every

func (c *core) valueDir() string { return filepath.Join(c.dir, "vlog") }

// openValues opens the value log of a DB on disk, once the state is
// recovered; readOnly opens it only to read values, creating nothing.
func (c *core) openValues(readOnly bool) error {
	var l *valuelog.Log
	var err error
	if readOnly {
		l, err = valuelog.OpenReadOnly(c.fs(), c.valueDir(), valueHost{c})
	} else {
		l, err = valuelog.Open(c.fs(), c.valueDir(), c.opts.ValueThreshold, c.opts.Durability == SyncAlways,
			c.opts.valueFileSize, valueHost{c})
	}
	if err != nil {
		return wrapStorage(err)
	}
	if l != nil {
		c.vals = &values{Log: l, log: l.VLog}
	}
	return nil
}

// valueHost is what the value log's use needs of the engine.
type valueHost struct{ c *core }

func (h valueHost) Locked(write bool, fn func(st *index.Store)) error {
	c := h.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if write {
		if err := c.writable(); err != nil {
			return err
		}
	}
	fn(c.store)
	return nil
}

func (h valueHost) Live(recs []vlog.Record, keep []bool) {
	c := h.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.liveChecks++
	for i, r := range recs {
		keep[i] = c.refOf(r.Owner, r.Kind) == index.ValueRef(r.Ref)
	}
}

func (h valueHost) Commit(ctx context.Context, ms []index.Mutation) error {
	_, err := h.c.commit(ctx, func(p *planner) error {
		p.B.Mutations = append(p.B.Mutations, ms...)
		return nil
	})
	return err
}

func (h valueHost) Fail(err error) error { return h.c.failLocked(err) }

// refOf is the reference the state holds for the value of kind of task
// owner (zero for none). Call with mu held.
func (c *core) refOf(owner uint64, kind vlog.Kind) index.ValueRef {
	return valuelog.RefOf(c.store, owner, kind)
}

// borrows reports whether Enqueue and EnqueueBatch may plan payload p as
// the caller's bytes, without a copy of their own: a local commit appends
// a payload of at least the threshold to the value log (which copies it)
// before the call returns, and the state keeps only its reference. A
// lease of a task enqueued by the same batch copies its payload. A
// replicated commit may still hold its command after its caller gave up.
func (c *core) borrows(p []byte) bool {
	return c.repl == nil && c.vals != nil && c.vals.Borrows(p)
}

// leaseWants lists the values of leases held by reference. Call with mu
// held, while planning the claim.
func (c *core) leaseWants(ls []Lease, ws []want) []want { return valuelog.LeaseWants(c.store, ls, ws) }

// fillLeases reads the values of ls that leaseWants listed, and returns
// the leases it read them all for: a lease whose value cannot be read is
// failed instead of handed out (failUnreadable), one whose task went
// meanwhile is left out.
func (c *core) fillLeases(ctx context.Context, ls []Lease, ws []want) ([]Lease, error) {
	if c.vals == nil {
		return ls, errNoValues(ws)
	}
	bad, err := c.vals.FillLeases(ls, ws)
	if err != nil || len(bad) == 0 {
		return ls, err
	}
	return valuelog.Drop(ls, bad, func(l *Lease, b *badValue, what string) {
		c.noteUnreadable(b, &l.Namespace, l.Queue, what)
		c.failUnreadable(ctx, l, b)
	}), nil
}

// fillInfos reads the values of infos that wants listed; a value that
// cannot be read is left out, named in the task's Unreadable, and
// returned, for a call about one task to report.
func (c *core) fillInfos(infos []TaskInfo, ws []want) ([]badValue, error) {
	if c.vals == nil {
		return nil, errNoValues(ws)
	}
	return c.vals.FillInfos(infos, ws, func(b *badValue, t *TaskInfo) {
		c.noteUnreadable(b, &t.Namespace, t.Queue, "the task is shown without it")
	})
}

func errNoValues(ws []want) error {
	return fmt.Errorf("%w: task %d holds a value in a value log this DB has not opened", ErrCorrupt, ws[0].ID)
}

// failUnreadable fails lease l, whose value b the claim that made it could
// not read, in a commit of its own: dead-lettered at once for damage,
// failed by the retry policy otherwise. The call's context does not cut
// it short: the lease is the engine's to settle.
func (c *core) failUnreadable(ctx context.Context, l *Lease, b *badValue) {
	cmd := command{NS: l.Namespace, Queue: l.Queue, Args: &machine.Fail{Fence: *l, ErrMsg: ErrorText(b.Err.Error()), Permanent: b.Permanent}}
	var res cmdResult
	if err := c.exec(context.WithoutCancel(ctx), &cmd, &res); err != nil {
		// The lease stays until it expires; the next claim of the task
		// meets the value again.
		c.opts.Logger.Warn("docket: failing a task whose value cannot be read", "id", l.ID,
			"namespace", l.Namespace.String(), "queue", l.Queue, "err", err)
	}
}

// noteUnreadable counts the value b, of a task of queue in ns, that could
// not be read, and logs it (valuelog.Notes); what says what the call did
// about it.
func (c *core) noteUnreadable(b *badValue, ns *Namespace, queue, what string) {
	c.mu.Lock()
	c.stats.UnreadableValues++
	c.mu.Unlock()
	c.unread.Note(c.opts.Logger, c.clock.Now(), b, ns, queue, what)
}

// CompactValues runs a compaction pass of the value log now (one also runs
// in the background every few seconds): it removes the files no value is
// in and moves the values of those mostly dead. It returns how many files
// it removed. A DB that keeps every value in memory has nothing to do.
func (d *DB) CompactValues(ctx context.Context) (int, error) {
	if err := d.owner("CompactValues"); err != nil {
		return 0, err
	}
	if d.c.vals == nil {
		return 0, nil
	}
	return d.c.vals.Compact(ctx)
}
