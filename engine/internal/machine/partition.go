package machine

import (
	"github.com/docketdb/docket/internal/index"
)

// RotationStart is where the claims planned on a state that last applied
// batch seq start their rotation over the partitions (splitmix64 of seq).
func RotationStart(seq uint64) uint64 {
	z := seq + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// partRoom is how many more tasks of partition pt a claim at now may
// lease under the queue's settings conf (its partition bound and its
// partition rate limit, each 0 for none), freed being a task the batch has
// already taken out of flight (nil for none): up to max. Call with mu held.
func (s *State) partRoom(pt *index.Partition, now int64, conf *index.QueueConf, freed *index.Task, max int) int {
	if conf.PartRate > 0 {
		max = int(min(int64(max), s.Store.PartTokens(conf, pt.Key, now)))
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
func (p *Planner) claimParts(q *index.Queue, max int, conf *index.QueueConf, freed *index.Task) []index.Due {
	now := p.now
	due := p.due[:0]
	turns := p.turns[:0]
	q.Rotation(RotationStart(p.s.Store.Seq()), func(pt *index.Partition) bool {
		room := p.s.partRoom(pt, now, conf, freed, max)
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

// PartsClaimable returns how many tasks of the partitioned queue iq a
// claim at now may lease under the partition limits of its settings conf,
// or any number of at least limit when there are that many. Call with mu
// held.
func (s *State) PartsClaimable(iq *index.Queue, now int64, conf *index.QueueConf, limit int) int {
	n := 0
	var buf []index.Due
	iq.Rotation(0, func(pt *index.Partition) bool {
		if room := s.partRoom(pt, now, conf, nil, limit-n); room > 0 {
			buf = pt.Claimable(now, index.ServingStart, false, room, buf[:0])
			n += len(buf)
		}
		return n < limit
	})
	return n
}

// PartsDue is claimDue for a partitioned queue iq under the partition
// limits of its settings conf: now when a claim may lease a task, else the
// earliest time a timer of one of its partitions with work comes due, a
// lease of one ends, or the bucket of one that is out of tokens gains one
// (0: none; a task leaving flight wakes parked claims). Call with mu held.
func (s *State) PartsDue(iq *index.Queue, now int64, conf *index.QueueConf) int64 {
	if s.PartsClaimable(iq, now, conf, 1) > 0 {
		return now
	}
	var at int64
	iq.Rotation(0, func(pt *index.Partition) bool {
		if t := pt.NextChange(now); t != 0 && (at == 0 || t < at) {
			at = t
		}
		if conf.PartRate > 0 && s.Store.PartTokens(conf, pt.Key, now) == 0 {
			if t := s.Store.PartNextToken(conf, pt.Key, now); at == 0 || t < at {
				at = t
			}
		}
		return true
	})
	return at
}
