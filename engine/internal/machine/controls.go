package machine

import (
	"slices"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/internal/index"
)

// The queue controls.
const (
	CmdSetPaused CmdOp = 14
	CmdSetLimits CmdOp = 15
)

func init() {
	register(CmdSetPaused, "set paused", Version2, func() Args { return new(SetPaused) })
	register(CmdSetLimits, "set limits", Version2, func() Args { return new(SetLimits) })
}

// SetPaused is Queue.Pause and Resume. Its arguments are [paused].
type SetPaused struct{ Paused bool }

func (*SetPaused) Op() CmdOp                          { return CmdSetPaused }
func (a *SetPaused) encode(e *cmdEncoder)             { e.bool(a.Paused) }
func (a *SetPaused) decode(d *cmdDecoder, _ *Command) { a.Paused = d.bool() }

func (a *SetPaused) plan(p *Planner, cmd *Command, _ *Result) error {
	qk := cmd.Key()
	old, _ := p.s.Store.Conf(qk)
	n := old
	n.Queue, n.Paused = qk, a.Paused
	p.putConf(old, n)
	return nil
}

// SetLimits is Queue.SetLimits. Its arguments are [maxInFlight rate per
// burst] (per in micros), then, from version 4 on, [partitionMaxInFlight
// partitionRate partitionPer partitionBurst] (partitionPer in micros),
// which a command of limits that neither bound nor rate-limit each
// partition leaves out (and is version 2).
type SetLimits struct{ Limits dockettype.Limits }

func (*SetLimits) Op() CmdOp { return CmdSetLimits }

func (a *SetLimits) version() uint64 {
	if a.Limits.PartitionMaxInFlight != 0 || a.Limits.PartitionRate != 0 {
		return Version
	}
	return Version2
}

func (a *SetLimits) encode(e *cmdEncoder) {
	l := &a.Limits
	e.int(int64(l.MaxInFlight))
	e.int(int64(l.Rate))
	e.int(l.Per.Microseconds())
	e.int(int64(l.Burst))
	if e.ver >= Version {
		e.int(int64(l.PartitionMaxInFlight))
		e.int(int64(l.PartitionRate))
		e.int(l.PartitionPer.Microseconds())
		e.int(int64(l.PartitionBurst))
	}
}

func (a *SetLimits) decode(d *cmdDecoder, _ *Command) {
	l := &a.Limits
	l.MaxInFlight, l.Rate = int(d.small()), int(d.small())
	l.Per, l.Burst = micros(d.int()), int(d.small())
	if d.ver >= Version {
		l.PartitionMaxInFlight, l.PartitionRate = int(d.small()), int(d.small())
		l.PartitionPer, l.PartitionBurst = micros(d.int()), int(d.small())
	}
	if d.err == nil {
		d.fail(validate.Limits(*l))
	}
}

func (a *SetLimits) plan(p *Planner, cmd *Command, _ *Result) error {
	qk := cmd.Key()
	old, _ := p.s.Store.Conf(qk)
	l := a.Limits
	n := index.QueueConf{Queue: qk, Paused: old.Paused, MaxInFlight: int64(l.MaxInFlight),
		PartMaxInFlight: int64(l.PartitionMaxInFlight)}
	if l.Rate > 0 {
		n.Rate, n.Per, n.Burst = int64(l.Rate), l.Per.Microseconds(), int64(l.Burst)
		if n.Burst == 0 {
			n.Burst = n.Rate
		}
		switch {
		case old.Rate == n.Rate && old.Per == n.Per && old.Burst == n.Burst:
			n.Credit, n.At = old.Credit, old.At // the same bucket
		case old.Rate > 0:
			n.Credit, n.At = min(old.Tokens(p.now), n.Burst)*n.Per, p.now
		default:
			n.Credit, n.At = n.Burst*n.Per, p.now
		}
	}
	if l.PartitionRate > 0 {
		n.PartRate, n.PartPer, n.PartBurst = int64(l.PartitionRate), l.PartitionPer.Microseconds(), int64(l.PartitionBurst)
		if n.PartBurst == 0 {
			n.PartBurst = n.PartRate
		}
	}
	p.putConf(old, n)
	if old.PartRate != n.PartRate || old.PartPer != n.PartPer || old.PartBurst != n.PartBurst {
		// The partitions' buckets start full: no record.
		p.s.Store.PartBuckets(qk, "", func(b index.PartBucket) bool {
			p.put(index.Mutation{Kind: index.MutDeleteBucket, Bucket: index.PartBucket{Queue: qk, Key: b.Key}})
			return true
		})
	}
	return nil
}

