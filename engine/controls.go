package engine

import (
	"context"
	"slices"
	"time"

	"github.com/docketdb/docket/internal/index"
)

// Queue controls: pause and resume, a bound on the tasks in flight and a
// rate limit, per queue, enforced where claims are planned so that they
// hold across every claimer of every process. A queue's settings are a
// record of their own in the log and snapshots (index.QueueConf), kept
// whether or not the queue holds tasks, and every decision about them
// reads the state and the batch's time only, so a replicated log plans
// the same claims on every node.

// QueueSettings are a queue's controls, as Settings reports them.
type QueueSettings struct {
	// Paused is set by Pause and cleared by Resume. A paused queue takes
	// enqueues and every other call, but its claims lease nothing:
	// ClaimWait waits until it is resumed.
	Paused bool
	Limits Limits
}

// Bounds of Limits. A bucket holds at most MaxRateTokens tokens of
// MaxRatePer each, so its level is exact in 64-bit integers.
const (
	MaxInFlightLimit = index.MaxInFlightLimit
	MaxRateTokens    = index.MaxRateTokens
	MaxRatePer       = time.Duration(index.MaxRatePer) * time.Microsecond
)

func checkLimits(l Limits) error {
	switch {
	case l.MaxInFlight < 0 || l.MaxInFlight > MaxInFlightLimit:
		return invalid("max in flight %d is outside 0..%d", l.MaxInFlight, MaxInFlightLimit)
	case l.PartitionMaxInFlight < 0 || l.PartitionMaxInFlight > MaxInFlightLimit:
		return invalid("partition max in flight %d is outside 0..%d", l.PartitionMaxInFlight, MaxInFlightLimit)
	}
	if err := checkRate(l.Rate, l.Per, l.Burst, ""); err != nil {
		return err
	}
	return checkRate(l.PartitionRate, l.PartitionPer, l.PartitionBurst, "partition ")
}

// checkRate checks a token bucket's limit, its errors naming it with the
// prefix of ("" for the queue's, "partition " for each partition's).
func checkRate(rate int, per time.Duration, burst int, of string) error {
	switch {
	case rate < 0 || rate > MaxRateTokens:
		return invalid("%srate %d is outside 0..%d", of, rate, MaxRateTokens)
	case rate == 0 && (per != 0 || burst != 0):
		return invalid("a %sper (%v) or %sburst (%d) without a %srate", of, per, of, burst, of)
	case rate > 0 && (per < time.Microsecond || per > MaxRatePer):
		return invalid("%srate per %v is outside 1µs..%v", of, per, MaxRatePer)
	case burst < 0 || burst > MaxRateTokens:
		return invalid("%sburst %d is outside 0..%d", of, burst, MaxRateTokens)
	}
	return nil
}

// settingsOf is what a queue's record says to a caller.
func settingsOf(c index.QueueConf) QueueSettings {
	return QueueSettings{Paused: c.Paused, Limits: Limits{MaxInFlight: int(c.MaxInFlight), Rate: int(c.Rate),
		Per: micros(c.Per), Burst: int(c.Burst), PartitionMaxInFlight: int(c.PartMaxInFlight),
		PartitionRate: int(c.PartRate), PartitionPer: micros(c.PartPer), PartitionBurst: int(c.PartBurst)}}
}

// Pause stops the queue's claims: Claim leases nothing and ClaimWait
// waits, until Resume. Enqueues, completions, failures, heartbeats and
// every other call go on as usual, and leases already held stay valid.
// It is durable (it survives restarts, and the queue keeps it while it
// holds no task) and needs PermAdmin. Pausing a paused queue does nothing.
func (q *queue) Pause(ctx context.Context) error { return q.setPaused(ctx, true) }

// Resume ends a pause: ClaimWait calls parked on the queue wake at once.
// Resuming a queue that is not paused does nothing. PermAdmin.
func (q *queue) Resume(ctx context.Context) error { return q.setPaused(ctx, false) }

func (q *queue) setPaused(ctx context.Context, paused bool) error {
	if err := q.check(PermAdmin); err != nil {
		return err
	}
	cmd := command{op: cmdSetPaused, ns: q.ns, queue: q.name, paused: paused}
	var res cmdResult
	return q.db.c.exec(ctx, &cmd, &res)
}

// SetLimits replaces the queue's limits, leaving its pause state as it
// is; the zero Limits removes them. They apply from the next claim on.
// When a rate limit replaces another, the tokens its bucket holds carry
// over (at most the new burst); a new rate limit starts with a full
// bucket. A change of the partition rate limit starts every partition
// with a full bucket. PermAdmin.
func (q *queue) SetLimits(ctx context.Context, l Limits) error {
	if err := checkLimits(l); err != nil {
		return err
	}
	if err := q.check(PermAdmin); err != nil {
		return err
	}
	cmd := command{op: cmdSetLimits, ns: q.ns, queue: q.name, limits: l}
	var res cmdResult
	return q.db.c.exec(ctx, &cmd, &res)
}

// Settings returns the queue's pause state and limits. PermRead.
func (q *queue) Settings(ctx context.Context) (QueueSettings, error) {
	if err := q.check(PermRead); err != nil {
		return QueueSettings{}, err
	}
	var s QueueSettings
	qk := q.key()
	c := q.db.c
	err := c.read(ctx, func() {
		conf, _ := c.store.Conf(qk)
		s = settingsOf(conf)
	})
	return s, err
}

func planSetPaused(p *planner, cmd *command) error {
	qk := cmd.key()
	old, _ := p.c.store.Conf(qk)
	n := old
	n.Queue, n.Paused = qk, cmd.paused
	p.putConf(old, n)
	return nil
}

