package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/internal/wire"
)

// ErrOutcomeUnknown is returned for a call that reached the server (or may
// have) and got no answer, when repeating it would not be safe: it may or
// may not have taken effect. Enqueues with an idempotency key and fenced
// calls are repeated instead, since a repeat cannot do the work twice.
var ErrOutcomeUnknown = errors.New("docket: outcome unknown: the connection failed after the call was sent")

// errNoAnswer is the error of an attempt that got no answer within the
// client's own bound on a call (Options.CallTimeout): it may have been
// taken.
var errNoAnswer = errors.New("docket: no answer from the server")

// LeaderHeader is the response header in which a node that cannot take a
// call (a follower, a node without a leader) names the leader's address.
const LeaderHeader = "Docket-Leader"

// endpoints is the list of servers a client knows and the one it uses.
type endpoints struct {
	mu   sync.Mutex
	urls []string
	cur  int
}

func newEndpoints(list string) (*endpoints, error) {
	var urls []string
	seen := map[string]bool{}
	for _, u := range strings.Split(list, ",") {
		u = strings.TrimRight(strings.TrimSpace(u), "/")
		if u == "" || seen[u] {
			continue
		}
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return nil, errors.New("docket: server address " + u + " must start with http:// or https://")
		}
		seen[u] = true
		urls = append(urls, u)
	}
	if len(urls) == 0 {
		return nil, errors.New("docket: no server address")
	}
	return &endpoints{urls: urls}, nil
}

func (e *endpoints) current() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.urls[e.cur]
}

// failed moves on from url (if it is still the current one) to the next.
func (e *endpoints) failed(url string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.urls[e.cur] == url {
		e.cur = (e.cur + 1) % len(e.urls)
	}
}

