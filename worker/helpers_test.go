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
	"github.com/docketdb/docket/internal/enginetest"
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
	sig   *signal // told of every commit, engine event, log record and timer
}

// newEnv opens an in-memory engine on a manual clock. Every commit (enginetest.Tap),
// engine event (Observer), log record and timer armed on the clock tells
// e.sig, so that e.eventually re-checks its condition when something
// happened instead of polling.
func newEnv(t *testing.T, tweak ...func(*engine.Options)) *env {
	t.Helper()
	sig := &signal{}
	e := &env{t: t, clock: newTestClock(t0), logs: &logRecorder{sig: sig}, sig: sig}
	e.clock.sig = sig
	opts := engine.Options{Clock: e.clock}
	for _, f := range tweak {
		f(&opts)
	}
	enginetest.Tap(&opts, func(uint64, []byte) { sig.notify() })
	if opts.Observer == nil {
		opts.Observer = sigObserver{sig}
	} else {
		opts.Observer = teeObserver{opts.Observer, sigObserver{sig}}
	}
	db, err := engine.OpenInMemory(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.db = db
	t.Cleanup(func() { db.Close() })
	return e
}

// signal is a broadcast: next returns a channel that the next notify
// closes. A waiter takes the channel before it checks its condition, so a
// change made between the check and the wait is not missed.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *signal) next() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// notify wakes the waiters; a nil signal does nothing.
func (s *signal) notify() {
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	s.mu.Unlock()
}

// sigObserver tells a signal of every engine event: refusals such as a
// lost lease change counters without a commit.
type sigObserver struct{ sig *signal }

func (o sigObserver) TaskEvents([]engine.TaskEvent) { o.sig.notify() }
func (o sigObserver) Synced(time.Duration, int)     {}
func (o sigObserver) Snapshot(engine.SnapshotEvent) {}

type teeObserver [2]engine.Observer

func (t teeObserver) TaskEvents(evs []engine.TaskEvent) { t[0].TaskEvents(evs); t[1].TaskEvents(evs) }
func (t teeObserver) Synced(d time.Duration, n int)     { t[0].Synced(d, n); t[1].Synced(d, n) }
func (t teeObserver) Snapshot(ev engine.SnapshotEvent)  { t[0].Snapshot(ev); t[1].Snapshot(ev) }

// eventually waits until cond holds, checking it again each time the env
// is told that something happened (a commit, an engine event, a log
// record, a timer armed, or e.sig.notify from the test's own handlers). It
// fails the test if cond still does not hold after 5 s.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	limit := time.NewTimer(5 * time.Second)
	defer limit.Stop()
	for {
		changed := e.sig.next()
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-limit.C:
			e.t.Fatalf("timed out waiting for %s", what)
		}
	}
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
	if opts.PresenceEvery == 0 {
		// Presence reports commit and arm timers of their own; the
		// tests that want them ask for them.
		opts.PresenceEvery = -1
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
	e.eventually(fmt.Sprintf("task %d %v", id, state), func() bool {
		info = e.get(queue, id)
		return info.State == state
	})
	return info
}

// waitParked waits until n blocking claims are parked on queue, their
// timers armed: a commit or a clock move made next reaches them.
func (e *env) waitParked(queue string, n int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	if err := e.db.WaitParked(ctx, ns, queue, n); err != nil {
		e.t.Fatal(err)
	}
}

// testClock is a manual clock that knows which of its timers are pending,
// so that a test can wait until a goroutine is parked on a timer before it
// moves the clock (a timer armed relative to a reading taken before the
// move would be late by the move).
type testClock struct {
	*engine.ManualClock
	sig    *signal    // told of every timer armed (may be nil)
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
	c.sig.notify()
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
// Timers fire inside Advance, so one due later than the clock's time that
// armed finds pending has not fired.
func (e *env) armed(at time.Time) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("a timer armed for %v", at), func() bool {
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
	sig  *signal // told of every record (may be nil)
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
	h.r.sig.notify()
	return nil
}

func (h *recHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &recHandler{r: h.r, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *recHandler) WithGroup(string) slog.Handler { return h }
