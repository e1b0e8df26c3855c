package valuelog

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/docketdb/docket/dockettype"
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
//     once for each task, and at most one line every Every, the next line
//     saying how many went unlogged.

// Bad is a value a read could not return.
type Bad struct {
	W Want
	// Gone: the task ended or changed while the value was read (nothing
	// is wrong with the value log). Otherwise Err, wrapping ErrCorrupt,
	// names the value, its file and offset, and the cause; Permanent says
	// that reading again cannot help (damage, not an I/O error).
	Gone      bool
	Err       error
	Permanent bool
}

// readError is a read the value log refused or failed: its cause and the
// reference read.
type readError struct {
	kind index.ValueKind
	id   uint64
	ref  index.ValueRef
	err  error
}

func (e *readError) Error() string {
	return fmt.Sprintf("docket: the %s of task %d: %v", e.kind, e.id, e.err)
}

func (e *readError) Unwrap() error { return e.err }

// unreadable turns err, a failed read of the value w names, into the bad
// value a call reports; ok is false for an error of the call as a whole
// (the DB closing or failed), which the caller returns.
func unreadable(w *Want, err error) (Bad, bool) {
	if errors.Is(err, ErrGone) {
		return Bad{W: *w, Gone: true}, true
	}
	var re *readError
	if !errors.As(err, &re) || errors.Is(err, vlog.ErrClosed) {
		return Bad{}, false
	}
	return Bad{W: *w, Permanent: verify.IsValueDamage(re.err),
		Err: fmt.Errorf("%w: the %s of task %d cannot be read from value log file %s offset %d: %w",
			dockettype.ErrCorrupt, re.kind, re.id, verify.FileName(re.ref.File), re.ref.Off, re.err)}, true
}

// Drop settles the leases of ls whose values bad could not be read and
// returns the others, in order: a lease whose task went meanwhile is left
// out, one whose value is unreadable is given to fail (once a task), with
// what the engine does about it for the log line.
func Drop(ls []dockettype.Lease, bad []Bad, fail func(l *dockettype.Lease, b *Bad, what string)) []dockettype.Lease {
	drop := make([]bool, len(ls))
	for k := range bad {
		b := &bad[k]
		if drop[b.W.I] {
			continue // one failure a task, whatever else of it is bad
		}
		drop[b.W.I] = true
		if !b.Gone {
			what := "the task is failed by its retry policy, not leased"
			if b.Permanent {
				what = "the task is dead-lettered, not leased"
			}
			fail(&ls[b.W.I], b, what)
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

// Every is the least time between two log lines about values that cannot
// be read.
const Every = time.Second

// remember bounds the tasks Notes remembers having logged; past it, it
// forgets them all (and may log one of them again).
const remember = 4096

// Notes logs the values that cannot be read without a line for every
// read: a task read again and again is logged once, and a burst of
// damaged tasks at most once every Every.
type Notes struct {
	mu     sync.Mutex
	logged map[uint64]bool // tasks logged already
	rate   lograte.Sampler // at most one line every Every
}

// Note logs the value b, of a task of queue in ns, that could not be read
// at now; what says what the call did about it.
func (l *Notes) Note(log *slog.Logger, now time.Time, b *Bad, ns *dockettype.Namespace, queue, what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.logged[b.W.ID] {
		return
	}
	unlogged, ok := l.rate.Allow(now, Every)
	if !ok {
		return
	}
	if l.logged == nil || len(l.logged) >= remember {
		l.logged = map[uint64]bool{}
	}
	l.logged[b.W.ID] = true
	args := []any{"id", b.W.ID, "namespace", ns.String(), "queue", queue, "value", b.W.Kind.String(),
		"permanent", b.Permanent, "err", b.Err}
	if unlogged > 0 {
		args = append(args, "unlogged", unlogged)
	}
	log.Error("docket: a value in the value log cannot be read; "+what+" (docket verify lists the damage)", args...)
}
