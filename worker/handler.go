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

// Mux routes tasks to handlers by their Kind (engine.Task.Kind). A task
// whose kind has no handler fails permanently with ErrNoHandler: it is
// dead-lettered at once and can be redriven once a handler exists. The
// handler registered for the kind "" receives tasks without a kind.
type Mux struct {
	mu sync.RWMutex
	m  map[string]Handler
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

// Work routes t to the handler of its kind.
func (m *Mux) Work(ctx context.Context, t *Task) error {
	m.mu.RLock()
	h, ok := m.m[t.Kind]
	m.mu.RUnlock()
	if !ok {
		return Permanent(fmt.Errorf("%w %q", ErrNoHandler, t.Kind))
	}
	return h.Work(ctx, t)
}