// putConf plans replacing a queue's settings record old (the zero value
// when it has none) by n: nothing when they are equal, a delete when n
// sets nothing.
func (p *Planner) putConf(old, n index.QueueConf) {
	switch {
	case n.IsDefault() && old.Queue.Name == "", n == old:
	case n.IsDefault():
		p.put(index.Mutation{Kind: index.MutDeleteConf, Conf: index.QueueConf{Queue: n.Queue}})
	default:
		p.put(index.Mutation{Kind: index.MutPutConf, Conf: n})
	}
}

// Allowed applies the queue's settings conf to a claim of up to max tasks
// at now, planned in a batch that has already taken freed of the queue's
// tasks out of flight (a completion's, whose slot of the in-flight bound
// the claim may take): how many it may lease, and, when that is none,
// when the settings may let a claim lease again (0: only a change of the
// settings, or of the queue, can). Call with mu held.
func (s *State) Allowed(qk index.QueueKey, conf *index.QueueConf, now int64, max, freed int) (int, int64) {
	if conf.Paused {
		return 0, 0 // Resume wakes parked claims
	}
	var at int64
	iq := s.Store.Queue(qk)
	bound := conf.MaxInFlight
	if conf.PartMaxInFlight > 0 && (iq == nil || !iq.Partitioned()) && (bound == 0 || conf.PartMaxInFlight < bound) {
		// One partition, the default one, holds every task: its bound is
		// the queue's. (A partitioned queue's claims apply it to each.)
		bound = conf.PartMaxInFlight
	}
	if bound > 0 {
		inFlight, nextEnd := 0, int64(0)
		if iq != nil {
			inFlight, nextEnd = iq.InFlightAt(now)
		}
		room := int(bound) - (inFlight - freed)
		if room <= 0 {
			// A completion or a failure wakes parked claims (the index
			// reports the queue affected); an expiring lease frees its
			// slot at its deadline.
			max, at = 0, nextEnd
		} else {
			max = min(max, room)
		}
	}
	if conf.PartRate > 0 && (iq == nil || !iq.Partitioned()) {
		// The default partition's bucket limits the queue's claims.
		tokens := s.Store.PartTokens(conf, "", now)
		if tokens == 0 {
			return 0, max64(at, s.Store.PartNextToken(conf, "", now))
		}
		max = int(min(int64(max), tokens))
	}
	if conf.Rate > 0 {
		tokens := conf.Tokens(now)
		if tokens == 0 {
			return 0, max64(at, conf.NextToken(now))
		}
		if tokens < int64(max) {
			max = int(tokens)
		}
	}
	return max, at
}

// claimWithin plans a claim of up to max tasks of queue qk within its
// settings, freed (0 for none) the id of a task of the queue the batch has
// already taken out of flight, as for allowed: it leases what they allow
// and takes the rate limit's tokens for them.
func (p *Planner) claimWithin(qk index.QueueKey, owner string, lease int64, max int, freed uint64) []dockettype.Lease {
	conf, controlled := p.s.Store.Conf(qk)
	var freedTask *index.Task
	if controlled {
		// Paused, or limited: fewer, or none (see allowed).
		nfreed := 0
		if freed != 0 {
			nfreed = 1
		}
		max, _ = p.s.Allowed(qk, &conf, p.now, max, nfreed)
		if freed != 0 && conf.PartMaxInFlight > 0 {
			freedTask, _ = p.s.Store.Task(freed) // fenced: in flight on this queue
		}
	}
	if max == 0 {
		return nil
	}
	ls := p.claim(qk, owner, lease, max, &conf, freedTask)
	if n := len(ls); n > 0 && conf.Rate > 0 {
		p.putConf(conf, conf.Take(p.now, int64(n)))
	}
	if len(ls) > 0 && conf.PartRate > 0 {
		p.takePartTokens(&conf, ls)
	}
	return ls
}