func planSetLimits(p *planner, cmd *command) error {
	qk := cmd.key()
	old, _ := p.c.store.Conf(qk)
	l := cmd.limits
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
		p.c.store.PartBuckets(qk, "", func(b index.PartBucket) bool {
			p.put(index.Mutation{Kind: index.MutDeleteBucket, Bucket: index.PartBucket{Queue: qk, Key: b.Key}})
			return true
		})
	}
	return nil
}

// putConf plans replacing a queue's settings record old (the zero value
// when it has none) by n: nothing when they are equal, a delete when n
// sets nothing.
func (p *planner) putConf(old, n index.QueueConf) {
	switch {
	case n.IsDefault() && old.Queue.Name == "", n == old:
	case n.IsDefault():
		p.put(index.Mutation{Kind: index.MutDeleteConf, Conf: index.QueueConf{Queue: n.Queue}})
	default:
		p.put(index.Mutation{Kind: index.MutPutConf, Conf: n})
	}
}

// allowed applies the queue's settings conf to a claim of up to max tasks
// at now, planned in a batch that has already taken freed of the queue's
// tasks out of flight (a completion's, whose slot of the in-flight bound
// the claim may take): how many it may lease, and, when that is none,
// when the settings may let a claim lease again (0: only a change of the
// settings, or of the queue, can). Call with mu held.
func (c *core) allowed(qk index.QueueKey, conf *index.QueueConf, now int64, max, freed int) (int, int64) {
	if conf.Paused {
		return 0, 0 // Resume wakes parked claims
	}
	var at int64
	iq := c.store.Queue(qk)
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
		tokens := c.store.PartTokens(conf, "", now)
		if tokens == 0 {
			return 0, max64(at, c.store.PartNextToken(conf, "", now))
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
func (p *planner) claimWithin(qk index.QueueKey, owner string, lease int64, max int, freed uint64) []Lease {
	conf, controlled := p.c.store.Conf(qk)
	var freedTask *index.Task
	if controlled {
		// Paused, or limited: fewer, or none (see allowed).
		nfreed := 0
		if freed != 0 {
			nfreed = 1
		}
		max, _ = p.c.allowed(qk, &conf, p.now, max, nfreed)
		if freed != 0 && conf.PartMaxInFlight > 0 {
			freedTask, _ = p.c.store.Task(freed) // fenced: in flight on this queue
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
func (p *planner) takePartTokens(conf *index.QueueConf, ls []Lease) {
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
		p.put(p.c.store.TakePart(conf, k, p.now, int64(n)))
	}
	seen := 0
	p.c.store.PartBuckets(conf.Queue, keys[len(keys)-1], func(b index.PartBucket) bool {
		if slices.Contains(keys, b.Key) {
			return true
		}
		if p.c.store.PartBucketFull(conf, b.Key, p.now) {
			p.put(index.Mutation{Kind: index.MutDeleteBucket, Bucket: index.PartBucket{Queue: conf.Queue, Key: b.Key}})
		}
		seen++
		return seen < sweepBuckets
	})
	clear(keys)
	p.keys = keys[:0]
}

// claimDue is when a claim of queue qk (whose indexes are iq, nil when it
// holds nothing) that leased nothing at now may lease something without
// another commit: when its settings allow a claim again if they allow none
// now (0: only a commit can, such as Resume), else the next timer or lease
// that comes due (0: none). Call with mu held.
func (c *core) claimDue(qk index.QueueKey, iq *index.Queue, now int64) int64 {
	if conf, ok := c.store.Conf(qk); ok {
		if n, at := c.allowed(qk, &conf, now, 1, 0); n == 0 {
			return at
		}
		if (conf.PartMaxInFlight > 0 || conf.PartRate > 0) && iq != nil && iq.Partitioned() {
			return c.partsDue(iq, now, &conf)
		}
	}
	return nextDue(iq)
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// setSettings fills in what a queue's settings show in Queues.
func (info *QueueInfo) setSettings(c index.QueueConf) {
	s := settingsOf(c)
	info.Paused, info.Limits = s.Paused, s.Limits
}

// withSettings adds to out (QueueInfo of the queues holding tasks) the
// settings of those queues and an entry for each queue with settings and
// no task, of the namespaces readable lists (every one when nil). Call
// with mu held.
func (c *core) withSettings(out []QueueInfo, readable []index.Namespace) []QueueInfo {
	if c.store.NumConfs() == 0 {
		return out
	}
	at := make(map[index.QueueKey]int, len(out))
	for i := range out {
		at[index.QueueKey{Namespace: idxNS(out[i].Namespace), Name: out[i].Name}] = i
	}
	add := func(conf index.QueueConf) bool {
		k := conf.Queue
		if i, ok := at[k]; ok {
			out[i].setSettings(conf)
			return true
		}
		tot := c.store.TotalsOf(k)
		info := QueueInfo{Namespace: Namespace{Project: k.Project, Scope: k.Scope}, Name: k.Name, Totals: totalsOf(tot)}
		info.setSettings(conf)
		out = append(out, info)
		return true
	}
	if readable == nil {
		c.store.Confs(add)
	}
	for _, ns := range readable {
		c.store.ConfsIn(ns, add)
	}
	return out
}

func totalsOf(t index.Totals) Totals {
	return Totals{Enqueued: t.Enqueued, Claimed: t.Claimed, Completed: t.Completed, Retried: t.Retried,
		DeadLettered: t.DeadLettered}
}
