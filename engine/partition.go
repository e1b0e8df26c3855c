package engine

import (
	"context"
	"strings"

	"github.com/docketdb/docket/internal/index"
)

// Fair scheduling by partition. A task may name a partition of its queue
// (Task.Partition: a customer, a tenant); the tasks that name none form
// one partition of their own, the default one. A claim of a queue whose
// tasks name partitions takes turns between the partitions that have
// claimable work: one task from each in rotation, then another round, so
// that a partition with a million ready tasks gets one turn in a round as
// one with ten does. Within a partition tasks are served as a queue's
// always are (higher priority first, then oldest); across partitions the
// rotation decides, not priority: a partition's priority-0 task is served
// in its turn before another partition's second, priority-10 task.
//
// Where a rotation starts is the partition of rank mix(seq) among those
// with work, seq being the last batch the state holds: a function of the
// state alone, the same on every node of a replicated log and after a
// restore, with no cursor to log. Over many claims every partition starts
// a rotation as often as any other.
//
// Limits.PartitionMaxInFlight bounds each partition's tasks in flight: a
// partition at its bound is passed over in the rotation. On a queue whose
// tasks name no partition it is a second bound on the queue's tasks in
// flight (the default partition holds them all).
//
// Limits.PartitionRate gives each partition a token bucket of its own
// (index.PartBucket), as Limits.Rate gives the queue one: a claim leases
// from a partition at most the tokens its bucket holds and takes them, and
// a partition out of tokens is passed over until its bucket gains one. On
// a queue whose tasks name no partition it is a second rate limit on the
// queue. A bucket is stored only while it is not full, as a record of the
// log and snapshots, so replicas and restarts plan the same claims.
// PartitionInfo is one partition of a queue, as Partitions lists it: its
// key ("" for the tasks that name none) and its tasks by state, as of now.
type PartitionInfo struct {
	Key    string
	Counts Counts
}

// PartitionListOptions select a page of a queue's partitions.
type PartitionListOptions struct {
	// Limit bounds the page; 0 means 100, at most MaxBatch.
	Limit int
	// Cursor continues after the page that returned it (PartitionPage.Next);
	// "" starts at the beginning.
	Cursor string
}

// PartitionPage is one page of Partitions. Next is the Cursor of the next
// page, "" when there is nothing more.
type PartitionPage struct {
	Partitions []PartitionInfo
	Next       string
}

// Partitions lists, in key order, the partitions of the queue that hold a
// task, with their tasks by state as of now. A queue none of whose tasks
// named a partition since it last held none has no partitions to list. It
// costs O(p log p) for p partitions, whatever the page. PermRead.
func (q *queue) Partitions(ctx context.Context, o PartitionListOptions) (PartitionPage, error) {
	if o.Limit < 0 || o.Limit > MaxBatch {
		return PartitionPage{}, invalid("limit %d is outside 0..%d", o.Limit, MaxBatch)
	}
	if o.Limit == 0 {
		o.Limit = 100
	}
	after, from := "", false
	if o.Cursor != "" {
		// A cursor is "@" and the last key of the page before: the default
		// partition's key is "", so a bare key could not say it.
		if !strings.HasPrefix(o.Cursor, "@") {
			return PartitionPage{}, invalid("partition cursor %.40q", o.Cursor)
		}
		after, from = o.Cursor[1:], true
	}
	if err := q.check(PermRead); err != nil {
		return PartitionPage{}, err
	}
	var page PartitionPage
	qk := q.key()
	c := q.db.c
	err := c.read(ctx, func() {
		iq := c.store.Queue(qk)
		if iq == nil {
			return
		}
		now := c.now()
		iq.Partitions(after, from, func(p *index.Partition) bool {
			if len(page.Partitions) == o.Limit {
				page.Next = "@" + page.Partitions[len(page.Partitions)-1].Key
				return false
			}
			n := p.CountsAt(now)
			page.Partitions = append(page.Partitions, PartitionInfo{Key: p.Key, Counts: Counts{Ready: n[index.StateReady],
				Scheduled: n[index.StateScheduled], InFlight: n[index.StateInFlight], Dead: n[index.StateDead],
				Completed: n[index.StateCompleted], Waiting: n[index.StateWaiting]}})
			return true
		})
	})
	return page, err
}