// sweepBuckets is how many of a queue's other partition bucket records a
// claim that takes partition tokens looks at, deleting those full again:
// the records of partitions that are gone are so deleted as claims go on.
const sweepBuckets = 8

// takePartTokens plans taking from each partition's bucket the tokens of
// its leases ls, and deleting up to sweepBuckets records of other
// partitions of the queue that are full again, from the key after the
// last partition served on (in key order, wrapping around).
func (p *Planner) takePartTokens(conf *index.QueueConf, ls []dockettype.Lease) {
	keys := p.keys[:0]
	for i := range ls {
		k := ls[i].Partition
		if slices.Contains(keys, k) {
			continue
		}
		keys = append(keys, k)
		n := 0
		for j := i; j < len(ls); j++ {
			if ls[j].Partition == k {
				n++
			}
		}
		p.put(p.s.Store.TakePart(conf, k, p.now, int64(n)))
	}
	seen := 0
	p.s.Store.PartBuckets(conf.Queue, keys[len(keys)-1], func(b index.PartBucket) bool {
		if slices.Contains(keys, b.Key) {
			return true
		}
		if p.s.Store.PartBucketFull(conf, b.Key, p.now) {
			p.put(index.Mutation{Kind: index.MutDeleteBucket, Bucket: index.PartBucket{Queue: conf.Queue, Key: b.Key}})
		}
		seen++
		return seen < sweepBuckets
	})
	clear(keys)
	p.keys = keys[:0]
}

// ClaimDue is when a claim of queue qk (whose indexes are iq, nil when it
// holds nothing) that leased nothing at now may lease something without
// another commit: when its settings allow a claim again if they allow none
// now (0: only a commit can, such as Resume), else the next timer or lease
// that comes due (0: none). Call with mu held.
func (s *State) ClaimDue(qk index.QueueKey, iq *index.Queue, now int64) int64 {
	if conf, ok := s.Store.Conf(qk); ok {
		if n, at := s.Allowed(qk, &conf, now, 1, 0); n == 0 {
			return at
		}
		if (conf.PartMaxInFlight > 0 || conf.PartRate > 0) && iq != nil && iq.Partitioned() {
			return s.PartsDue(iq, now, &conf)
		}
	}
	return NextDue(iq)
}

// Claimable returns how many tasks of queue qk (indexes iq) a claim may
// lease at now within the queue's settings, or any number of at least
// limit when there are that many. Call with mu held.
func (s *State) Claimable(qk index.QueueKey, iq *index.Queue, now int64, limit int) int {
	n := claimableUpTo(iq, now, limit)
	if n == 0 {
		return 0
	}
	if conf, ok := s.Store.Conf(qk); ok {
		allowed, _ := s.Allowed(qk, &conf, now, limit, 0)
		n = min(n, allowed)
		if n > 0 && (conf.PartMaxInFlight > 0 || conf.PartRate > 0) && iq.Partitioned() {
			n = min(n, s.PartsClaimable(iq, now, &conf, n))
		}
	}
	return n
}

// claimableUpTo returns how many tasks of iq are claimable at now, or any
// number of at least limit when there are that many.
func claimableUpTo(iq *index.Queue, now int64, limit int) int {
	if iq == nil {
		return 0
	}
	if n := iq.Ready.Len(); n >= limit {
		return n
	}
	return iq.CountsAt(now, 0)[index.StateReady]
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// NextDue is the earliest time a timer or a lease of iq comes due, or 0 if
// none.
func NextDue(iq *index.Queue) int64 {
	if iq == nil {
		return 0
	}
	var at int64
	if it, ok := iq.Scheduled.Min(); ok {
		at = it.At
	}
	if it, ok := iq.InFlight.Min(); ok && (at == 0 || it.At < at) {
		at = it.At
	}
	return at
}
