package index

import "fmt"

// QueueConf is the durable record of one queue's settings: whether it is
// paused, its limits, and the state of its rate limiter's token bucket.
// It is a primary record of its own, kept whether or not the queue holds
// tasks (a queue's indexes exist only while it holds one, and its totals
// are forgotten a day after it drained; its settings are never forgotten).
// A queue has a record only while a setting differs from the default: a
// batch that restores every default deletes it.
//
// The token bucket holds up to Burst tokens and gains Rate tokens every
// Per microseconds; a claim takes one token per task it leases. Its level
// is kept exactly, in integers: Credit is in units of 1/Per token (so a
// token is Per units and the bucket gains Rate units a microsecond), as of
// the time At. Nothing writes the bucket as it refills: its level at a
// later time is computed (Refill), and a claim that takes tokens stores the
// level it leaves.
type QueueConf struct {
	Queue  QueueKey
	Paused bool
	// MaxInFlight bounds the queue's tasks in flight at once (an expired
	// lease is not in flight); 0 is no bound.
	MaxInFlight int64
	// PartMaxInFlight bounds the tasks in flight at once of each partition
	// of the queue (see Partition; the tasks that name no partition are
	// one partition); 0 is no bound.
	PartMaxInFlight int64
	// Rate tokens every Per microseconds, at most Burst held; Rate 0 is no
	// rate limit (Per, Burst, Credit and At are then 0).
	Rate, Per, Burst int64
	Credit, At       int64
	// PartRate tokens every PartPer microseconds, at most PartBurst held,
	// for each partition of the queue (bucket.go); PartRate 0 is none
	// (PartPer and PartBurst are then 0).
	PartRate, PartPer, PartBurst int64
}

// Limits on a QueueConf's fields, part of the state machine: a record
// outside them does not decode. They keep the bucket's arithmetic (at most
// MaxRateBurst tokens of MaxRatePer units) inside an int64.
const (
	MaxInFlightLimit = 1 << 31
	MaxRateTokens    = 1_000_000                 // Rate and Burst
	MaxRatePer       = 7 * 24 * 3600 * 1_000_000 // a week, in micros
)

// Settings returns c without its bucket level: what an operator set.
func (c QueueConf) Settings() QueueConf {
	c.Credit, c.At = 0, 0
	return c
}

// IsDefault reports whether c sets nothing: a queue with such settings has
// no record.
func (c QueueConf) IsDefault() bool {
	return !c.Paused && c.MaxInFlight == 0 && c.Rate == 0 && c.PartMaxInFlight == 0 && c.PartRate == 0
}

// capacity is the bucket's size in units.
func (c *QueueConf) capacity() int64 { return c.Burst * c.Per }

// Refill returns the bucket's level at now (in units, see QueueConf): the
// stored level plus what Rate added since At, at most the capacity.
func (c *QueueConf) Refill(now int64) int64 {
	cp := c.capacity()
	if now <= c.At || c.Credit >= cp {
		return min(c.Credit, cp)
	}
	elapsed := now - c.At
	// Past the time it takes to fill up, it is full; before it, elapsed *
	// Rate < capacity + Rate, which cannot overflow.
	if fill := (cp - c.Credit + c.Rate - 1) / c.Rate; elapsed >= fill {
		return cp
	}
	return c.Credit + elapsed*c.Rate
}

// Tokens returns how many whole tokens the bucket holds at now.
func (c *QueueConf) Tokens(now int64) int64 {
	if c.Rate == 0 {
		return 0
	}
	return c.Refill(now) / c.Per
}

// Take returns c with n tokens taken at now (n at most Tokens(now)).
func (c QueueConf) Take(now, n int64) QueueConf {
	c.Credit, c.At = c.Refill(now)-n*c.Per, now
	return c
}

// NextToken returns when the bucket next holds a whole token, at or after
// now.
func (c *QueueConf) NextToken(now int64) int64 {
	lvl := c.Refill(now)
	if lvl >= c.Per {
		return now
	}
	return now + (c.Per-lvl+c.Rate-1)/c.Rate
}

