package fuzz

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"time"

	"github.com/docketdb/docket/engine"
)

// The model of the queue controls (pause, an in-flight bound, a token
// bucket) and of unique-by-content keys, written out once more, plainly:
// the bucket's level with big integers where the engine avoids overflow
// with a bound, the canonical payload through encoding/json.

// qConf is a queue's settings in the model: never the default (a queue
// whose settings are all back to the default has none).
type qConf struct {
	Paused      bool
	MaxInFlight int
	// PartMax bounds each partition's tasks in flight (model_partitions.go).
	PartMax     int
	Rate, Burst int64
	Per         int64 // micros
	// The bucket: Credit units (a token is Per units) as of At.
	Credit, At int64
	// Each partition's bucket: PartRate tokens every PartPer micros, at
	// most PartBurst (Model.parts holds their levels).
	PartRate, PartPer, PartBurst int64
}

func (c qConf) isDefault() bool {
	return !c.Paused && c.MaxInFlight == 0 && c.Rate == 0 && c.PartMax == 0 && c.PartRate == 0
}

func (c qConf) settings() engine.QueueSettings {
	return engine.QueueSettings{Paused: c.Paused, Limits: engine.Limits{MaxInFlight: c.MaxInFlight, Rate: int(c.Rate),
		Per: time.Duration(c.Per) * time.Microsecond, Burst: int(c.Burst), PartitionMaxInFlight: c.PartMax,
		PartitionRate: int(c.PartRate), PartitionPer: time.Duration(c.PartPer) * time.Microsecond, PartitionBurst: int(c.PartBurst)}}
}

// partKey names a partition of a queue; partLevel is its bucket's level,
// Credit units as of At.
type partKey struct {
	q   QueueKey
	key string
}

type partLevel struct{ Credit, At int64 }

// partBucket is partition key's bucket of q as a qConf's queue bucket.
func (m *Model) partBucket(q QueueKey, key string) qConf {
	c := m.confs[q]
	b := qConf{Rate: c.PartRate, Per: c.PartPer, Burst: c.PartBurst, Credit: c.PartBurst * c.PartPer}
	if l, ok := m.parts[partKey{q, key}]; ok {
		b.Credit, b.At = l.Credit, l.At
	}
	return b
}

// partTokens is how many tokens partition key of q may take now (any
// number without a partition rate).
func (m *Model) partTokens(q QueueKey, key string, now int64) int64 {
	if m.confs[q].PartRate == 0 {
		return engine.MaxRateTokens
	}
	return m.partBucket(q, key).tokens(now)
}

// level is the bucket's level at now, in units: what it held plus Rate a
// microsecond since At, at most Burst tokens.
func (c qConf) level(now int64) int64 {
	lvl := big.NewInt(now - c.At)
	if now < c.At {
		lvl.SetInt64(0)
	}
	lvl.Mul(lvl, big.NewInt(c.Rate))
	lvl.Add(lvl, big.NewInt(c.Credit))
	if full := new(big.Int).Mul(big.NewInt(c.Burst), big.NewInt(c.Per)); lvl.Cmp(full) > 0 {
		return full.Int64()
	}
	return lvl.Int64()
}

func (c qConf) tokens(now int64) int64 { return c.level(now) / c.Per }

// setConf plans storing c as q's settings (deleting them when c is the
// default); nothing when they do not change.
func (x *txn) setConf(q QueueKey, c qConf) {
	m := x.m
	old, had := m.confs[q]
	switch {
	case c.isDefault() && !had, had && old == c:
	case c.isDefault():
		x.mut(func(uint64) { delete(m.confs, q) })
	default:
		x.mut(func(uint64) { m.confs[q] = c })
	}
}

// Pause is Queue.Pause.
func (m *Model) Pause(q QueueKey) error { return m.setPaused(q, true) }

// Resume is Queue.Resume.
func (m *Model) Resume(q QueueKey) error { return m.setPaused(q, false) }

