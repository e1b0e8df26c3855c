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

// rotationStart is where the claims planned on a state that last applied
// batch seq start their rotation over the partitions (splitmix64 of seq).
func rotationStart(seq uint64) uint64 {
	z := seq + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// partRoom is how many more tasks of partition pt a claim at now may
// lease under the queue's settings conf (its partition bound and its
// partition rate limit, each 0 for none), freed being a task the batch has
// already taken out of flight (nil for none): up to max. Call with mu held.
func (c *core) partRoom(pt *index.Partition, now int64, conf *index.QueueConf, freed *index.Task, max int) int {
	if conf.PartRate > 0 {
		max = int(min(int64(max), c.store.PartTokens(conf, pt.Key, now)))
	}
	if conf.PartMaxInFlight == 0 {
		return max
	}
	n := pt.InFlightAt(now)
	if freed != nil && freed.PartitionKey() == pt.Key {
		n--
	}
	return min(max, int(conf.PartMaxInFlight)-n)
}

// claimParts appends to p.due, in the order they are to be leased, up to
// max tasks of the partitioned queue q claimable now: one from each
// partition with claimable work and room under partMax, in rotation, then
// round after round from those that had more. It costs O((max + passed
// over) log n), the partitions passed over being those with work stored
// but none claimable now, at their bound or out of tokens.
func (p *planner) claimParts(q *index.Queue, max int, conf *index.QueueConf, freed *index.Task) []index.Due {
	now := p.now
	due := p.due[:0]
	turns := p.turns[:0]
	q.Rotation(rotationStart(p.c.store.Seq()), func(pt *index.Partition) bool {
		room := p.c.partRoom(pt, now, conf, freed, max)
		if room <= 0 {
			return true
		}
		n := len(due)
		if due = pt.Claimable(now, index.ServingStart, false, 1, due); len(due) == n {
			return true
		}
		if room > 1 {
			d := due[n]
			turns = append(turns, partTurn{part: pt, room: room - 1, pos: index.PrioItem{Prio: d.Prio, ID: d.ID}})
		}
		return len(due) < max
	})
	// The partitions served in a round have another turn in the next, in
	// the same order, from after the task they gave last.
	for len(due) < max && len(turns) > 0 {
		next := turns[:0]
		for _, t := range turns {
			if len(due) == max {
				break
			}
			n := len(due)
			if due = t.part.Claimable(now, t.pos, true, 1, due); len(due) == n {
				continue
			}
			d := due[n]
			t.pos = index.PrioItem{Prio: d.Prio, ID: d.ID}
			if t.room--; t.room > 0 {
				next = append(next, t)
			}
		}
		turns = next
	}
	clear(turns)
	p.turns = turns[:0]
	return due
}

// partTurn is a partition's place in the rounds of claimParts: how many
// more tasks it may give and the last it gave.
type partTurn struct {
	part *index.Partition
	room int
	pos  index.PrioItem
}

// partsClaimable returns how many tasks of the partitioned queue iq a
// claim at now may lease under the partition limits of its settings conf,
// or any number of at least limit when there are that many. Call with mu
// held.
func (c *core) partsClaimable(iq *index.Queue, now int64, conf *index.QueueConf, limit int) int {
	n := 0
	var buf []index.Due
	iq.Rotation(0, func(pt *index.Partition) bool {
		if room := c.partRoom(pt, now, conf, nil, limit-n); room > 0 {
			buf = pt.Claimable(now, index.ServingStart, false, room, buf[:0])
			n += len(buf)
		}
		return n < limit
	})
	return n
}

// partsDue is claimDue for a partitioned queue iq under the partition
// limits of its settings conf: now when a claim may lease a task, else the
// earliest time a timer of one of its partitions with work comes due, a
// lease of one ends, or the bucket of one that is out of tokens gains one
// (0: none; a task leaving flight wakes parked claims). Call with mu held.
func (c *core) partsDue(iq *index.Queue, now int64, conf *index.QueueConf) int64 {
	if c.partsClaimable(iq, now, conf, 1) > 0 {
		return now
	}
	var at int64
	iq.Rotation(0, func(pt *index.Partition) bool {
		if t := pt.NextChange(now); t != 0 && (at == 0 || t < at) {
			at = t
		}
		if conf.PartRate > 0 && c.store.PartTokens(conf, pt.Key, now) == 0 {
			if t := c.store.PartNextToken(conf, pt.Key, now); at == 0 || t < at {
				at = t
			}
		}
		return true
	})
	return at
}
