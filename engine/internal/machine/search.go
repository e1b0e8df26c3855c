package machine

import (
	"math"
	"strings"
	"unicode/utf8"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/internal/index"
)

// BulkArgs are a CmdBulk's arguments.
type BulkArgs struct {
	Action dockettype.BulkAction
	Filter dockettype.Filter
	From   uint64 // the first id the walk reads
	Scan   int    // the most records it reads
}

// Why a bulk action left a task that its filter selects as it was.
// Part of the command's outcome: its order is the order of BulkResult.Skipped.
type SkipReason uint8

const (
	SkipReady SkipReason = iota
	SkipInFlight
	SkipWaiting
	SkipCompleted
	SkipDead
	SkipPending
	NSkip
)

var SkipNames = [NSkip]string{
	SkipReady:     "already ready",
	SkipInFlight:  "in flight",
	SkipWaiting:   "waiting for dependencies",
	SkipCompleted: "completed",
	SkipDead:      "dead (retry redrives dead tasks)",
	SkipPending:   "not ended (cancel removes tasks still to run)",
}

// Skipped lists the tasks a bulk action skipped, by reason, as
// BulkResult.Skipped does: skips counts them by SkipReason.
func Skipped(skips *[NSkip]int) []dockettype.BulkSkip {
	var out []dockettype.BulkSkip
	for r, n := range skips {
		if n > 0 {
			out = append(out, dockettype.BulkSkip{Reason: SkipNames[r], Count: n})
		}
	}
	return out
}

// TaskFilter is a validated Filter in the index's terms.
type TaskFilter struct {
	states       uint8 // a bit per index.TaskState; 0: all
	retrying     dockettype.Retrying
	kind, errLow string
	part         string
	hasPart      bool
	hk, hv       string
	minID, maxID uint64 // maxID is math.MaxUint64 when unbounded
	since, until int64  // created in since..until-1 (micros)
}

// CompileFilter validates f (as Filter.Validate) and puts it in the index's terms.
func CompileFilter(f *dockettype.Filter) (TaskFilter, error) {
	if err := f.Validate(); err != nil {
		return TaskFilter{}, err
	}
	tf := TaskFilter{retrying: f.Retrying, kind: f.Kind, errLow: strings.ToLower(f.Error),
		part: f.Partition, hasPart: f.Partition != "", hk: f.HeaderKey, hv: f.HeaderValue,
		minID: f.MinID, maxID: f.MaxID, since: math.MinInt64, until: math.MaxInt64}
	for _, s := range f.States {
		tf.states |= 1 << s
	}
	if tf.maxID == 0 {
		tf.maxID = math.MaxUint64
	}
	if !f.EnqueuedSince.IsZero() {
		tf.since = f.EnqueuedSince.UnixMicro()
	}
	if !f.EnqueuedBefore.IsZero() {
		tf.until = f.EnqueuedBefore.UnixMicro()
	}
	return tf, nil
}

// Match reports whether t, a task of the searched queue, is selected at
// now; gone is doneBefore(now) (retained completions at or before it are
// forgotten). It reads t as infoOf shows it: an expired lease with its
// "lease expired" error.
func (f *TaskFilter) Match(t *index.Task, now, gone int64) bool {
	if t.ID < f.minID || t.ID > f.maxID || t.Created < f.since || t.Created >= f.until {
		return false
	}
	st := t.StateAt(now)
	if st == index.StateCompleted && t.Updated() <= gone {
		return false
	}
	if f.states != 0 && f.states&(1<<st) == 0 {
		return false
	}
	if f.hasPart && t.PartitionKey() != f.part {
		return false
	}
	if st != t.State {
		t = At(t, now)
	}
	x := t.Ex()
	if f.kind != "" && x.Kind != f.kind {
		return false
	}
	if f.hk != "" {
		v, ok := x.Headers[f.hk]
		if !ok || f.hv != "" && v != f.hv {
			return false
		}
	}
	if f.errLow != "" && !containsFold(x.LastError, f.errLow) {
		return false
	}
	switch f.retrying {
	case dockettype.OnlyRetrying:
		return isRetrying(t, st)
	case dockettype.NotRetrying:
		return !isRetrying(t, st)
	}
	return true
}

