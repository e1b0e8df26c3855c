package index

import "fmt"

// Per-partition rate limits. A queue whose settings set PartRate gives
// each of its partitions (the default one, "", included) a token bucket
// of its own, of PartBurst tokens gaining PartRate every PartPer
// microseconds, kept as the queue's bucket is (QueueConf): exactly, in
// units of 1/PartPer token, as of a time. A partition's bucket is a
// primary record, PartBucket, stored only while it is not full: a bucket
// with no record is full. A claim that takes tokens from a partition
// stores the level it leaves; the records a claim finds full again are
// deleted, so that partitions that come and go leave nothing behind.

// PartBucket is the level of one partition's token bucket: Credit units
// as of At (see QueueConf), below the bucket's capacity.
type PartBucket struct {
	Queue  QueueKey
	Key    string
	Credit int64
	At     int64
}

func bucketLess(a, b PartBucket) bool {
	if a.Queue != b.Queue {
		return a.Queue.less(b.Queue)
	}
	return a.Key < b.Key
}

// partBucket is c's partition bucket as a QueueConf's queue bucket, to
// reuse its arithmetic: level Credit as of At.
func (c *QueueConf) partBucket(credit, at int64) QueueConf {
	return QueueConf{Rate: c.PartRate, Per: c.PartPer, Burst: c.PartBurst, Credit: credit, At: at}
}

// full returns the bucket of a partition that has no record.
func (c *QueueConf) fullBucket() QueueConf {
	return c.partBucket(c.PartBurst*c.PartPer, 0)
}

// PartTokens returns how many whole tokens the bucket of partition key of
// queue conf c holds at now (any number when c sets no partition rate).
func (s *Store) PartTokens(c *QueueConf, key string, now int64) int64 {
	if c.PartRate == 0 {
		return MaxRateTokens
	}
	b := s.partBucketOf(c, key)
	return b.Tokens(now)
}

// PartNextToken returns when the bucket of partition key of queue conf c
// next holds a whole token, at or after now (c must set a partition rate).
func (s *Store) PartNextToken(c *QueueConf, key string, now int64) int64 {
	b := s.partBucketOf(c, key)
	return b.NextToken(now)
}

func (s *Store) partBucketOf(c *QueueConf, key string) QueueConf {
	if s.buckets.Len() > 0 {
		if r, ok := s.buckets.Get(PartBucket{Queue: c.Queue, Key: key}); ok {
			return c.partBucket(r.Credit, r.At)
		}
	}
	return c.fullBucket()
}

// TakePart returns the mutation that takes n tokens (at most PartTokens)
// at now from the bucket of partition key of queue conf c.
func (s *Store) TakePart(c *QueueConf, key string, now, n int64) Mutation {
	b := s.partBucketOf(c, key)
	b = b.Take(now, n)
	return Mutation{Kind: MutPutBucket, Bucket: PartBucket{Queue: c.Queue, Key: key, Credit: b.Credit, At: b.At}}
}

// PartBucketFull reports whether partition key of queue conf c has a
// bucket record that is full at now, one a batch may delete.
func (s *Store) PartBucketFull(c *QueueConf, key string, now int64) bool {
	if s.buckets.Len() == 0 {
		return false
	}
	r, ok := s.buckets.Get(PartBucket{Queue: c.Queue, Key: key})
	if !ok {
		return false
	}
	b := c.partBucket(r.Credit, r.At)
	return b.Refill(now) >= b.capacity()
}

// PartBuckets calls fn for the partition bucket records of queue k in key
// order, from the first key after from (the first when from is ""; after
// the last it wraps around to the first), until fn returns false or every
// record was seen once.
func (s *Store) PartBuckets(k QueueKey, from string, fn func(PartBucket) bool) {
	if s.buckets.Len() == 0 {
		return
	}
	stop := false
	s.buckets.Ascend(PartBucket{Queue: k, Key: from}, func(b PartBucket) bool {
		if b.Queue != k {
			return false
		}
		if from != "" && b.Key == from {
			return true
		}
		stop = !fn(b)
		return !stop
	})
	if stop || from == "" {
		return
	}
	s.buckets.Ascend(PartBucket{Queue: k}, func(b PartBucket) bool {
		return b.Queue == k && b.Key <= from && fn(b)
	})
}

// NumPartBuckets is the number of partition bucket records.
func (s *Store) NumPartBuckets() int { return s.buckets.Len() }

// checkBucket validates a bucket record against its queue's settings.
func (s *Store) checkBucket(b PartBucket) error {
	c, ok := s.Conf(b.Queue)
	if !ok || c.PartRate == 0 || b.Credit < 0 || b.Credit >= c.PartBurst*c.PartPer || b.At < 0 {
		return fmt.Errorf("%w: bucket of partition %q of queue %v: %+v", ErrCorrupt, b.Key, b.Queue, b)
	}
	return nil
}

func (s *Store) putBucket(b PartBucket) error {
	if err := s.checkBucket(b); err != nil {
		return err
	}
	s.buckets.Set(b)
	return nil
}

func (s *Store) deleteBucket(b PartBucket) {
	s.buckets.Delete(PartBucket{Queue: b.Queue, Key: b.Key})
}

// LoadBucket adds a partition bucket record during a restore (after the
// settings records).
func (s *Store) LoadBucket(b PartBucket) error {
	if err := s.checkBucket(b); err != nil {
		return err
	}
	if _, dup := s.buckets.Load(b); dup {
		return fmt.Errorf("%w: bucket of partition %q of queue %v twice", ErrCorrupt, b.Key, b.Queue)
	}
	return nil
}

// verifyBuckets checks every bucket record against its queue's settings.
func (s *Store) verifyBuckets() error {
	var err error
	s.buckets.Scan(func(b PartBucket) bool {
		err = s.checkBucket(b)
		return err == nil
	})
	if err != nil {
		return fmt.Errorf("index: verify: %w", err)
	}
	return nil
}
