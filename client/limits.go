package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/internal/wire"
)

// ErrOverLimit is matched by the error of a call that servers refused, on
// every try the client made, for being over their limit on what one caller
// has in progress (docket serve -max-calls, -max-parked). Nothing was
// done; the error matches ErrUnavailable too. The client bounds its own
// calls by the limits a server announces (wire.LimitsHeader), so this
// means that other clients with the same token hold the rest.
var ErrOverLimit = errors.New("docket: refused: over the server's limit on a caller's calls in progress")

// overLimitError is the error of a call refused for being over a limit.
type overLimitError struct{ err error }

func (e *overLimitError) Error() string {
	return "docket: refused for being over the server's limit on a caller's calls in progress: " + e.err.Error()
}

func (e *overLimitError) Unwrap() []error { return []error{ErrOverLimit, ErrUnavailable, e.err} }

// OverLimit tells the worker runtime, which does not import this package,
// what the error is.
func (e *overLimitError) OverLimit() bool { return true }

// overLimit reports a server's refusal of a call for being over the
// caller's limits: ResourceExhausted from a docket server, before the call
// ran (no docket.v1.Error detail). Nothing was done.
func overLimit(err error) bool {
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted || wire.Detail(ce) != nil {
		return false
	}
	return ce.Meta().Get(wire.LimitsHeader) != "" || strings.Contains(ce.Message(), "too many concurrent")
}

// limits are the bounds of the client's calls in progress to each server,
// as the server announced them in the LimitsHeader of its answers, or the
// client's defaults until it has.
type limits struct {
	calls  int      // default bound on calls
	byHost sync.Map // host -> *hostLimits
}

func newLimits(calls int) *limits { return &limits{calls: calls} }

// hostLimits are the bounds of the calls to one server: calls in progress
// other than waiting claims, and waiting claims (ClaimWait). Until the
// server announced its limits (a server of an older build never does, and
// counts a waiting claim against its calls too), a waiting claim takes a
// call slot as well as a parked one, and at most half the calls may be
// waiting claims, so that the other calls (heartbeats, completions) always
// find slots.
type hostLimits struct {
	mu      sync.Mutex
	learned bool
	calls   slots
	parked  slots
}

func (l *limits) host(h string) *hostLimits {
	if hl, ok := l.byHost.Load(h); ok {
		return hl.(*hostLimits)
	}
	hl := &hostLimits{}
	hl.calls.limit = l.calls
	hl.parked.limit = max(l.calls/2, 1)
	v, _ := l.byHost.LoadOrStore(h, hl)
	return v.(*hostLimits)
}

// learn applies a LimitsHeader value.
func (h *hostLimits) learn(v string) {
	calls, parked, ok := wire.ParseLimits(v)
	if !ok {
		return
	}
	h.mu.Lock()
	h.learned = true
	h.mu.Unlock()
	h.calls.setLimit(calls)
	h.parked.setLimit(parked)
}

// acquire takes what a call needs, waiting for it until ctx ends, and
// returns what gives it back.
func (h *hostLimits) acquire(ctx context.Context, parked bool) (func(), error) {
	if !parked {
		if err := h.calls.acquire(ctx); err != nil {
			return nil, err
		}
		return h.calls.release, nil
	}
	h.mu.Lock()
	learned := h.learned
	h.mu.Unlock()
	if err := h.parked.acquire(ctx); err != nil {
		return nil, err
	}
	if learned {
		return h.parked.release, nil
	}
	if err := h.calls.acquire(ctx); err != nil {
		h.parked.release()
		return nil, err
	}
	return func() { h.calls.release(); h.parked.release() }, nil
}

// slotMark, in a request's context, learns whether the request got its
// slot (and went on to be sent): connect reports a request whose context
// ended by the context's error alone, whether it waited for a slot or was
// on the wire.
type slotMark struct{ got atomic.Bool }

type slotMarkKey struct{}

// slots is a counting semaphore whose bound can change; waiters are
// served in order.
type slots struct {
	mu      sync.Mutex
	limit   int
	used    int
	waiters []chan struct{}
	// onChange, if set (by a test, through watch), is called with mu held
	// after every change of used, limit or waiters.
	onChange func()
}

// watch sets the function called after every change of s.
func (s *slots) watch(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onChange = f
}

// changedLocked tells the watcher of s, if any, that s changed.
func (s *slots) changedLocked() {
	if s.onChange != nil {
		s.onChange()
	}
}

// slotWaitError is the error of a call whose context ended while it
// waited for a slot: it was not sent.
type slotWaitError struct{ err error }

func (e *slotWaitError) Error() string {
	return "docket: waiting for a free call slot (the server's limit on a caller's calls): " + e.err.Error()
}
func (e *slotWaitError) Unwrap() error { return e.err }

func (s *slots) acquire(ctx context.Context) error {
	s.mu.Lock()
	if s.used < s.limit && len(s.waiters) == 0 {
		s.used++
		s.changedLocked()
		s.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	s.waiters = append(s.waiters, ch)
	s.changedLocked()
	s.mu.Unlock()
	select {
	case <-ch:
		return nil // the slot was handed over
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, w := range s.waiters {
		if w == ch {
			s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
			s.changedLocked()
			return &slotWaitError{ctx.Err()}
		}
	}
	// Handed over as ctx ended: give it on.
	s.used--
	s.wakeLocked()
	s.changedLocked()
	return &slotWaitError{ctx.Err()}
}

func (s *slots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used--
	s.wakeLocked()
	s.changedLocked()
}

func (s *slots) setLimit(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limit == n {
		return
	}
	s.limit = n
	s.wakeLocked()
	s.changedLocked()
}

// wakeLocked hands free slots to waiters, in order.
func (s *slots) wakeLocked() {
	for s.used < s.limit && len(s.waiters) > 0 {
		s.used++
		close(s.waiters[0])
		s.waiters[0] = nil
		s.waiters = s.waiters[1:]
	}
}

// limited is a transport that bounds the calls in progress to each server
// by its limits, and learns them from every answer. A call holds its slot
// until its answer is read (or its body closed).
type limited struct {
	next   http.RoundTripper
	lim    *limits
	parked bool // the transport of waiting claims
}

func (l limited) RoundTrip(r *http.Request) (*http.Response, error) {
	h := l.lim.host(r.URL.Host)
	release, err := h.acquire(r.Context(), l.parked)
	if err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	if m, ok := r.Context().Value(slotMarkKey{}).(*slotMark); ok {
		m.got.Store(true)
	}
	resp, err := l.next.RoundTrip(r)
	if err != nil {
		release()
		return nil, err
	}
	h.learn(resp.Header.Get(wire.LimitsHeader))
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
	return resp, nil
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// transport.
func (l limited) CloseIdleConnections() {
	if c, ok := l.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// releasingBody gives the call's slot back once the answer is read to its
// end or closed.
type releasingBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releasingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.release)
	}
	return n, err
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}
