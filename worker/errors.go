package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/docketdb/docket/engine"
)

// Sentinel errors of the runtime. Test for them with errors.Is.
var (
	// ErrTimeout is the cause of a handler context cancelled because the
	// task ran longer than QueueOptions.Timeout. The cause also wraps
	// context.DeadlineExceeded.
	ErrTimeout = errors.New("worker: task timed out")
	// ErrShutdown is the cause of a handler context cancelled because Stop's
	// context ended (or Start's context was cancelled) before the handler
	// returned. The task's lease is released, not failed.
	ErrShutdown = errors.New("worker: shutting down")
	// ErrNoHandler is returned by a Mux for a task whose kind has no
	// handler: the attempt fails and is retried with backoff.
	ErrNoHandler = errors.New("worker: no handler for task kind")
	// ErrStarted is returned by Start on a Worker already started or stopped.
	ErrStarted = errors.New("worker: already started")
	// ErrPayload is wrapped by the error of a task whose payload does not
	// decode into its typed handler's type (JobFunc): the attempt fails
	// permanently, since retrying cannot change the payload.
	ErrPayload = errors.New("worker: payload does not decode")
)

// A handler's context is cancelled with a cause wrapping engine.ErrLeaseLost
// when a heartbeat finds that another owner holds the task: its result is
// then discarded. Test with errors.Is(context.Cause(ctx), engine.ErrLeaseLost).

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying: the task goes to the
// dead-letter queue at once, whatever attempts it has left. Permanent(nil)
// is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type retryAfterError struct {
	d   time.Duration
	err error
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter fails the attempt like err but retries it after d instead of
// the task's exponential backoff (a rate limit's Retry-After, say). The
// attempt counts; when attempts are spent the task is dead-lettered as
// usual. A d of zero or less means the normal backoff; a d over
// engine.MaxDuration (about 100 years) is cut to it. RetryAfter(d, nil)
// fails with the text "retry requested".
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return &retryAfterError{d: min(d, engine.MaxDuration), err: err}
}

type snoozeError struct{ d time.Duration }

func (e *snoozeError) Error() string { return fmt.Sprintf("snoozed for %v", e.d) }

// Snooze, returned by a handler, puts the task back to wait for d without
// using an attempt (the attempt number is the same next time). Snooze(0)
// makes it claimable again at once; a d over engine.MaxDuration (about 100
// years) is cut to it. Whatever the handler recorded with SetResult, AddOps
// or FollowUp is discarded.
func Snooze(d time.Duration) error {
	return &snoozeError{d: min(max(d, 0), engine.MaxDuration)}
}

// PanicError is what a panicking handler is recorded as: the task fails
// (and is retried) with the panic value and the goroutine's stack as its
// last error.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v\n\n%s", e.Value, e.Stack) }

// Outcome classifies how a handler run ended, as the runtime acts on it.
type Outcome uint8

// Outcomes, in the order OutcomeOf tests for them.
const (
	// OutcomeLeaseLost: another owner took the task while the handler ran;
	// nothing is committed.
	OutcomeLeaseLost Outcome = iota + 1
	// OutcomeCompleted: the handler returned nil; the task is completed with
	// its result, ops and follow-ups.
	OutcomeCompleted
	// OutcomeShutdown: the handler returned an error after being cancelled
	// by shutdown; its lease is released (Snooze 0).
	OutcomeShutdown
	// OutcomeSnoozed: the handler returned Snooze(d).
	OutcomeSnoozed
	// OutcomePanicked: the handler panicked; the attempt fails.
	OutcomePanicked
	// OutcomePermanent: the handler returned Permanent(err); the task is
	// dead-lettered.
	OutcomePermanent
	// OutcomeRetryAfter: the handler returned RetryAfter(d, err).
	OutcomeRetryAfter
	// OutcomeTimedOut: the handler returned an error after QueueOptions.Timeout
	// cancelled it; the attempt fails.
	OutcomeTimedOut
	// OutcomeFailed: any other error; the attempt fails with backoff.
	OutcomeFailed
)

var outcomeNames = [...]string{"", "lease_lost", "completed", "shutdown", "snoozed", "panicked",
	"permanent", "retry_after", "timed_out", "failed"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) && o != 0 {
		return outcomeNames[o]
	}
	return "invalid"
}

// OutcomeOf classifies a handler's return value err, given the context the
// handler ran with. Middleware uses it to label metrics and spans; the
// runtime uses it to decide what to commit.
func OutcomeOf(ctx context.Context, err error) Outcome {
	return outcomeOf(context.Cause(ctx), err)
}

// outcomeOf is OutcomeOf given the cause of the handler's context (nil if
// it was not cancelled).
func outcomeOf(cause, err error) Outcome {
	if cause != nil && errors.Is(cause, engine.ErrLeaseLost) {
		return OutcomeLeaseLost
	}
	if err == nil {
		return OutcomeCompleted
	}
	if cause != nil && errors.Is(cause, ErrShutdown) {
		return OutcomeShutdown
	}
	var (
		sz *snoozeError
		pe *PanicError
		pm *permanentError
		ra *retryAfterError
	)
	switch {
	case errors.As(err, &sz):
		return OutcomeSnoozed
	case errors.As(err, &pe):
		return OutcomePanicked
	case errors.As(err, &pm):
		return OutcomePermanent
	case errors.As(err, &ra):
		return OutcomeRetryAfter
	case cause != nil && errors.Is(cause, ErrTimeout):
		return OutcomeTimedOut
	}
	return OutcomeFailed
}

// failureOf turns a failed run into what Fail records.
func failureOf(cause error, o Outcome, err error) engine.Failure {
	f := engine.Failure{Err: err.Error()}
	switch o {
	case OutcomePermanent:
		f.Permanent = true
	case OutcomeRetryAfter:
		var ra *retryAfterError
		errors.As(err, &ra)
		f.RetryAfter = max(ra.d, 0)
	case OutcomeTimedOut:
		if !errors.Is(err, cause) {
			f.Err = cause.Error() + ": " + f.Err
		}
	}
	return f
}