// check validates a record that came from a batch or a snapshot.
func (c *QueueConf) check() error {
	bad := c.Queue.Name == "" || c.IsDefault() || c.MaxInFlight < 0 || c.MaxInFlight > MaxInFlightLimit ||
		c.PartMaxInFlight < 0 || c.PartMaxInFlight > MaxInFlightLimit
	if c.Rate == 0 {
		bad = bad || c.Per != 0 || c.Burst != 0 || c.Credit != 0 || c.At != 0
	} else {
		bad = bad || c.Rate < 0 || c.Rate > MaxRateTokens || c.Burst < 1 || c.Burst > MaxRateTokens ||
			c.Per < 1 || c.Per > MaxRatePer || c.Credit < 0 || c.Credit > c.capacity()
	}
	if c.PartRate == 0 {
		bad = bad || c.PartPer != 0 || c.PartBurst != 0
	} else {
		bad = bad || c.PartRate < 0 || c.PartRate > MaxRateTokens || c.PartBurst < 1 || c.PartBurst > MaxRateTokens ||
			c.PartPer < 1 || c.PartPer > MaxRatePer
	}
	if bad {
		return fmt.Errorf("%w: settings of queue %v: %+v", ErrCorrupt, c.Queue, *c)
	}
	return nil
}

func confLess(a, b QueueConf) bool { return a.Queue.less(b.Queue) }

// Conf returns the settings record of queue k, if it has one.
func (s *Store) Conf(k QueueKey) (QueueConf, bool) {
	if s.confs.Len() == 0 {
		return QueueConf{}, false
	}
	return s.confs.Get(QueueConf{Queue: k})
}

// Confs calls fn for every settings record, in queue order, until fn
// returns false.
func (s *Store) Confs(fn func(QueueConf) bool) { s.confs.Scan(fn) }

// Reconfigured returns the queues whose settings (not only their bucket
// level) changed in the last Apply: claimers parked on them must look
// again. The slice is reused by the next Apply.
func (s *Store) Reconfigured() []QueueKey { return s.reconf }

// limited reports whether queue k bounds its tasks in flight (or those of
// each partition), so that a task leaving flight gives a parked claimer
// something to do.
func (s *Store) limited(k QueueKey) bool {
	c, ok := s.Conf(k)
	return ok && (c.MaxInFlight > 0 || c.PartMaxInFlight > 0)
}

func (s *Store) putConf(c QueueConf) error {
	if err := c.check(); err != nil {
		return err
	}
	old, ok := s.confs.Set(c)
	if !ok || old.Settings() != c.Settings() {
		s.reconf = append(s.reconf, c.Queue)
	}
	return nil
}

func (s *Store) deleteConf(k QueueKey) {
	if _, ok := s.confs.Delete(QueueConf{Queue: k}); ok {
		s.reconf = append(s.reconf, k)
	}
}

// LoadConf adds a settings record during a restore.
func (s *Store) LoadConf(c QueueConf) error {
	if err := c.check(); err != nil {
		return err
	}
	if _, dup := s.confs.Load(c); dup {
		return fmt.Errorf("%w: settings of queue %v twice", ErrCorrupt, c.Queue)
	}
	return nil
}

// InFlightAt returns how many tasks of q are in flight at now (a lease
// past its deadline is not), and the earliest deadline after now among
// them (0 when none).
func (q *Queue) InFlightAt(now int64) (int, int64) {
	n := q.counts[StateInFlight] - rank(q.InFlight, now)
	var next int64
	q.InFlight.Ascend(TimeItem{At: now + 1}, func(it TimeItem) bool {
		next = it.At
		return false
	})
	return n, next
}

// TotalsOf returns the totals of queue k, also while it holds no task
// (for IdleTotalsTTL after it last held one, while it is among the
// MaxIdleTotals queues idle least long).
func (s *Store) TotalsOf(k QueueKey) Totals {
	if q := s.queues[k]; q != nil {
		return q.totals
	}
	rec, _ := s.totals.Get(QueueTotals{Queue: k})
	return rec.Totals
}

// NumConfs is the number of queues with a settings record.
func (s *Store) NumConfs() int { return s.confs.Len() }