func (m *Model) setPaused(q QueueKey, paused bool) error {
	if err := checkQueue(q); err != nil {
		return err
	}
	x := m.begin()
	c := m.confs[q]
	c.Paused = paused
	x.setConf(q, c)
	x.commit()
	return nil
}

// SetLimits is Queue.SetLimits.
func (m *Model) SetLimits(q QueueKey, l engine.Limits) error {
	switch {
	case l.MaxInFlight < 0 || l.MaxInFlight > engine.MaxInFlightLimit, l.Rate < 0 || l.Rate > engine.MaxRateTokens,
		l.Burst < 0 || l.Burst > engine.MaxRateTokens, l.Rate == 0 && (l.Per != 0 || l.Burst != 0),
		l.Rate > 0 && (l.Per < time.Microsecond || l.Per > engine.MaxRatePer),
		l.PartitionMaxInFlight < 0 || l.PartitionMaxInFlight > engine.MaxInFlightLimit,
		l.PartitionRate < 0 || l.PartitionRate > engine.MaxRateTokens,
		l.PartitionBurst < 0 || l.PartitionBurst > engine.MaxRateTokens,
		l.PartitionRate == 0 && (l.PartitionPer != 0 || l.PartitionBurst != 0),
		l.PartitionRate > 0 && (l.PartitionPer < time.Microsecond || l.PartitionPer > engine.MaxRatePer):
		return invalid("limits %+v", l)
	}
	if err := checkQueue(q); err != nil {
		return err
	}
	x := m.begin()
	old := m.confs[q]
	c := qConf{Paused: old.Paused, MaxInFlight: l.MaxInFlight, PartMax: l.PartitionMaxInFlight}
	if l.Rate > 0 {
		c.Rate, c.Per, c.Burst = int64(l.Rate), l.Per.Microseconds(), int64(l.Burst)
		if c.Burst == 0 {
			c.Burst = c.Rate
		}
		switch {
		case old.Rate == c.Rate && old.Per == c.Per && old.Burst == c.Burst:
			c.Credit, c.At = old.Credit, old.At
		case old.Rate > 0:
			c.Credit, c.At = min(old.tokens(x.now), c.Burst)*c.Per, x.now
		default:
			c.Credit, c.At = c.Burst*c.Per, x.now
		}
	}
	if l.PartitionRate > 0 {
		c.PartRate, c.PartPer, c.PartBurst = int64(l.PartitionRate), l.PartitionPer.Microseconds(), int64(l.PartitionBurst)
		if c.PartBurst == 0 {
			c.PartBurst = c.PartRate
		}
	}
	x.setConf(q, c)
	if c.PartRate != old.PartRate || c.PartPer != old.PartPer || c.PartBurst != old.PartBurst {
		x.mut(func(uint64) { // every partition starts with a full bucket
			for k := range m.parts {
				if k.q == q {
					delete(m.parts, k)
				}
			}
		})
	}
	x.commit()
	return nil
}

// Settings is Queue.Settings.
func (m *Model) Settings(q QueueKey) (engine.QueueSettings, error) {
	if err := checkQueue(q); err != nil {
		return engine.QueueSettings{}, err
	}
	return m.confs[q].settings(), nil
}

// allowed is what q's settings let a claim of up to max lease now, freed
// of q's tasks in flight having been completed in the claim's commit:
// false when nothing (paused, at its bound, or no token).
func (m *Model) allowed(q QueueKey, max, freed int) (int, bool) {
	c, ok := m.confs[q]
	if !ok {
		return max, true
	}
	if c.Paused {
		return 0, false
	}
	bound := c.MaxInFlight
	if c.PartMax > 0 && !m.partitioned(q) && (bound == 0 || c.PartMax < bound) {
		bound = c.PartMax // one partition holds every task
	}
	if bound > 0 {
		n := 0
		for _, t := range m.tasks {
			if t.Queue == q && m.at(t).State == engine.InFlight {
				n++
			}
		}
		n -= freed
		if n >= bound {
			return 0, false
		}
		max = min(max, bound-n)
	}
	if c.PartRate > 0 && !m.partitioned(q) {
		// One partition, the default one, holds every task.
		tk := m.partTokens(q, "", m.Now)
		if tk == 0 {
			return 0, false
		}
		max = int(min(int64(max), tk))
	}
	if c.Rate > 0 {
		tk := c.tokens(m.Now)
		if tk == 0 {
			return 0, false
		}
		max = int(min(int64(max), tk))
	}
	return max, true
}

