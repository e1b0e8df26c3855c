package ui

import (
	"sync"
	"time"

	"github.com/docketdb/docket/engine"
)

// sampler keeps, per queue, a ring of recent totals so pages can show rates
// without the engine keeping history.
type sampler struct {
	mu    sync.Mutex
	n     int
	every time.Duration
	last  time.Time
	rings map[qkey][]sample
}

type qkey struct {
	ns   engine.Namespace
	name string
}

type sample struct {
	at time.Time
	t  engine.Totals
}

func newSampler(n int, every time.Duration) *sampler {
	return &sampler{n: n, every: every, rings: map[qkey][]sample{}}
}

// due says whether a sample taken at now would be at least a period after
// the last one.
func (s *sampler) due(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last.IsZero() || now.Sub(s.last) >= s.every
}

// add records the totals of qs at now. Queues no longer listed keep their
// history until it ages out of the ring of the queues still sampled.
func (s *sampler) add(now time.Time, qs []engine.QueueInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.last.IsZero() && now.Sub(s.last) < s.every/2 {
		return // a page view and the background loop met: one sample is enough
	}
	s.last = now
	seen := make(map[qkey]bool, len(qs))
	for _, q := range qs {
		k := qkey{q.Namespace, q.Name}
		seen[k] = true
		r := append(s.rings[k], sample{now, q.Totals})
		if len(r) > s.n {
			r = append(r[:0], r[len(r)-s.n:]...)
		}
		s.rings[k] = r
	}
	for k := range s.rings {
		if !seen[k] {
			delete(s.rings, k)
		}
	}
}

// rates are per-minute rates of a queue over the sampled window, and the
// completions per sample interval for a sparkline.
type rates struct {
	Window                      time.Duration
	Enqueued, Completed, Errors float64 // per minute
	Spark                       []float64
	Known                       bool
}

func (s *sampler) rates(ns engine.Namespace, name string) rates {
	s.mu.Lock()
	r := s.rings[qkey{ns, name}]
	r = append([]sample(nil), r...)
	s.mu.Unlock()
	if len(r) < 2 {
		return rates{}
	}
	first, last := r[0], r[len(r)-1]
	win := last.at.Sub(first.at)
	if win <= 0 {
		return rates{}
	}
	per := func(a, b uint64) float64 {
		if b < a { // the DB was reopened: counters restarted
			return 0
		}
		return float64(b-a) / win.Minutes()
	}
	out := rates{Window: win, Known: true,
		Enqueued:  per(first.t.Enqueued, last.t.Enqueued),
		Completed: per(first.t.Completed, last.t.Completed),
		Errors:    per(first.t.Retried+first.t.DeadLettered, last.t.Retried+last.t.DeadLettered)}
	for i := 1; i < len(r); i++ {
		d := float64(0)
		if r[i].t.Completed >= r[i-1].t.Completed {
			d = float64(r[i].t.Completed - r[i-1].t.Completed)
		}
		out.Spark = append(out.Spark, d)
	}
	return out
}