// follow makes the leader named by a server current, adding it when it is
// not in the list (a cluster may have grown).
func (e *endpoints) follow(leader string) {
	leader = strings.TrimRight(strings.TrimSpace(leader), "/")
	if !strings.HasPrefix(leader, "http://") && !strings.HasPrefix(leader, "https://") {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, u := range e.urls {
		if u == leader {
			e.cur = i
			return
		}
	}
	if len(e.urls) < 64 {
		e.urls = append(e.urls, leader)
		e.cur = len(e.urls) - 1
	}
}

// retrier repeats calls across transient failures.
type retrier struct {
	eps        *endpoints
	maxRetries int
	base, max  time.Duration
	sleep      func(context.Context, time.Duration) error // tests replace it
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// do runs f against the current endpoint, repeating it on another or the
// same endpoint while the failure allows: always when the call cannot have
// reached a server (dial refused, no leader, redirected), and when the
// call was sent but got no answer only if repeatable is true. It gives up
// when ctx ends or after maxRetries repeats.
//
// Once a try may have reached a server without an answer (it was sent and
// the connection failed, its bound passed, or ctx ended while it was in
// flight), the call may have taken effect, and the only errors do returns
// are a server's answer to a later try or one matching ErrOutcomeUnknown:
// when the retries run out, even if the last try was not sent, and when
// ctx ends, during a try or a wait between tries. The error then matches
// ctx's error too (errors.Is(err, context.DeadlineExceeded)).
//
// A try that got no answer within its bound, or before ctx's deadline,
// moves the client to the next endpoint, so that a server that stopped
// answering (a paused leader) costs one try, not every call's deadline.
func (r *retrier) do(ctx context.Context, repeatable bool, f func(ctx context.Context, base string) error) error {
	sent := false // a try reached a server, or may have, and got no answer
	for attempt := 0; ; attempt++ {
		base := r.eps.current()
		err := f(ctx, base)
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil && !answered(err, cerr) {
			// The try ended with the caller's context.
			if cutInFlight(err) {
				if errors.Is(cerr, context.DeadlineExceeded) && ctx.Value(longPoll{}) == nil {
					r.eps.failed(base) // no answer within the time it had
				}
				sent = true
			}
			if sent {
				return outcomeUnknown(cerr, err)
			}
			return err
		}
		retry := false
		switch classify(err) {
		case notSent:
			r.eps.failed(base)
			retry = true
		case redirected:
			var ce *connect.Error
			if errors.As(err, &ce) {
				if leader := ce.Meta().Get(LeaderHeader); leader != "" && leader != base {
					r.eps.follow(leader)
				} else {
					r.eps.failed(base)
				}
			}
			retry = true
		case busy:
			retry = true // here again, after the backoff
		case maybeSent:
			r.eps.failed(base)
			if !repeatable {
				return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
			}
			sent, retry = true, true
		}
		if !retry {
			return err
		}
		if attempt >= r.maxRetries {
			if sent {
				return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
			}
			return err
		}
		if serr := r.sleep(ctx, r.backoff(attempt)); serr != nil {
			if sent {
				return outcomeUnknown(serr, err)
			}
			return err
		}
	}
}

// longPoll marks the context of a long poll (ClaimWait), which a server
// holds until the caller's deadline: a poll that ends with it is no sign
// of a server that stopped answering.
type longPoll struct{}

// answered reports whether err, the error of a try that ended when the
// caller's context (whose error is cerr) had ended too, is a server's
// answer rather than the try cut by the context.
func answered(err, cerr error) bool {
	if classify(err) != final || errors.Is(err, cerr) || errors.As(err, new(unsentError)) {
		return false
	}
	switch connect.CodeOf(err) {
	case connect.CodeCanceled, connect.CodeDeadlineExceeded:
		// The server's own copy of the deadline: it may have begun the
		// call.
		return false
	}
	return true
}

// cutInFlight reports whether a try that ended with the caller's context
// may have reached a server: anything but a try that never left the
// client (a gathered call not yet sent, a connection never made, a
// refusal by a server that did not take the call).
func cutInFlight(err error) bool {
	if errors.As(err, new(unsentError)) || dialFailed(err) {
		return false
	}
	switch classify(err) {
	case notSent, redirected, busy:
		return false
	}
	return true
}

// outcomeUnknown is the error of a call whose context ended (cerr) after
// a try that may have taken effect; last is the last try's error.
func outcomeUnknown(cerr, last error) error {
	return fmt.Errorf("%w: %w (last try: %v)", ErrOutcomeUnknown, cerr, last)
}

func (r *retrier) backoff(attempt int) time.Duration {
	d := r.base << min(attempt, 16)
	if d > r.max || d <= 0 {
		d = r.max
	}
	return d/2 + rand.N(d/2+1) // full jitter on the upper half
}

type failure int

const (
	final      failure = iota // the server answered: the error is the answer
	notSent                   // the call never reached a server
	redirected                // a server refused to take it (not the leader, draining)
	maybeSent                 // sent, no answer
	busy                      // refused for being over the caller's limits, or not sent while waiting for a slot under them
)

func classify(err error) failure {
	if errors.Is(err, errNoAnswer) || errors.Is(err, errSessionLost) {
		return maybeSent
	}
	if errors.As(err, new(*notSentError)) {
		return notSent
	}
	if errors.As(err, new(*slotWaitError)) || overLimit(err) {
		return busy
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		if ce.Meta().Get(LeaderHeader) != "" {
			return redirected
		}
		if ce.Code() == connect.CodeUnavailable && ce.Meta().Get(wire.UnavailableHeader) != "" {
			return redirected // the server said so: it did not take the call
		}
		if wire.Detail(ce) != nil {
			return final // docket's handler answered, whatever the code
		}
		switch ce.Code() {
		case connect.CodeUnavailable:
			if dialFailed(err) {
				return notSent
			}
			return maybeSent
		case connect.CodeUnknown, connect.CodeInternal, connect.CodeAborted:
			if transportFailed(err) {
				if dialFailed(err) {
					return notSent
				}
				return maybeSent
			}
		case connect.CodeDeadlineExceeded, connect.CodeCanceled:
			return final
		}
		return final
	}
	if dialFailed(err) {
		return notSent
	}
	if transportFailed(err) {
		return maybeSent
	}
	return final
}

// dialFailed reports a connection that was never made: nothing was sent.
func dialFailed(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

func transportFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "EOF")
}
