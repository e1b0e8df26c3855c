package wire

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/engine"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// UnavailableHeader is the response header of an Unavailable answer from a
// server that did not take the call (it is draining, or its DB is closed),
// so a client may send it again, elsewhere or later, whatever the call.
const UnavailableHeader = "Docket-Unavailable"

// sentinels maps the engine's sentinel errors to their wire names and
// connect codes. Order matters only for an error wrapping two: only
// ErrNotCaughtUp does (with its cause), and it comes first.
var sentinels = [...]struct {
	err  error
	pb   v1.Sentinel
	code connect.Code
}{
	// ToConnect answers it with its cause's code (notCaughtUp), never
	// this one; the entry names it on the wire.
	{engine.ErrNotCaughtUp, v1.Sentinel_SENTINEL_NOT_CAUGHT_UP, connect.CodeUnavailable},
	{engine.ErrInvalid, v1.Sentinel_SENTINEL_INVALID, connect.CodeInvalidArgument},
	{engine.ErrNotFound, v1.Sentinel_SENTINEL_NOT_FOUND, connect.CodeNotFound},
	// A lost lease is a state the call needs and the task is no longer in:
	// repeating the call cannot succeed.
	{engine.ErrLeaseLost, v1.Sentinel_SENTINEL_LEASE_LOST, connect.CodeFailedPrecondition},
	// A failed assertion is a lost read-modify-write race: gRPC's Aborted,
	// to be retried at a higher level (read again, decide again).
	{engine.ErrConflict, v1.Sentinel_SENTINEL_CONFLICT, connect.CodeAborted},
	{engine.ErrPermission, v1.Sentinel_SENTINEL_PERMISSION, connect.CodePermissionDenied},
	{engine.ErrClosed, v1.Sentinel_SENTINEL_CLOSED, connect.CodeUnavailable},
	{engine.ErrFailed, v1.Sentinel_SENTINEL_FAILED, connect.CodeUnavailable},
	{engine.ErrCorrupt, v1.Sentinel_SENTINEL_CORRUPT, connect.CodeDataLoss},
	{engine.ErrLocked, v1.Sentinel_SENTINEL_LOCKED, connect.CodeUnavailable},
	{engine.ErrReadOnly, v1.Sentinel_SENTINEL_READ_ONLY, connect.CodeFailedPrecondition},
	// A full budget is gRPC's ResourceExhausted; its detail tells it from
	// the server's per-caller limits, which a client waits out and
	// retries.
	{engine.ErrFull, v1.Sentinel_SENTINEL_FULL, connect.CodeResourceExhausted},
}

// SentinelOf returns the wire name of the sentinel err wraps,
// SENTINEL_UNSPECIFIED if none.
func SentinelOf(err error) v1.Sentinel {
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.pb
		}
	}
	return v1.Sentinel_SENTINEL_UNSPECIFIED
}

// SentinelErr returns the engine's sentinel of a wire name, nil for
// SENTINEL_UNSPECIFIED and for a name this build does not know.
func SentinelErr(s v1.Sentinel) error {
	for _, e := range sentinels {
		if e.pb == s {
			return e.err
		}
	}
	return nil
}

// ToConnect turns an error of the engine into the connect error a handler
// returns: the code of its sentinel, its message unchanged, and a
// docket.v1.Error detail naming the sentinel. A connect error is returned
// as it is; context errors become Canceled and DeadlineExceeded.
func ToConnect(err error) *connect.Error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	if errors.Is(err, engine.ErrNotCaughtUp) {
		return notCaughtUp(err)
	}
	if ce := replicationError(err); ce != nil {
		return ce
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			ce = connect.NewError(s.code, errors.New(err.Error()))
			addSentinel(ce, s.pb)
			if s.err == engine.ErrClosed {
				// A closed DB took nothing: the call may go elsewhere.
				ce.Meta().Set(UnavailableHeader, "closed")
			}
			return ce
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	return connect.NewError(connect.CodeInternal, err)
}

// addSentinel adds the docket.v1.Error detail naming s to ce.
func addSentinel(ce *connect.Error, s v1.Sentinel) {
	if d, err := connect.NewErrorDetail(&v1.Error{Sentinel: s}); err == nil {
		ce.AddDetail(d)
	}
}

// notCaughtUp answers a Join that made the node a member but ended before
// it caught up: the code and headers of its cause (a leader that changed:
// Unavailable naming no leader, which a client follows to the new leader,
// where a Join of the member waits anew; the deadline; a node that
// stopped), and the detail naming ErrNotCaughtUp, so that a client's
// error matches it.
func notCaughtUp(err error) *connect.Error {
	var ce *connect.Error
	switch {
	case errors.Is(err, engine.ErrNotLeader):
		ce = replicationError(err)
	case errors.Is(err, context.DeadlineExceeded):
		ce = connect.NewError(connect.CodeDeadlineExceeded, errors.New(err.Error()))
	case errors.Is(err, context.Canceled):
		ce = connect.NewError(connect.CodeCanceled, errors.New(err.Error()))
	default:
		ce = connect.NewError(connect.CodeUnavailable, errors.New(err.Error()))
		if errors.Is(err, engine.ErrClosed) {
			ce.Meta().Set(UnavailableHeader, "closed")
		}
	}
	addSentinel(ce, v1.Sentinel_SENTINEL_NOT_CAUGHT_UP)
	return ce
}

