package fuzz

import (
	"slices"

	"github.com/docketdb/docket/engine"
)

// The model of fair scheduling by partition, written out plainly from the
// records at every claim: the engine keeps per-partition indexes.
//
// A claim takes turns between the partitions of the queue with stored
// work (ready, scheduled, or in flight with attempts left; "" is the
// partition of the tasks that name none), in key order from the one of
// rank rotationStart(seq) modulo their number: one claimable task from
// each with room under the partition bound and tokens in its bucket (a
// partition rate limit), then round after round from
// those that gave one and have room left. Within a partition, serving
// order (priority, then id). A queue none of whose tasks names a partition
// is one partition, the same thing.

// rotationStart is the engine's (engine/partition.go), part of the state
// machine: where a claim planned after batch seq starts its rotation.
func rotationStart(seq uint64) uint64 {
	z := seq + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// partitioned reports whether one of q's stored tasks names a partition.
func (m *Model) partitioned(q QueueKey) bool {
	for _, t := range m.tasks {
		if t.Queue == q && t.Partition != "" {
			return true
		}
	}
	return false
}

// rotate picks, in the order a claim leases them, up to max of ready (q's
// tasks claimable now, in serving order), stored being every stored task
// of q and freed the task the claim's commit completed (nil for none).
func (m *Model) rotate(q QueueKey, stored, ready []*Rec, max int, freed *Rec) []*Rec {
	partMax := m.confs[q].PartMax
	active := map[string]bool{}
	inFlight := map[string]int{}
	for _, t := range stored {
		if t.State == engine.Ready || t.State == engine.Scheduled ||
			t.State == engine.InFlight && t.Attempts < t.MaxAttempts {
			active[t.Partition] = true
		}
		if m.at(t).State == engine.InFlight {
			inFlight[t.Partition]++
		}
	}
	if freed != nil {
		inFlight[freed.Partition]--
	}
	keys := make([]string, 0, len(active))
	for k := range active {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) == 0 {
		return nil
	}
	start := int(rotationStart(m.Seq) % uint64(len(keys)))
	keys = append(keys[start:], keys[:start]...)
	byPart := map[string][]*Rec{}
	for _, t := range ready { // serving order within each
		byPart[t.Partition] = append(byPart[t.Partition], t)
	}
	room := func(k string) int {
		r := int(min(int64(max), m.partTokens(q, k, m.Now)))
		if partMax == 0 {
			return r
		}
		return min(r, partMax-inFlight[k])
	}
	var out []*Rec
	type turn struct {
		key  string
		room int
		next int
	}
	var turns []turn
	for _, k := range keys {
		if len(out) == max {
			break
		}
		r := room(k)
		if r <= 0 || len(byPart[k]) == 0 {
			continue
		}
		out = append(out, byPart[k][0])
		if r > 1 {
			turns = append(turns, turn{k, r - 1, 1})
		}
	}
	for len(out) < max && len(turns) > 0 {
		var next []turn
		for _, t := range turns {
			if len(out) == max {
				break
			}
			if t.next >= len(byPart[t.key]) {
				continue
			}
			out = append(out, byPart[t.key][t.next])
			t.next++
			if t.room--; t.room > 0 {
				next = append(next, t)
			}
		}
		turns = next
	}
	return out
}