// took plans the tokens a claim that leased ls of q takes, from the
// queue's bucket and from each partition's.
func (x *txn) took(q QueueKey, ls []engine.Lease) {
	c, ok := x.m.confs[q]
	if !ok || len(ls) == 0 {
		return
	}
	if c.PartRate > 0 {
		n := map[string]int64{}
		for _, l := range ls {
			n[l.Partition]++
		}
		m, now := x.m, x.now
		for k, n := range n {
			b := m.partBucket(q, k)
			lvl := partLevel{b.level(now) - n*b.Per, now}
			x.mut(func(uint64) { m.parts[partKey{q, k}] = lvl })
		}
	}
	if c.Rate == 0 {
		return
	}
	c.Credit, c.At = c.level(x.now)-int64(len(ls))*c.Per, x.now
	x.setConf(q, c)
}

// Unique keys.

const (
	uniqueRequired = 1<<engine.Ready | 1<<engine.Scheduled | 1<<engine.InFlight
	uniqueDefault  = uniqueRequired | 1<<engine.Completed
)

func checkUnique(t engine.Task, s *spec) error {
	u := t.Unique
	if t.IdempotencyKey != "" {
		return invalid("unique and a key")
	}
	if u.Window < time.Microsecond || u.Window > engine.MaxDuration {
		return invalid("unique window %v", u.Window)
	}
	if len(u.States) > 6 {
		return invalid("unique states %v", u.States)
	}
	mask := uint8(uniqueDefault)
	if len(u.States) > 0 {
		mask = 0
		for _, st := range u.States {
			if st < engine.Ready || st > engine.Waiting {
				return invalid("unique state %d", st)
			}
			if st != engine.Waiting { // a waiting task blocks whatever the states
				mask |= 1 << st
			}
		}
		if mask&uniqueRequired != uniqueRequired {
			return invalid("unique states %#x", mask)
		}
	}
	key, err := uniqueKey(t.Kind, t.Payload)
	if err != nil {
		return err
	}
	s.key, s.uniq, s.window = key, mask, u.Window.Microseconds()
	return nil
}

// uniqueKey derives the key of engine.Unique: the SHA-256 of the kind, a
// NUL and the canonical payload. The canonical form here is encoding/json's
// (objects as maps, so members sorted and duplicates merged; no HTML
// escaping): the engine's for every payload without duplicate keys,
// control characters, invalid UTF-8 or U+2028/U+2029, which is every
// payload a program builds.
func uniqueKey(kind string, payload []byte) (string, error) {
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	if len(payload) > 0 {
		dec := json.NewDecoder(bytes.NewReader(payload))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return "", invalid("payload %q", payload)
		}
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return "", invalid("payload %q", payload)
		}
		h.Write(bytes.TrimSuffix(out.Bytes(), []byte("\n")))
	}
	return engine.UniquePrefix + hex.EncodeToString(h.Sum(nil)), nil
}

// blocks reports whether the idempotency entry e deduplicates a new task:
// a caller's key always; a unique key while its task is waiting or in one
// of its states (a task gone completed: its entry would be gone otherwise).
func (m *Model) blocks(e idemVal) bool {
	if e.States == 0 {
		return true
	}
	t, ok := m.tasks[e.ID]
	if !ok {
		return true
	}
	st := engine.Completed // a retained completion past its retention is still one
	if a := m.at(t); a != nil {
		st = a.State
	}
	return st == engine.Waiting || e.States&(1<<st) != 0 // a waiting task always blocks
}
