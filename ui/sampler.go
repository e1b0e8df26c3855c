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
// enqueues, completions and errors of each sample interval for sparklines.
type rates struct {
	Window                      time.Duration
	Enqueued, Completed, Errors float64 // per minute
	// ErrorShare is the percentage of finished attempts (completions and
	// errors) that failed over the window; -1 when none finished.
	ErrorShare float64
	// Spark is the completions of each interval, SparkIn the enqueues and
	// SparkErr the failed attempts.
	Spark, SparkIn, SparkErr []float64
	Known                    bool
}

func errorShare(completed, errors float64) float64 {
	if completed+errors == 0 {
		return -1
	}
	return errors * 100 / (completed + errors)
}

func (s *sampler) rates(ns engine.Namespace, name string) rates {
	s.mu.Lock()
	r := s.rings[qkey{ns, name}]
	r = append([]sample(nil), r...)
	s.mu.Unlock()
	if len(r) < 2 {
		return rates{ErrorShare: -1}
	}
	first, last := r[0], r[len(r)-1]
	win := last.at.Sub(first.at)
	if win <= 0 {
		return rates{ErrorShare: -1}
	}
	// A counter that went down means the DB was reopened: the interval
	// counts as zero rather than negative.
	delta := func(a, b uint64) uint64 {
		if b < a {
			return 0
		}
		return b - a
	}
	errs := func(t engine.Totals) uint64 { return t.Retried + t.DeadLettered }
	out := rates{Window: win, Known: true,
		Enqueued:  float64(delta(first.t.Enqueued, last.t.Enqueued)) / win.Minutes(),
		Completed: float64(delta(first.t.Completed, last.t.Completed)) / win.Minutes(),
		Errors:    float64(delta(errs(first.t), errs(last.t))) / win.Minutes()}
	out.ErrorShare = errorShare(out.Completed, out.Errors)
	for i := 1; i < len(r); i++ {
		a, b := r[i-1].t, r[i].t
		out.Spark = append(out.Spark, float64(delta(a.Completed, b.Completed)))
		out.SparkIn = append(out.SparkIn, float64(delta(a.Enqueued, b.Enqueued)))
		out.SparkErr = append(out.SparkErr, float64(delta(errs(a), errs(b))))
	}
	return out
}
