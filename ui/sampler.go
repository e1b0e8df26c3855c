package ui

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/docketdb/docket/engine"
)

// sampler keeps, per queue, a ring of sampled totals and waits so pages can
// show rates and an hour of history without the engine keeping any. Its
// cost is bounded: at most maxQueues rings of n points each (48 bytes a
// point). The history lives in memory only: a restarted dashboard starts
// empty.
type sampler struct {
	mu        sync.Mutex
	n         int // points per ring
	every     time.Duration
	maxQueues int
	last      time.Time // the last sample; zero before the first
	rings     map[qkey]*ring
	// gone keeps the last totals of queues no longer sampled, so a queue
	// that drains and fills again (the engine keeps its totals for a day)
	// does not count its old totals as a new burst.
	gone map[qkey]gonePoint
	// untracked is how many queues the last sample left out because
	// maxQueues rings were taken.
	untracked int
}

type qkey struct {
	ns   engine.Namespace
	name string
}

// point is one sample of a queue: its totals, and how long its oldest
// ready task had waited (-1 for none ready).
type point struct {
	at                                 int64 // unix nanoseconds
	enqueued, completed, retried, dead uint64
	oldest                             time.Duration
}

type gonePoint struct {
	p    point
	seen time.Time
}

// ring is a fixed-size circular buffer of points, oldest first.
type ring struct {
	buf   []point
	start int
	size  int
	seen  time.Time // the last sample that listed the queue
}

func (r *ring) push(p point) {
	if r.size < len(r.buf) {
		r.buf[(r.start+r.size)%len(r.buf)] = p
		r.size++
		return
	}
	r.buf[r.start] = p
	r.start = (r.start + 1) % len(r.buf)
}

func (r *ring) points() []point {
	out := make([]point, r.size)
	for i := range out {
		out[i] = r.buf[(r.start+i)%len(r.buf)]
	}
	return out
}

func (r *ring) lastPoint() point { return r.buf[(r.start+r.size-1)%len(r.buf)] }

// goneKeep is how long the totals of a queue no longer listed are kept:
// longer than the engine keeps them (24 h).
const goneKeep = 25 * time.Hour

func newSampler(n int, every time.Duration, maxQueues int) *sampler {
	return &sampler{n: n, every: every, maxQueues: maxQueues, rings: map[qkey]*ring{}, gone: map[qkey]gonePoint{}}
}

// history is how far back the rings reach.
func (s *sampler) history() time.Duration { return s.every * time.Duration(s.n) }

// due says whether a sample taken at now would be at least a period after
// the last one.
func (s *sampler) due(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last.IsZero() || now.Sub(s.last) >= s.every
}

func pointOf(now time.Time, q engine.QueueInfo) point {
	p := point{at: now.UnixNano(), enqueued: q.Totals.Enqueued, completed: q.Totals.Completed,
		retried: q.Totals.Retried, dead: q.Totals.DeadLettered, oldest: -1}
	if !q.OldestReady.IsZero() {
		p.oldest = max(0, now.Sub(q.OldestReady))
	}
	return p
}

// add records the totals of qs at now.
//
// A queue first seen after the dashboard's first sample was created (or
// refilled) since the last sample: its baseline is zero totals (or the
// totals it had when it was last seen) at the last sample, so the burst
// that created it counts in the interval that saw it. A queue seen at the
// first sample has no baseline: its rates start with the next sample.
//
// A queue no longer listed keeps its ring for the history's length, then
// its last totals for goneKeep. Past maxQueues rings, new queues are not
// tracked (the page says so) until a ring is freed.
func (s *sampler) add(now time.Time, qs []engine.QueueInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.last.IsZero() && now.Sub(s.last) < s.every/2 {
		return // a page view and the background loop met: one sample is enough
	}
	prev := s.last
	s.last = now
	s.untracked = 0
	// Free the rings of queues unlisted for the history's length first, so
	// a new queue can take the slot.
	hist := s.history()
	for k, r := range s.rings {
		if now.Sub(r.seen) > hist {
			if len(s.gone) < 4*s.maxQueues {
				s.gone[k] = gonePoint{r.lastPoint(), r.seen}
			}
			delete(s.rings, k)
		}
	}
	for k, g := range s.gone {
		if now.Sub(g.seen) > goneKeep {
			delete(s.gone, k)
		}
	}
	for _, q := range qs {
		k := qkey{q.Namespace, q.Name}
		r := s.rings[k]
		if r == nil {
			if len(s.rings) >= s.maxQueues {
				s.untracked++
				continue
			}
			r = &ring{buf: make([]point, s.n)}
			s.rings[k] = r
			if g, ok := s.gone[k]; ok {
				delete(s.gone, k)
				base := g.p
				base.oldest = -1
				if !prev.IsZero() {
					base.at = prev.UnixNano()
				}
				r.push(base)
			} else if !prev.IsZero() {
				r.push(point{at: prev.UnixNano(), oldest: -1})
			}
		}
		r.seen = now
		r.push(pointOf(now, q))
	}
}