// isRetrying: scheduled after a failed attempt, its error recorded.
func isRetrying(t *index.Task, st index.TaskState) bool {
	return st == index.StateScheduled && t.Attempts > 0 && t.Ex().LastError != ""
}

// containsFold reports whether s contains low (already lower case),
// ignoring case; it allocates only for text that is not ASCII.
func containsFold(s, low string) bool {
	if len(low) > len(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return strings.Contains(strings.ToLower(s), low)
		}
	}
	for i := 0; i+len(low) <= len(s); i++ {
		j := 0
		for ; j < len(low); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != low[j] {
				break
			}
		}
		if j == len(low) {
			return true
		}
	}
	return false
}

// planBulk walks at most cmd.bulk.scan records from cmd.bulk.from and
// plans the action on the tasks of the queue that the filter selects, at
// most MaxBatch of them. A task the batch already changed (a dependent
// that a cancellation cancelled or woke) ends the walk before it: the
// next command reads it as this one left it.
func planBulk(p *Planner, cmd *Command, res *Result) error {
	args := &cmd.Bulk
	f, err := CompileFilter(&args.Filter)
	if err != nil {
		return err
	}
	st := p.s.Store
	qk := cmd.Key()
	gone := p.s.DoneBefore(p.now)
	var touched map[uint64]struct{}
	marked := 0
	mark := func() {
		for ; marked < len(p.B.Mutations); marked++ {
			m := &p.B.Mutations[marked]
			var id uint64
			switch m.Kind {
			case index.MutPutTask:
				id = m.Task.ID
			case index.MutUpdateTask, index.MutDeleteTask:
				id = m.Update.ID
			default:
				continue
			}
			if touched == nil {
				touched = make(map[uint64]struct{})
			}
			touched[id] = struct{}{}
		}
	}
	mark()
	n, acted := 0, 0
	res.Next = 0
	st.TasksFrom(args.From, false, func(t *index.Task) bool {
		if t.ID > f.maxID {
			return false
		}
		if n == args.Scan || acted == dockettype.MaxBatch {
			res.Next = t.ID
			return false
		}
		if _, ok := touched[t.ID]; ok {
			res.Next = t.ID
			return false
		}
		n++
		if t.Queue.Key != qk || !f.Match(t, p.now, gone) {
			return true
		}
		acted++
		if r, skip := bulkOne(p, cmd, t, res); skip {
			res.Skips[r]++
		} else {
			res.N++
		}
		mark()
		return true
	})
	return nil
}

// bulkOne plans the action on t, or says why it skips t.
func bulkOne(p *Planner, cmd *Command, t *index.Task, res *Result) (SkipReason, bool) {
	st := t.StateAt(p.now)
	a := cmd.Bulk.Action
	switch {
	case a == dockettype.BulkRetry && st == index.StateDead:
		p.redrive(t)
		return 0, false
	case (a == dockettype.BulkRetry || a == dockettype.BulkRunNow) && st == index.StateScheduled:
		u := index.UpdateOf(t)
		u.State, u.NotBefore, u.Updated = index.StateReady, p.now, p.now
		p.update(u)
		return 0, false
	case a == dockettype.BulkCancel && st != index.StateCompleted,
		a == dockettype.BulkDelete && (st == index.StateDead || st == index.StateCompleted):
		if t.State == index.StateInFlight {
			res.IDs = append(res.IDs, t.ID) // its lease watches fire
		}
		_ = planCancel(p, cmd, t)
		return 0, false
	}
	if a == dockettype.BulkDelete {
		if st == index.StateInFlight {
			return SkipInFlight, true
		}
		return SkipPending, true
	}
	switch st {
	case index.StateReady:
		return SkipReady, true
	case index.StateInFlight:
		return SkipInFlight, true
	case index.StateWaiting:
		return SkipWaiting, true
	case index.StateDead:
		return SkipDead, true
	}
	return SkipCompleted, true
}

// IDs returns the range of ids f selects, both included.
func (f *TaskFilter) IDs() (lo, hi uint64) { return f.minID, f.maxID }
