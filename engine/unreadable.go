package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/docketdb/docket/engine/internal/verify"
	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/lograte"
	"github.com/docketdb/docket/internal/vlog"
)

// Values that cannot be read. A task's payload, progress or result kept in
// the value log may fail to read back: a damaged record (its checksum), a
// file cut short or gone, an I/O error. One such value must not stop a
// queue, nor fail a call about other tasks:
//
//   - A claim hands out the leases whose values it read. A task whose value
//     it cannot read is not given to a worker: the engine fails that lease
//     in a commit of its own (the attempt counts), with an error that names
//     the value log file, the offset and the cause. Damage (ErrCorrupt,
//     ErrMissing, ErrMismatch of the value log) reads the same every time,
//     so the task goes to the dead-letter queue at once, where an operator
//     sees it; an I/O error may pass, so the failure follows the task's
//     retry policy (backoff, then the dead-letter queue when its attempts
//     are spent). If every task a claim leased was failed so, it claims
//     again, a few times at most.
//   - Get returns the task's record with the value left out, and an error
//     wrapping ErrCorrupt that names the damage; List and Search return
//     their page, each such task with the value left out and
//     TaskInfo.Unreadable naming the damage.
//   - Every failed read counts in Stats.UnreadableValues, and is logged:
//     once for each task, and at most one line every unreadableEvery, the
//     next line saying how many went unlogged.

// badValue is a value a read could not return.
type badValue struct {
	w want
	// gone: the task ended or changed while the value was read (nothing
	// is wrong with the value log). Otherwise err, wrapping ErrCorrupt,
	// names the value, its file and offset, and the cause; permanent says
	// that reading again cannot help (damage, not an I/O error).
	gone      bool
	err       error
	permanent bool
}

// valueReadError is a read the value log refused or failed: its cause and
// the reference read.
type valueReadError struct {
	kind index.ValueKind
	id   uint64
	ref  index.ValueRef
	err  error
}

func (e *valueReadError) Error() string {
	return fmt.Sprintf("docket: the %s of task %d: %v", e.kind, e.id, e.err)
}

func (e *valueReadError) Unwrap() error { return e.err }

// unreadable turns err, a failed read of the value w names, into the bad
// value a call reports; ok is false for an error of the call as a whole
// (the DB closing or failed), which the caller returns.
func unreadable(w *want, err error) (badValue, bool) {
	if errors.Is(err, errGone) {
		return badValue{w: *w, gone: true}, true
	}
	var re *valueReadError
	if !errors.As(err, &re) || errors.Is(err, vlog.ErrClosed) {
		return badValue{}, false
	}
	return badValue{w: *w, permanent: verify.IsValueDamage(re.err),
		err: fmt.Errorf("%w: the %s of task %d cannot be read from value log file %s offset %d: %w",
			ErrCorrupt, re.kind, re.id, verify.FileName(re.ref.File), re.ref.Off, re.err)}, true
}

// failUnreadable fails lease l, whose value b the claim that made it could
// not read, in a commit of its own: dead-lettered at once for damage,
// failed by the retry policy otherwise. The call's context does not cut
// it short: the lease is the engine's to settle.
func (c *core) failUnreadable(ctx context.Context, l *Lease, b *badValue) {
	msg := b.err.Error()
	if len(msg) > MaxErrorBytes {
		msg = msg[:MaxErrorBytes]
	}
	if !utf8.ValidString(msg) {
		msg = strings.ToValidUTF8(msg, "")
	}
	cmd := command{Op: cmdFail, NS: l.Namespace, Queue: l.Queue, Fence: *l, ErrMsg: msg, Permanent: b.permanent}
	var res cmdResult
	if err := c.exec(context.WithoutCancel(ctx), &cmd, &res); err != nil {
		// The lease stays until it expires; the next claim of the task
		// meets the value again.
		c.opts.Logger.Warn("docket: failing a task whose value cannot be read", "id", l.ID,
			"namespace", l.Namespace.String(), "queue", l.Queue, "err", err)
	}
}

// dropUnreadable settles the leases of ls whose values bad could not be
// read and returns the others, in order: a lease whose task went meanwhile
// is left out, one whose value is unreadable is failed (failUnreadable).
func (c *core) dropUnreadable(ctx context.Context, ls []Lease, bad []badValue) []Lease {
	drop := make([]bool, len(ls))
	for k := range bad {
		b := &bad[k]
		if drop[b.w.i] {
			continue // one failure a task, whatever else of it is bad
		}
		drop[b.w.i] = true
		if !b.gone {
			what := "the task is failed by its retry policy, not leased"
			if b.permanent {
				what = "the task is dead-lettered, not leased"
			}
			c.noteUnreadable(b, &ls[b.w.i].Namespace, ls[b.w.i].Queue, what)
			c.failUnreadable(ctx, &ls[b.w.i], b)
		}
	}
	kept := ls[:0]
	for i := range ls {
		if !drop[i] {
			kept = append(kept, ls[i])
		}
	}
	clear(ls[len(kept):]) // no stale lease, nor its payload, past the end
	return kept
}

// unreadableEvery is the least time between two log lines about values
// that cannot be read.
const unreadableEvery = time.Second

// unreadableRemember bounds the tasks the log remembers having logged;
// past it, it forgets them all (and may log one of them again).
const unreadableRemember = 4096

// unreadableLog logs the values that cannot be read without a line for
// every read: a task read again and again is logged once, and a burst of
// damaged tasks at most once every unreadableEvery.
type unreadableLog struct {
	mu     sync.Mutex
	logged map[uint64]bool // tasks logged already
	rate   lograte.Sampler // at most one line every unreadableEvery
}

// noteUnreadable counts the value b, of a task of queue in ns, that could
// not be read, and logs it (see unreadableLog); what says what the call
// did about it.
func (c *core) noteUnreadable(b *badValue, ns *Namespace, queue, what string) {
	c.mu.Lock()
	c.stats.UnreadableValues++
	c.mu.Unlock()
	l := &c.unread
	now := c.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.logged[b.w.id] {
		return
	}
	unlogged, ok := l.rate.Allow(now, unreadableEvery)
	if !ok {
		return
	}
	if l.logged == nil || len(l.logged) >= unreadableRemember {
		l.logged = map[uint64]bool{}
	}
	l.logged[b.w.id] = true
	args := []any{"id", b.w.id, "namespace", ns.String(), "queue", queue, "value", b.w.kind.String(),
		"permanent", b.permanent, "err", b.err}
	if unlogged > 0 {
		args = append(args, "unlogged", unlogged)
	}
	c.opts.Logger.Error("docket: a value in the value log cannot be read; "+what+" (docket verify lists the damage)", args...)
}
