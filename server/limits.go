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

// LimitsHeader is the response header by which the server tells every
// caller its per-caller limits, as "calls=N, parked=M": how many calls it
// may have in progress at once (waiting claims aside) and how many claims
// it may have waiting. A client sizes its own bound by it.
const LimitsHeader = "Docket-Limits"

// header is the value of the LimitsHeader.
func (l *limiter) header() string {
	return fmt.Sprintf("calls=%d, parked=%d", l.maxCalls, l.maxParked)
}

// errBusy is returned when a caller is at a limit; it names the limit, as
// the LimitsHeader and the flag of docket serve name it.
type errBusy struct {
	what, key, flag string
	limit           int
}

func (e errBusy) Error() string {
	return fmt.Sprintf("docket: too many concurrent %s for this caller (%s=%d, docket serve -%s)", e.what, e.key, e.limit, e.flag)
}

// acquire takes one call slot for caller and returns the function that
// gives it back. Waiting claims do not take call slots (acquireParked).
func (l *limiter) acquire(caller string) (release func(), err error) {
	u, err := l.take(caller)
	if err != nil {
		return nil, err
	}
	return l.releaser(caller, u, 1, 0), nil
}

// take is acquire for a caller that gives the slot back itself, once,
// with give(caller, u, 1, 0): no function is made for it.
func (l *limiter) take(caller string) (*usage, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.use[caller]
	if u == nil {
		u = &usage{}
	}
	if u.calls >= l.maxCalls {
		return nil, errBusy{"calls", "calls", "max-calls", l.maxCalls}
	}
	u.calls++
	l.use[caller] = u
	return u, nil
}

// give gives back calls and parked slots of u, and forgets the caller
// when it holds nothing.
func (l *limiter) give(caller string, u *usage, calls, parked int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	u.calls -= calls
	u.parked -= parked
	if u.calls == 0 && u.parked == 0 {
		delete(l.use, caller)
	}
}

// acquireParked takes a parked slot for a claim that may wait. A waiting
// claim counts against the parked limit only: it holds no call slot, so
// that a caller's waiting claims can reach MaxParked whatever MaxCalls is.
func (l *limiter) acquireParked(caller string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.use[caller]
	if u == nil {
		u = &usage{}
	}
	if u.parked >= l.maxParked {
		return nil, errBusy{"waiting claims", "parked", "max-parked", l.maxParked}
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
		once.Do(func() { l.give(caller, u, calls, parked) })
	}
}

// callers returns how many callers hold something (for tests).
func (l *limiter) callers() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.use)
}
