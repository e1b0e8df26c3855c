package engine

import (
	"context"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/docketdb/docket/internal/index"
)

// Search and bulk actions over a whole queue.
//
// Both walk the tasks of the DB in id order (ids increase with enqueue
// time, so ascending is oldest first) and keep those of the queue that
// the filter matches. The walk holds the engine lock for at most
// searchChunk records at a time and resumes by id, the way DB.Queues
// pages, so a search over millions of tasks never stalls the commit path:
// commits interleave between chunks, and a search (or a count) sees each
// task as it was when its chunk was read, not the queue at one moment.
//
// A bulk action is a command of its own (cmdBulk): the filter, the action
// and the id its walk starts from. Planned under the lock, it walks at
// most bulkScan records from there, acts on at most MaxBatch matches and
// says where the next one starts; Bulk repeats it until the walk ends, each
// in its own commit. A crash between commits leaves every task either
// acted on or not, and running the same bulk action again finishes the
// rest (the tasks it already moved no longer match, or are skipped).

// searchChunk bounds the records a search or count reads per lock hold.
const searchChunk = 4096

// bulkScan bounds the records one bulk command walks: part of the
// command, so that every node of a replicated log plans the same batch.
const bulkScan = 4096

// Test hooks, nil outside tests: afterChunk runs between the chunks of a
// walk (no lock held) and afterBulkCommit after each commit of Bulk.
var afterChunk, afterBulkCommit func()

// Retrying narrows a Filter to the scheduled tasks that wait out their
// backoff after a failed attempt, or to every task but those.
type Retrying uint8

const (
	// AnyRetrying does not look at retries.
	AnyRetrying Retrying = iota
	// OnlyRetrying keeps the tasks retrying: scheduled after a failed
	// attempt, with its error recorded.
	OnlyRetrying
	// NotRetrying keeps every task but those retrying (in the scheduled
	// state: the timers).
	NotRetrying
)

// Filter selects tasks of a queue for Search and Bulk. Every field set
// must hold; the zero Filter selects every task.
type Filter struct {
	// States keeps the tasks in one of these states as of the clock's now
	// (a due timer is ready, an expired lease ready or dead, like List);
	// none keeps every state.
	States []State
	// Retrying narrows the scheduled tasks to retries or to timers.
	Retrying Retrying
	// Kind keeps the tasks of this kind.
	Kind string
	// Error keeps the tasks whose last error contains this text, ignoring
	// case.
	Error string
	// Partition keeps the tasks of this partition.
	Partition string
	// HeaderKey keeps the tasks with this header; with HeaderValue set,
	// with this value.
	HeaderKey, HeaderValue string
	// MinID and MaxID keep ids in MinID..MaxID, both included; 0 is no
	// bound.
	MinID, MaxID uint64
	// EnqueuedSince keeps the tasks enqueued at or after it and
	// EnqueuedBefore those enqueued before it; zero is no bound.
	EnqueuedSince, EnqueuedBefore time.Time
}

// MaxFilterBytes bounds a Filter's text fields (Error and the header).
const MaxFilterBytes = MaxHeaderBytes

// Active reports whether f selects among the tasks (any field set).
func (f *Filter) Active() bool {
	return len(f.States) > 0 || f.Retrying != AnyRetrying || f.Kind != "" || f.Error != "" || f.Partition != "" ||
		f.HeaderKey != "" || f.MinID != 0 || f.MaxID != 0 || !f.EnqueuedSince.IsZero() || !f.EnqueuedBefore.IsZero()
}

// Validate returns ErrInvalid naming what is wrong with f, nil when it
// can be searched.
func (f *Filter) Validate() error {
	_, err := compileFilter(f)
	return err
}

// taskFilter is a validated Filter in the index's terms.
type taskFilter struct {
	states       uint8 // a bit per index.TaskState; 0: all
	retrying     Retrying
	kind, errLow string
	part         string
	hasPart      bool
	hk, hv       string
	minID, maxID uint64 // maxID is math.MaxUint64 when unbounded
	since, until int64  // created in since..until-1 (micros)
}

