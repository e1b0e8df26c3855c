// Package lograte bounds how often a kind of log line is written: an event
// that may come thousands of times a second (a client refused at its
// limit, a damaged value read again and again) is logged at most once an
// interval, the line saying how many were not.
package lograte

import (
	"sync"
	"time"
)

// Sampler lets one event through an interval and counts the others. The
// zero value lets the first event through; it is safe for concurrent use.
type Sampler struct {
	mu       sync.Mutex
	next     time.Time // when the next event may pass
	unlogged int       // events held back since the last that passed
}

// Allow reports whether an event at now passes, the interval every being
// counted from it if so, and how many events were held back before it.
func (s *Sampler) Allow(now time.Time, every time.Duration) (held int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Before(s.next) {
		s.unlogged++
		return 0, false
	}
	held, s.unlogged = s.unlogged, 0
	s.next = now.Add(every)
	return held, true
}
