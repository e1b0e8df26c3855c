package engine

import (
	"context"
	"strconv"

	"github.com/docketdb/docket/engine/internal/machine"
	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/engine/internal/view"
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
// A bulk action is a command of its own (machine.Bulk): the filter, the action
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
	if err := validate.PageLimit("search limit", &o.Limit); err != nil {
		return SearchPage{}, err
	}
	lo, hi := f.IDs()
	from, err := view.SearchFrom(o.Cursor, o.Newest, lo, hi)
	if err != nil {
		return SearchPage{}, err
	}
	if err := q.check(PermRead); err != nil {
		return SearchPage{}, err
	}
	var page SearchPage
	var ws []want
	c, qk := q.db.c, q.key()
	err = c.walk(ctx, qk, from, lo, hi, o.Newest, func(t *index.Task, now int64) bool {
		if len(page.Tasks) == o.Limit {
			page.Next = strconv.FormatUint(page.Tasks[len(page.Tasks)-1].ID, 10)
			return false
		}
		page.Tasks = append(page.Tasks, infoOf(t, now))
		view.Deps(c.store, &page.Tasks[len(page.Tasks)-1], false)
		ws = wants(ws, len(page.Tasks)-1, t, true)
		return true
	}, &f)
	if err == nil && len(ws) > 0 {
		_, err = c.fillInfos(page.Tasks, ws)
	}
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
			if t.Queue.Key != qk || !f.Match(t, now, gone) {
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
	if a < BulkRetry || a > BulkDelete {
		return BulkResult{}, invalid("bulk action %d", a)
	}
	if err := q.check(PermAdmin); err != nil {
		return BulkResult{}, err
	}
	c, qk := q.db.c, q.key()
	var skips [nSkip]int
	defer func() { out.Skipped = machine.Skipped(&skips) }()
	lo, hi := tf.IDs()
	from := lo
	for {
		// Find the next match without a commit: a walk over many
		// records that match nothing writes nothing.
		first := uint64(0)
		err = c.walk(ctx, qk, from, lo, hi, false, func(t *index.Task, _ int64) bool {
			first = t.ID
			return false
		}, &tf)
		if err != nil || first == 0 {
			return out, err
		}
		cmd := q.cmd(&machine.Bulk{Action: a, Filter: f, From: first, Scan: bulkScan})
		var res cmdResult
		err = c.exec(ctx, &cmd, &res)
		out.Done += res.N
		for r, n := range res.Skips {
			skips[r] += n
		}
		for _, id := range res.IDs {
			c.watch.fire(id)
		}
		if afterBulkCommit != nil {
			afterBulkCommit()
		}
		if err != nil || res.Next == 0 {
			return out, err
		}
		from = res.Next
	}
}