func compileFilter(f *Filter) (taskFilter, error) {
	tf := taskFilter{retrying: f.Retrying, kind: f.Kind, errLow: strings.ToLower(f.Error),
		part: f.Partition, hasPart: f.Partition != "", hk: f.HeaderKey, hv: f.HeaderValue,
		minID: f.MinID, maxID: f.MaxID, since: math.MinInt64, until: math.MaxInt64}
	for _, s := range f.States {
		if !index.TaskState(s).Valid() {
			return tf, invalid("filter state %d", s)
		}
		tf.states |= 1 << s
	}
	if f.Retrying > NotRetrying {
		return tf, invalid("filter retrying %d is not one of any (0), only (1) or not (2)", f.Retrying)
	}
	for _, fld := range []struct{ name, v string }{{"kind", f.Kind}, {"partition", f.Partition},
		{"error text", f.Error}, {"header key", f.HeaderKey}, {"header value", f.HeaderValue}} {
		max := MaxNameBytes
		if fld.name != "kind" && fld.name != "partition" {
			max = MaxFilterBytes
		}
		switch {
		case len(fld.v) > max:
			return tf, invalid("filter %s is %d bytes, over the limit of %d", fld.name, len(fld.v), max)
		case !utf8.ValidString(fld.v):
			return tf, invalid("filter %s is not valid UTF-8", fld.name)
		}
	}
	if f.HeaderValue != "" && f.HeaderKey == "" {
		return tf, invalid("filter header value %.40q without a header key", f.HeaderValue)
	}
	if tf.maxID == 0 {
		tf.maxID = math.MaxUint64
	}
	if tf.minID > tf.maxID {
		return tf, invalid("filter id range %d..%d is empty", f.MinID, f.MaxID)
	}
	if !f.EnqueuedSince.IsZero() {
		tf.since = f.EnqueuedSince.UnixMicro()
	}
	if !f.EnqueuedBefore.IsZero() {
		tf.until = f.EnqueuedBefore.UnixMicro()
	}
	if tf.since >= tf.until {
		return tf, invalid("filter enqueued since %s and before %s is empty",
			f.EnqueuedSince.Format(time.RFC3339), f.EnqueuedBefore.Format(time.RFC3339))
	}
	return tf, nil
}

