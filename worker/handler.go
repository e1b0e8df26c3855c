package worker

import (
	"context"
	"fmt"
	"sync"
)

// Handler works on one task. Returning nil completes the task, committing
// what the handler recorded on t (SetResult, AddOps, FollowUp) in the same
// commit; returning an error fails the attempt (see Permanent, RetryAfter,
// Snooze). The context is cancelled when the task times out, when its lease
// is lost (the cause wraps engine.ErrLeaseLost) or when shutdown cannot
// wait any longer (the cause is ErrShutdown): a handler must return soon
// after. A handler may run again for the same task (at-least-once), so its
// side effects outside the commit should be idempotent.
type Handler interface {
	Work(ctx context.Context, t *Task) error
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, t *Task) error

// Work calls f(ctx, t).
func (f HandlerFunc) Work(ctx context.Context, t *Task) error { return f(ctx, t) }

// Middleware wraps a handler: logging, metrics, tracing, authorisation. It
// sees a panic of the handler it wraps as a *PanicError return value.
type Middleware func(next Handler) Handler

// Mux routes tasks to handlers by their Kind (engine.Task.Kind). The
// handler registered for the kind "" receives tasks without a kind.
//
// A task whose kind has no handler fails its attempt with ErrNoHandler and
// is retried with its backoff, like any failure: during a rolling deploy a
// task of a new kind claimed by an old worker waits for a new one rather
// than being dead-lettered at once (it still is once its attempts are
// spent). NotFound changes that, to dead-letter at once or snooze say.
type Mux struct {
	mu       sync.RWMutex
	m        map[string]Handler
	notFound Handler
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{m: make(map[string]Handler)} }

// Handle registers h for tasks of kind. It panics if kind already has a
// handler.
func (m *Mux) Handle(kind string, h Handler) {
	if h == nil {
		panic("worker: Mux.Handle with a nil handler")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.m[kind]; dup {
		panic(fmt.Sprintf("worker: Mux already has a handler for kind %q", kind))
	}
	m.m[kind] = h
}

// HandleFunc registers f for tasks of kind.
func (m *Mux) HandleFunc(kind string, f func(ctx context.Context, t *Task) error) {
	m.Handle(kind, HandlerFunc(f))
}

// NotFound sets the handler of tasks whose kind has no handler. For
// example, to dead-letter them at once:
//
//	mux.NotFound(worker.HandlerFunc(func(ctx context.Context, t *worker.Task) error {
//		return worker.Permanent(fmt.Errorf("no handler for kind %q", t.Kind))
//	}))
func (m *Mux) NotFound(h Handler) {
	m.mu.Lock()
	m.notFound = h
	m.mu.Unlock()
}

// Work routes t to the handler of its kind.
func (m *Mux) Work(ctx context.Context, t *Task) error {
	m.mu.RLock()
	h, ok := m.m[t.Kind]
	nf := m.notFound
	m.mu.RUnlock()
	switch {
	case ok:
		return h.Work(ctx, t)
	case nf != nil:
		return nf.Work(ctx, t)
	}
	return fmt.Errorf("%w %q", ErrNoHandler, t.Kind)
}