// rates are the per-second rates of a queue over the recent window.
type rates struct {
	Window                            time.Duration
	Enqueued, Completed, Errors, Dead float64 // per second
	// ErrorShare is the percentage of finished attempts (completions and
	// failures) that failed over the window; -1 when none finished.
	ErrorShare float64
	Known      bool
}

func errorShare(completed, errors float64) float64 {
	if completed+errors == 0 {
		return -1
	}
	return errors * 100 / (completed + errors)
}

// recent is the window the rates of the tables are taken over.
const recent = 5 * time.Minute

// delta is b-a for a counter; one that went down means the DB was reopened
// and the interval counts as zero rather than negative.
func delta(a, b uint64) uint64 {
	if b < a {
		return 0
	}
	return b - a
}

func (s *sampler) points(k qkey) []point {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rings[k]
	if r == nil {
		return nil
	}
	return r.points()
}

// tracked reports whether the queue has a ring, and how many queues the
// last sample could not track.
func (s *sampler) tracked(ns engine.Namespace, name string) (bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rings[qkey{ns, name}] != nil, s.untracked
}

func (s *sampler) rates(ns engine.Namespace, name string) rates {
	ps := s.points(qkey{ns, name})
	if len(ps) < 2 {
		return rates{ErrorShare: -1}
	}
	last := ps[len(ps)-1]
	first := ps[0]
	for _, p := range ps {
		if time.Duration(last.at-p.at) <= recent {
			first = p
			break
		}
	}
	win := time.Duration(last.at - first.at)
	if win <= 0 {
		return rates{ErrorShare: -1}
	}
	sec := win.Seconds()
	out := rates{Window: win, Known: true,
		Enqueued:  float64(delta(first.enqueued, last.enqueued)) / sec,
		Completed: float64(delta(first.completed, last.completed)) / sec,
		Errors:    float64(delta(first.retried+first.dead, last.retried+last.dead)) / sec,
		Dead:      float64(delta(first.dead, last.dead)) / sec}
	out.ErrorShare = errorShare(out.Completed, out.Errors)
	return out
}

// series is a chart's data, in columns as uPlot takes them: T holds the
// end of each sample interval (unix seconds), the rates are per second
// over that interval, Oldest the oldest ready task's wait in seconds at its
// end (nil for none ready).
type series struct {
	T         []int64    `json:"t"`
	Enqueued  []float64  `json:"enqueued"`
	Completed []float64  `json:"completed"`
	Failed    []float64  `json:"failed"`
	Dead      []float64  `json:"dead"`
	Oldest    []*float64 `json:"oldest"`
	Every     float64    `json:"every"`   // seconds between samples
	History   float64    `json:"history"` // seconds the rings reach back
	Queues    int        `json:"queues"`  // queues summed
	Untracked int        `json:"untracked"`
}

// seriesOf sums the rings of keys, aligned on their sample times (every
// queue is sampled at the same instants), the wait being the longest.
func (s *sampler) seriesOf(keys []qkey) series {
	type acc struct {
		enq, done, failed, dead float64
		oldest                  time.Duration
		n                       int
	}
	byT := map[int64]*acc{}
	out := series{Every: s.every.Seconds(), History: s.history().Seconds()}
	for _, k := range keys {
		ps := s.points(k)
		if len(ps) > 0 {
			out.Queues++
		}
		for i := 1; i < len(ps); i++ {
			a, b := ps[i-1], ps[i]
			dt := time.Duration(b.at - a.at).Seconds()
			if dt <= 0 {
				continue
			}
			x := byT[b.at]
			if x == nil {
				x = &acc{oldest: -1}
				byT[b.at] = x
			}
			x.n++
			x.enq += float64(delta(a.enqueued, b.enqueued)) / dt
			x.done += float64(delta(a.completed, b.completed)) / dt
			x.failed += float64(delta(a.retried+a.dead, b.retried+b.dead)) / dt
			x.dead += float64(delta(a.dead, b.dead)) / dt
			x.oldest = max(x.oldest, b.oldest)
		}
	}
	ts := make([]int64, 0, len(byT))
	for t := range byT {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	// Columns of no samples are empty arrays in JSON, not null: the
	// dashboard's charts read their lengths.
	out.T, out.Oldest = make([]int64, 0, len(ts)), make([]*float64, 0, len(ts))
	out.Enqueued, out.Completed = make([]float64, 0, len(ts)), make([]float64, 0, len(ts))
	out.Failed, out.Dead = make([]float64, 0, len(ts)), make([]float64, 0, len(ts))
	for _, t := range ts {
		x := byT[t]
		out.T = append(out.T, t/int64(time.Second))
		out.Enqueued = append(out.Enqueued, round3(x.enq))
		out.Completed = append(out.Completed, round3(x.done))
		out.Failed = append(out.Failed, round3(x.failed))
		out.Dead = append(out.Dead, round3(x.dead))
		var o *float64
		if x.oldest >= 0 {
			v := round3(x.oldest.Seconds())
			o = &v
		}
		out.Oldest = append(out.Oldest, o)
	}
	s.mu.Lock()
	out.Untracked = s.untracked
	s.mu.Unlock()
	return out
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
