package server

import (
	"fmt"
	"sync"
)

// Default per-caller limits.
const (
	DefaultMaxCalls  = 256  // concurrent calls of one caller
	DefaultMaxParked = 1024 // concurrent parked claims (ClaimWait) of one caller
)

// limiter caps what one caller may hold at once. It keeps an entry only
// while a caller has something in flight, so callers that come and go leave
// nothing behind.
type limiter struct {
	maxCalls, maxParked int

	mu  sync.Mutex
	use map[string]*usage
}

type usage struct{ calls, parked int }

func newLimiter(maxCalls, maxParked int) *limiter {
	if maxCalls <= 0 {
		maxCalls = DefaultMaxCalls
	}
	if maxParked <= 0 {
		maxParked = DefaultMaxParked
	}
	return &limiter{maxCalls: maxCalls, maxParked: maxParked, use: map[string]*usage{}}
}

// errBusy is returned when a caller is at a limit.
type errBusy struct {
	what  string
	limit int
}

func (e errBusy) Error() string {
	return fmt.Sprintf("docket: too many concurrent %s for this caller (limit %d)", e.what, e.limit)
}

// acquire takes one call slot (and a parked slot when parked) for caller and
// returns the function that gives them back.
func (l *limiter) acquire(caller string, parked bool) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.use[caller]
	if u == nil {
		u = &usage{}
	}
	if u.calls >= l.maxCalls {
		return nil, errBusy{"calls", l.maxCalls}
	}
	if parked && u.parked >= l.maxParked {
		return nil, errBusy{"waiting claims", l.maxParked}
	}
	u.calls++
	if parked {
		u.parked++
	}
	l.use[caller] = u
	return l.releaser(caller, u, 1, b2i(parked)), nil
}

// acquireParked takes a parked slot for a claim about to wait, within a
// call that already holds its call slot (the authentication middleware
// took it): a waiting claim is one call, not two.
func (l *limiter) acquireParked(caller string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.use[caller]
	if u == nil {
		u = &usage{}
	}
	if u.parked >= l.maxParked {
		return nil, errBusy{"waiting claims", l.maxParked}
	}
	u.parked++
	l.use[caller] = u
	return l.releaser(caller, u, 0, 1), nil
}

// releaser returns the function that gives back calls and parked slots of
// u, once, and forgets the caller when it holds nothing.
func (l *limiter) releaser(caller string, u *usage, calls, parked int) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			u.calls -= calls
			u.parked -= parked
			if u.calls == 0 && u.parked == 0 {
				delete(l.use, caller)
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// callers returns how many callers hold something (for tests).
func (l *limiter) callers() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.use)
}
