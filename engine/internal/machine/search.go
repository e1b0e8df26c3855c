package machine

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/internal/index"
)

// CmdBulk is Queue.Bulk's operation, one command per step of its walk.
const CmdBulk CmdOp = 22

func init() { register(CmdBulk, "bulk", Version2, func() Args { return new(Bulk) }) }

// Bulk is one step of Queue.Bulk: the action on the tasks the filter
// selects among Scan records from From. Its arguments are [action from
// scan [state...] retrying kind error partition headerKey headerValue
// minID maxID since before] (since and before in Unix micros, the lowest
// and highest int64 for no bound).
type Bulk struct {
	Action dockettype.BulkAction
	Filter dockettype.Filter
	From   uint64 // the first id the walk reads
	Scan   int    // the most records it reads
}

func (*Bulk) Op() CmdOp { return CmdBulk }

func (b *Bulk) encode(e *cmdEncoder) {
	f := &b.Filter
	e.uint(uint64(b.Action))
	e.uint(b.From)
	e.int(int64(b.Scan))
	e.array(len(f.States))
	for _, st := range f.States {
		e.uint(uint64(st))
	}
	e.uint(uint64(f.Retrying))
	e.str(f.Kind)
	e.str(f.Error)
	e.str(f.Partition)
	e.str(f.HeaderKey)
	e.str(f.HeaderValue)
	e.uint(f.MinID)
	e.uint(f.MaxID)
	since, before := int64(math.MinInt64), int64(math.MaxInt64)
	if !f.EnqueuedSince.IsZero() {
		since = f.EnqueuedSince.UnixMicro()
	}
	if !f.EnqueuedBefore.IsZero() {
		before = f.EnqueuedBefore.UnixMicro()
	}
	e.int(since)
	e.int(before)
}

func (b *Bulk) decode(d *cmdDecoder, _ *Command) {
	f := &b.Filter
	b.Action = dockettype.BulkAction(d.uint())
	b.From = d.uint()
	b.Scan = int(d.small())
	if n := d.array(8); n > 0 {
		f.States = make([]dockettype.State, n)
		for i := range f.States {
			f.States[i] = dockettype.State(d.small())
		}
	}
	f.Retrying = dockettype.Retrying(d.small())
	f.Kind, f.Error, f.Partition = d.str(), d.str(), d.str()
	f.HeaderKey, f.HeaderValue = d.str(), d.str()
	f.MinID, f.MaxID = d.uint(), d.uint()
	if since := d.int(); since != math.MinInt64 {
		f.EnqueuedSince = time.UnixMicro(since).UTC()
	}
	if before := d.int(); before != math.MaxInt64 {
		f.EnqueuedBefore = time.UnixMicro(before).UTC()
	}
	if d.err != nil {
		return
	}
	if !validate.BulkAction(b.Action) || b.From == 0 || b.Scan < 1 || b.Scan > dockettype.MaxBatch {
		d.fail(fmt.Errorf("bulk %s from %d scanning %d", b.Action, b.From, b.Scan))
		return
	}
	d.fail(f.Validate())
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

// plan walks at most args.Scan records from args.From and
// plans the action on the tasks of the queue that the filter selects, at
// most MaxBatch of them. A task the batch already changed (a dependent
// that a cancellation cancelled or woke) ends the walk before it: the
// next command reads it as this one left it.
func (args *Bulk) plan(p *Planner, cmd *Command, res *Result) error {
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
		if r, skip := args.one(p, cmd, t, res); skip {
			res.Skips[r]++
		} else {
			res.N++
		}
		mark()
		return true
	})
	return nil
}

// one plans the action on t, or says why it skips t.
func (args *Bulk) one(p *Planner, cmd *Command, t *index.Task, res *Result) (SkipReason, bool) {
	st := t.StateAt(p.now)
	a := args.Action
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
		p.cancel(cmd.Key(), t)
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
