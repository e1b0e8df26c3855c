package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

// TestMain fails the package if any goroutine of the runtime or the engine
// is left when the tests end.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := leakedGoroutines(); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines left after the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// verifyNoLeaks fails t if a goroutine running code of the runtime or the
// engine is still there (waiting up to 5 s for it to end).
func verifyNoLeaks(t *testing.T) {
	t.Helper()
	if leaked := leakedGoroutines(); leaked != "" {
		t.Fatalf("goroutines left:\n%s", leaked)
	}
}

// leakedGoroutines returns the stacks of the goroutines, other than the
// caller's, that run code of docket's worker or engine packages, after
// giving them up to 5 s to end.
func leakedGoroutines() string {
	deadline := time.Now().Add(5 * time.Second)
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		var leaked []string
		for i, g := range strings.Split(string(buf[:n]), "\n\n") {
			if i == 0 {
				continue // the caller
			}
			if strings.Contains(g, "docketdb/docket/worker.") || strings.Contains(g, "docketdb/docket/engine.") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		// A goroutine's exit sends no signal: like goleak, poll the stacks
		// (the test has already waited for every Stop it made).
		time.Sleep(time.Millisecond)
	}
}

var (
	bg = context.Background()
	t0 = time.Date(2030, 1, 2, 10, 2, 0, 0, time.UTC)
	ns = engine.NS("acme", "prod")
)

type env struct {
	t     *testing.T
	clock *testClock
	db    *engine.DB
	logs  *logRecorder
}

// newEnv opens an in-memory engine on a manual clock.
func newEnv(t *testing.T, tweak ...func(*engine.Options)) *env {
	t.Helper()
	e := &env{t: t, clock: newTestClock(t0), logs: &logRecorder{}}
	opts := engine.Options{Clock: e.clock}
	for _, f := range tweak {
		f(&opts)
	}
	db, err := engine.OpenInMemory(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.db = db
	t.Cleanup(func() { db.Close() })
	return e
}

// worker returns a Worker on the env's engine and clock that logs into
// e.logs; it is stopped when the test ends (before the engine closes).
func (e *env) worker(opts worker.Options) *worker.Worker {
	if opts.Clock == nil {
		opts.Clock = e.clock
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(&recHandler{r: e.logs})
	}
	if opts.Owner == "" {
		opts.Owner = "w1"
	}
	w := worker.New(e.db, opts)
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(bg, 5*time.Second)
		defer cancel()
		w.Stop(ctx)
	})
	return w
}

func (e *env) start(w *worker.Worker) {
	e.t.Helper()
	if err := w.Start(bg); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) stop(w *worker.Worker) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	if err := w.Stop(ctx); err != nil {
		e.t.Fatalf("stop: %v", err)
	}
}

func (e *env) q(name string) engine.Queue { return e.db.Queue(ns, name) }

func (e *env) enqueue(queue string, task engine.Task) uint64 {
	e.t.Helper()
	res, err := e.q(queue).Enqueue(bg, task)
	if err != nil {
		e.t.Fatal(err)
	}
	return res.ID
}

func (e *env) get(queue string, id uint64) engine.TaskInfo {
	e.t.Helper()
	info, err := e.q(queue).Get(bg, id)
	if err != nil {
		e.t.Fatalf("get %d: %v", id, err)
	}
	return info
}

// gone reports whether the task no longer exists (completed, not retained).
func (e *env) gone(queue string, id uint64) bool {
	_, err := e.q(queue).Get(bg, id)
	return errors.Is(err, engine.ErrNotFound)
}

// waitState waits until the task is in state and returns it.
func (e *env) waitState(queue string, id uint64, state engine.State) engine.TaskInfo {
	e.t.Helper()
	var info engine.TaskInfo
	eventually(e.t, fmt.Sprintf("task %d %v", id, state), func() bool {
		info = e.get(queue, id)
		return info.State == state
	})
	return info
}

// testClock is a manual clock that knows which of its timers are pending,
// so that a test can wait until a goroutine is parked on a timer before it
// moves the clock (a timer armed relative to a reading taken before the
// move would be late by the move).
type testClock struct {
	*engine.ManualClock
	mu     sync.Mutex // orders NewTimer against Advance
	timers []*testTimer
}

type testTimer struct {
	engine.Timer
	at      time.Time
	stopped atomic.Bool
}

func (t *testTimer) Stop() bool {
	t.stopped.Store(true)
	return t.Timer.Stop()
}

func newTestClock(start time.Time) *testClock {
	return &testClock{ManualClock: engine.NewManualClock(start)}
}

func (c *testClock) NewTimer(d time.Duration) engine.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &testTimer{Timer: c.ManualClock.NewTimer(d), at: c.ManualClock.Now().Add(d)}
	if len(c.timers) >= 64 {
		c.prune()
	}
	c.timers = append(c.timers, t)
	return t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ManualClock.Advance(d)
	c.prune()
}

// prune forgets fired and stopped timers. Call with mu held.
func (c *testClock) prune() {
	now := c.ManualClock.Now()
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(now) && !t.stopped.Load() {
			kept = append(kept, t)
		}
	}
	clear(c.timers[len(kept):])
	c.timers = kept
}

// armed waits until some goroutine waits on a timer due at exactly at.
func (e *env) armed(at time.Time) {
	e.t.Helper()
	eventually(e.t, fmt.Sprintf("a timer armed for %v", at), func() bool {
		e.clock.mu.Lock()
		defer e.clock.mu.Unlock()
		for _, t := range e.clock.timers {
			if t.at.Equal(at) && !t.stopped.Load() {
				return true
			}
		}
		return false
	})
}

// eventually polls cond until it holds, for at most 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// recv waits for a value on ch, for at most 5 s.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting on a channel")
	}
	panic("unreachable")
}

// logRecorder keeps every log record with its attributes.
type logRecorder struct {
	mu   sync.Mutex
	recs []logRec
}

type logRec struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (r *logRecorder) find(substr string) (logRec, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.recs {
		if strings.Contains(rec.msg, substr) {
			return rec, true
		}
	}
	return logRec{}, false
}

type recHandler struct {
	r     *logRecorder
	attrs []slog.Attr
}

func (h *recHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recHandler) Handle(_ context.Context, rec slog.Record) error {
	m := map[string]string{}
	for _, a := range h.attrs {
		m[a.Key] = a.Value.String()
	}
	rec.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	h.r.mu.Lock()
	h.r.recs = append(h.r.recs, logRec{level: rec.Level, msg: rec.Message, attrs: m})
	h.r.mu.Unlock()
	return nil
}

func (h *recHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &recHandler{r: h.r, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *recHandler) WithGroup(string) slog.Handler { return h }