// match reports whether t, a task of the searched queue, is selected at
// now; gone is doneBefore(now) (retained completions at or before it are
// forgotten). It reads t as infoOf shows it: an expired lease with its
// "lease expired" error.
func (f *taskFilter) match(t *index.Task, now, gone int64) bool {
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
		t = at(t, now)
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
	case OnlyRetrying:
		return isRetrying(t, st)
	case NotRetrying:
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

// SearchOptions asks Search for a page of the tasks a filter selects.
type SearchOptions struct {
	Filter Filter
	// Newest orders the tasks newest first (descending id); by default
	// they come oldest first.
	Newest bool
	// Limit bounds the page; 0 means 100, at most MaxBatch.
	Limit int
	// Cursor continues after the page that returned it (with the same
	// filter and order); "" starts at the beginning.
	Cursor string
	// Count asks for the number of every task the filter selects, not
	// only this page's: a walk over the whole queue.
	Count bool
}

// SearchPage is one page of a search. Next is "" when nothing more
// matches.
type SearchPage struct {
	Tasks []TaskInfo
	Next  string
	// Count is the number of tasks the filter selects, when
	// SearchOptions.Count asked for it (else 0), and MaxID the highest id
	// among them: a bulk action confirmed for Count tasks can bound its
	// filter by it (Filter.MaxID) to leave out tasks enqueued since. The
	// count is exact over a walk in chunks: a task that changes while the
	// walk runs is counted as its chunk saw it.
	Count int
	MaxID uint64
}

// Search returns a page of the queue's tasks that o.Filter selects, in id
// order (oldest first, or newest first with o.Newest), and with o.Count
// how many it selects in all. It walks the whole queue in chunks, so a
// match is found however many tasks come before it; a sparse filter over
// a large DB costs a walk over all of its tasks. ErrInvalid for a bad
// filter, limit or cursor.
func (q *queue) Search(ctx context.Context, o SearchOptions) (SearchPage, error) {
	f, err := compileFilter(&o.Filter)
	if err != nil {
		return SearchPage{}, err
	}
	if o.Limit < 0 || o.Limit > MaxBatch {
		return SearchPage{}, invalid("search limit %d is outside 0..%d", o.Limit, MaxBatch)
	}
	if o.Limit == 0 {
		o.Limit = 100
	}
	from, lo, hi := f.minID, f.minID, f.maxID
	if o.Newest {
		from = f.maxID
	}
	if o.Cursor != "" {
		id, err := strconv.ParseUint(o.Cursor, 10, 64)
		if err != nil || id == 0 || id == math.MaxUint64 {
			return SearchPage{}, invalid("search cursor %.40q", o.Cursor)
		}
		if o.Newest {
			from = min(from, id-1)
		} else {
			from = max(from, id+1)
		}
	}
	if err := q.check(PermRead); err != nil {
		return SearchPage{}, err
	}
	var page SearchPage
	c, qk := q.db.c, q.key()
	err = c.walk(ctx, qk, from, lo, hi, o.Newest, func(t *index.Task, now int64) bool {
		if len(page.Tasks) == o.Limit {
			page.Next = strconv.FormatUint(page.Tasks[len(page.Tasks)-1].ID, 10)
			return false
		}
		page.Tasks = append(page.Tasks, infoOf(t, now))
		c.depInfo(&page.Tasks[len(page.Tasks)-1], false)
		return true
	}, &f)
	if err != nil || !o.Count {
		return page, err
	}
	err = c.walk(ctx, qk, lo, lo, hi, false, func(t *index.Task, _ int64) bool {
		page.Count++
		page.MaxID = t.ID
		return true
	}, &f)
	return page, err
}

// walk calls fn, holding mu, with the tasks of queue qk that f matches,
// in id order from id from within lo..hi (descending with desc), until fn
// returns false or the ids run out. It releases mu every searchChunk
// records, and waits, like read, until what it saw is durable.
func (c *core) walk(ctx context.Context, qk index.QueueKey, from, lo, hi uint64, desc bool,
	fn func(t *index.Task, now int64) bool, f *taskFilter) error {
	if err := c.readBarrier(ctx); err != nil {
		return err
	}
	var seq uint64
	for done := from < lo || from > hi; !done; {
		if err := ctx.Err(); err != nil {
			return err
		}
		c.mu.Lock()
		if err := c.usable(); err != nil {
			c.mu.Unlock()
			return err
		}
		now := c.now()
		gone := c.doneBefore(now)
		n := 0
		done = true
		c.store.TasksFrom(from, desc, func(t *index.Task) bool {
			if t.ID < lo || t.ID > hi {
				return false
			}
			if n == searchChunk {
				from, done = t.ID, false
				return false
			}
			n++
			if t.Queue.Key != qk || !f.match(t, now, gone) {
				return true
			}
			return fn(t, now)
		})
		seq = c.store.Seq()
		c.mu.Unlock()
		if !done && afterChunk != nil {
			afterChunk()
		}
	}
	return c.durable(seq)
}

// BulkAction is what Bulk does to each task a filter selects.
type BulkAction uint8

const (
	// BulkRetry redrives dead tasks (ready, with a fresh attempt budget)
	// and runs scheduled ones now (timers and retries, attempts kept).
	BulkRetry BulkAction = iota + 1
	// BulkCancel removes tasks in any state but completed, as Cancel
	// does: a worker holding one gets ErrLeaseLost when it completes.
	BulkCancel
	// BulkRunNow makes scheduled tasks ready at once, as RunNow does.
	BulkRunNow
	// BulkDelete removes ended tasks: dead and retained completed ones.
	// Tasks still to run are skipped (cancel removes those).
	BulkDelete
)

var bulkNames = [...]string{BulkRetry: "retry", BulkCancel: "cancel", BulkRunNow: "run-now", BulkDelete: "delete"}

func (a BulkAction) String() string {
	if int(a) < len(bulkNames) && bulkNames[a] != "" {
		return bulkNames[a]
	}
	return "BulkAction(" + strconv.Itoa(int(a)) + ")"
}

// ParseBulkAction reads retry, cancel, run-now (or run_now) and delete.
func ParseBulkAction(s string) (BulkAction, error) {
	s = strings.ReplaceAll(strings.ToLower(s), "_", "-")
	for a, n := range bulkNames {
		if n != "" && n == s {
			return BulkAction(a), nil
		}
	}
	return 0, invalid("bulk action %.40q is not retry, cancel, run-now or delete", s)
}

// Why a bulk action left a task that its filter selects as it was.
// Part of the command's outcome: its order is the order of BulkResult.Skipped.
type skipReason uint8

const (
	skipReady skipReason = iota
	skipInFlight
	skipWaiting
	skipCompleted
	skipDead
	skipPending
	nSkip
)

var skipNames = [nSkip]string{
	skipReady:     "already ready",
	skipInFlight:  "in flight",
	skipWaiting:   "waiting for dependencies",
	skipCompleted: "completed",
	skipDead:      "dead (retry redrives dead tasks)",
	skipPending:   "not ended (cancel removes tasks still to run)",
}

// BulkSkip counts the tasks a bulk action left as they were for one reason.
type BulkSkip struct {
	Reason string
	Count  int
}

// BulkResult says what a bulk action did: Done tasks acted on, and the
// selected tasks it left, by reason.
type BulkResult struct {
	Done    int
	Skipped []BulkSkip
}

// SkippedTotal is the number of tasks skipped for any reason.
func (r BulkResult) SkippedTotal() int {
	n := 0
	for _, s := range r.Skipped {
		n += s.Count
	}
	return n
}

// bulkArgs are a cmdBulk's arguments.
type bulkArgs struct {
	action BulkAction
	filter Filter
	from   uint64 // the first id the walk reads
	scan   int    // the most records it reads
}

// Bulk applies a to every task of the queue that f selects, in id order,
// in commits of at most MaxBatch tasks each (a walk of bulkScan records
// at most), so a large queue keeps serving between them. What each
// action does to each state:
//
//	retry    dead: redriven; scheduled: ready now; others skipped
//	cancel   every state but completed: removed (dependents per policy)
//	run-now  scheduled: ready now; others skipped
//	delete   dead and completed: removed; others skipped
//
// A task that changes between the walk that finds it and the commit is
// judged as it is at the commit. Needs PermAdmin. ErrInvalid for a bad
// filter or action, with nothing changed. On an error the commits made so
// far stand and the result counts them; calling Bulk again finishes the
// rest.
func (q *queue) Bulk(ctx context.Context, f Filter, a BulkAction) (out BulkResult, err error) {
	tf, err := compileFilter(&f)
	if err != nil {
		return BulkResult{}, err
	}
	if !a.valid() {
		return BulkResult{}, invalid("bulk action %d", a)
	}
	if err := q.check(PermAdmin); err != nil {
		return BulkResult{}, err
	}
	c, qk := q.db.c, q.key()
	var skips [nSkip]int
	defer func() {
		for r, n := range skips {
			if n > 0 {
				out.Skipped = append(out.Skipped, BulkSkip{skipNames[r], n})
			}
		}
	}()
	from := tf.minID
	for {
		// Find the next match without a commit: a walk over many
		// records that match nothing writes nothing.
		first := uint64(0)
		err = c.walk(ctx, qk, from, tf.minID, tf.maxID, false, func(t *index.Task, _ int64) bool {
			first = t.ID
			return false
		}, &tf)
		if err != nil || first == 0 {
			return out, err
		}
		cmd := command{op: cmdBulk, ns: q.ns, queue: q.name, bulk: bulkArgs{action: a, filter: f, from: first, scan: bulkScan}}
		var res cmdResult
		err = c.exec(ctx, &cmd, &res)
		out.Done += res.n
		for r, n := range res.skips {
			skips[r] += n
		}
		for _, id := range res.ids {
			c.watch.fire(id)
		}
		if afterBulkCommit != nil {
			afterBulkCommit()
		}
		if err != nil || res.next == 0 {
			return out, err
		}
		from = res.next
	}
}

// planBulk walks at most cmd.bulk.scan records from cmd.bulk.from and
// plans the action on the tasks of the queue that the filter selects, at
// most MaxBatch of them. A task the batch already changed (a dependent
// that a cancellation cancelled or woke) ends the walk before it: the
// next command reads it as this one left it.
func planBulk(p *planner, cmd *command, res *cmdResult) error {
	args := &cmd.bulk
	f, err := compileFilter(&args.filter)
	if err != nil {
		return err
	}
	st := p.c.store
	qk := cmd.key()
	gone := p.c.doneBefore(p.now)
	var touched map[uint64]struct{}
	marked := 0
	mark := func() {
		for ; marked < len(p.b.Mutations); marked++ {
			m := &p.b.Mutations[marked]
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
	res.next = 0
	st.TasksFrom(args.from, false, func(t *index.Task) bool {
		if t.ID > f.maxID {
			return false
		}
		if n == args.scan || acted == MaxBatch {
			res.next = t.ID
			return false
		}
		if _, ok := touched[t.ID]; ok {
			res.next = t.ID
			return false
		}
		n++
		if t.Queue.Key != qk || !f.match(t, p.now, gone) {
			return true
		}
		acted++
		if r, skip := bulkOne(p, cmd, t, res); skip {
			res.skips[r]++
		} else {
			res.n++
		}
		mark()
		return true
	})
	return nil
}

// bulkOne plans the action on t, or says why it skips t.
func bulkOne(p *planner, cmd *command, t *index.Task, res *cmdResult) (skipReason, bool) {
	st := t.StateAt(p.now)
	a := cmd.bulk.action
	switch {
	case a == BulkRetry && st == index.StateDead:
		p.redrive(t)
		return 0, false
	case (a == BulkRetry || a == BulkRunNow) && st == index.StateScheduled:
		u := index.UpdateOf(t)
		u.State, u.NotBefore, u.Updated = index.StateReady, p.now, p.now
		p.update(u)
		return 0, false
	case a == BulkCancel && st != index.StateCompleted,
		a == BulkDelete && (st == index.StateDead || st == index.StateCompleted):
		if t.State == index.StateInFlight {
			res.ids = append(res.ids, t.ID) // its lease watches fire
		}
		_ = planCancel(p, cmd, t)
		return 0, false
	}
	if a == BulkDelete {
		if st == index.StateInFlight {
			return skipInFlight, true
		}
		return skipPending, true
	}
	switch st {
	case index.StateReady:
		return skipReady, true
	case index.StateInFlight:
		return skipInFlight, true
	case index.StateWaiting:
		return skipWaiting, true
	case index.StateDead:
		return skipDead, true
	}
	return skipCompleted, true
}

func (a BulkAction) valid() bool { return a >= BulkRetry && a <= BulkDelete }