// RemoteError is an engine error rebuilt from a server's answer: its
// message is the server's, errors.Is matches its sentinel, and errors.As
// finds the *connect.Error it came in (when it came as one).
type RemoteError struct {
	Sentinel error          // one of the engine's sentinels
	Message  string         // the server's message
	Cause    *connect.Error // nil for an outcome inside a reply (CompleteBatch)
}

func (e *RemoteError) Error() string { return e.Message }

// Unwrap returns the sentinel and the connect error.
func (e *RemoteError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Sentinel}
	}
	return []error{e.Sentinel, e.Cause}
}

// Detail returns the docket.v1.Error detail of a connect error, nil if it
// has none (it did not come from a docket handler).
func Detail(ce *connect.Error) *v1.Error {
	for _, d := range ce.Details() {
		if d.Type() != "docket.v1.Error" {
			continue
		}
		m, err := d.Value()
		if err != nil {
			continue
		}
		if e, ok := m.(*v1.Error); ok {
			return e
		}
	}
	return nil
}

// FromConnect rebuilds the engine error a server's answer carries. An
// InvalidArgument without a detail is a request the server could not
// decode, or one over the element limits, which the engine would have
// refused with ErrInvalid: it becomes ErrInvalid too. Any other error
// without a docket.v1.Error detail naming a known sentinel is returned as
// it is.
func FromConnect(err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	d := Detail(ce)
	if d == nil {
		if ce.Code() == connect.CodeInvalidArgument {
			return &RemoteError{Sentinel: engine.ErrInvalid, Message: ce.Message(), Cause: ce}
		}
		return err
	}
	s := SentinelErr(d.GetSentinel())
	if s == nil {
		return err
	}
	return &RemoteError{Sentinel: s, Message: ce.Message(), Cause: ce}
}

// PBError converts the outcome of one part of a call (a lease of
// CompleteBatch): an empty Error for nil.
func PBError(err error) *v1.Error {
	if err == nil {
		return &v1.Error{}
	}
	return &v1.Error{Sentinel: SentinelOf(err), Message: err.Error()}
}

// PBErrors converts the outcomes of the parts of a call, the messages
// from one allocation.
func PBErrors(errs []error) []*v1.Error {
	out := make([]*v1.Error, len(errs))
	msgs := make([]v1.Error, len(errs))
	for i, err := range errs {
		m := &msgs[i]
		if err != nil {
			m.Sentinel, m.Message = SentinelOf(err), err.Error()
		}
		out[i] = m
	}
	return out
}

// Error converts the outcome of one part of a call: nil for an empty
// Error.
func Error(pb *v1.Error) error {
	if pb.GetSentinel() == v1.Sentinel_SENTINEL_UNSPECIFIED && pb.GetMessage() == "" {
		return nil
	}
	if s := SentinelErr(pb.GetSentinel()); s != nil {
		return &RemoteError{Sentinel: s, Message: pb.GetMessage()}
	}
	return errors.New(pb.GetMessage())
}

// PBItemError is the outcome of one item of an Each call that failed with
// err: what the single call's answer would have carried (its code,
// message, detail and the headers that say the server did not take it),
// so that the client rebuilds the very error the call alone would have
// got (ItemError). ce is ToConnect(err), with whatever a server adds to
// the answer of a single call (the leader's URL).
func PBItemError(ce *connect.Error) *v1.ItemError {
	code, _ := ce.Code().MarshalText()
	return &v1.ItemError{
		Code:        string(code),
		Message:     ce.Message(),
		Detail:      Detail(ce),
		Unavailable: ce.Meta().Get(UnavailableHeader),
		Leader:      ce.Meta().Get(LeaderHeader),
	}
}

// ItemError rebuilds the connect error of a failed item of an Each call,
// as the single call would have received it: the same code, message,
// detail and headers. A code this build does not know is Unknown.
func ItemError(pb *v1.ItemError) *connect.Error {
	var code connect.Code
	if code.UnmarshalText([]byte(pb.GetCode())) != nil {
		code = connect.CodeUnknown
	}
	ce := connect.NewError(code, errors.New(pb.GetMessage()))
	if d := pb.GetDetail(); d != nil {
		if det, err := connect.NewErrorDetail(d); err == nil {
			ce.AddDetail(det)
		}
	}
	if v := pb.GetUnavailable(); v != "" {
		ce.Meta().Set(UnavailableHeader, v)
	}
	if v := pb.GetLeader(); v != "" {
		ce.Meta().Set(LeaderHeader, v)
	}
	return ce
}
