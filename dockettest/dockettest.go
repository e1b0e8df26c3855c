package dockettest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

// Epoch is the time a DB's clock reads when New returns, unless the options
// bring a ManualClock of their own.
var Epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// DB is an in-memory engine on a manual clock, for one test.
type DB struct {
	*engine.DB
	// ManualClock is the engine's clock (what Clock returns): it moves only
	// when told to (Advance).
	ManualClock *engine.ManualClock
	// Timeout bounds how long WaitParked waits before it fails the test.
	// Default 10 s.
	Timeout time.Duration

	t testing.TB
}

// New opens an in-memory DB for t, closed when the test ends. opts are the
// engine's options; opts.Clock must be nil (the DB gets a ManualClock
// reading Epoch) or a *engine.ManualClock.
func New(t testing.TB, opts engine.Options) *DB {
	t.Helper()
	var clock *engine.ManualClock
	switch c := opts.Clock.(type) {
	case nil:
		clock = engine.NewManualClock(Epoch)
		opts.Clock = clock
	case *engine.ManualClock:
		clock = c
	default:
		t.Fatalf("dockettest: the clock must be a *engine.ManualClock, not %T", opts.Clock)
	}
	db, err := engine.OpenInMemory(opts)
	if err != nil {
		t.Fatalf("dockettest: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return &DB{DB: db, ManualClock: clock, Timeout: 10 * time.Second, t: t}
}

// Advance moves the clock forward by d: every timer, retry and lease due by
// then is due, and a blocking claim parked on it (see WaitParked) wakes.
func (db *DB) Advance(d time.Duration) { db.ManualClock.Advance(d) }

// WaitParked waits until n ClaimWait calls (a started Worker's, say) are
// parked on q, so that the next commit on q or Advance reaches them; it
// fails the test if that takes longer than db.Timeout. It replaces the
// sleep a test would otherwise need between starting a consumer and
// moving the clock.
func (db *DB) WaitParked(q engine.Queue, n int) {
	db.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), db.Timeout)
	defer cancel()
	if err := db.DB.WaitParked(ctx, q.Namespace(), q.Name(), n); err != nil {
		db.t.Fatalf("dockettest: %v", err)
	}
}

// Want describes the task RequireEnqueued and RequireNotEnqueued look for.
// A field left zero is not compared (so a Priority of 0 cannot be asked
// for).
type Want struct {
	// Args, if set, gives Kind and Payload as worker.NewTask makes them.
	Args worker.Args
	Kind string
	// Payload is compared as a JSON value: spacing and key order do not
	// matter.
	Payload string
	// State is the task's state; zero matches a task waiting to run
	// (Ready or Scheduled).
	State    engine.State
	Priority int
	// Headers must each be present with their value; others may be too.
	Headers map[string]string
}

// RequireEnqueued fails the test unless exactly one task of q matches want,
// and returns it.
func RequireEnqueued(t testing.TB, q engine.Queue, want Want) engine.TaskInfo {
	t.Helper()
	m, err := want.matcher()
	if err != nil {
		t.Fatalf("dockettest: RequireEnqueued: %v", err)
	}
	found, seen := m.find(t, q)
	switch len(found) {
	case 1:
		return found[0]
	case 0:
		t.Fatalf("dockettest: queue %s/%s has no task %s; it holds:%s", q.Namespace(), q.Name(), m, describe(seen))
	default:
		t.Fatalf("dockettest: queue %s/%s has %d tasks %s, want one:%s", q.Namespace(), q.Name(), len(found), m, describe(found))
	}
	return engine.TaskInfo{}
}

// RequireNotEnqueued fails the test if a task of q matches want.
func RequireNotEnqueued(t testing.TB, q engine.Queue, want Want) {
	t.Helper()
	m, err := want.matcher()
	if err != nil {
		t.Fatalf("dockettest: RequireNotEnqueued: %v", err)
	}
	if found, _ := m.find(t, q); len(found) > 0 {
		t.Fatalf("dockettest: queue %s/%s has %d tasks %s, want none:%s", q.Namespace(), q.Name(), len(found), m, describe(found))
	}
}

// RequireCounts fails the test unless q holds exactly want tasks in each
// state.
func RequireCounts(t testing.TB, q engine.Queue, want engine.Counts) {
	t.Helper()
	got, err := q.Counts(context.Background())
	if err != nil {
		t.Fatalf("dockettest: counts of queue %s/%s: %v", q.Namespace(), q.Name(), err)
	}
	if got != want {
		t.Fatalf("dockettest: queue %s/%s counts %+v, want %+v", q.Namespace(), q.Name(), got, want)
	}
}

// Drain runs the handler w has for q (inside w's middleware) on every task
// of q due now, in the test's goroutine, committing each outcome, until
// none is left (see worker.Worker.Drain), and returns how many runs it
// made. It fails the test if the Worker cannot drain the queue (it has
// started, or has no handler for q) or could not go on (the engine closed,
// a permission missing). w must not be started.
func Drain(t testing.TB, w *worker.Worker, q engine.Queue) int {
	t.Helper()
	n, err := w.Drain(context.Background(), q.Namespace(), q.Name())
	if err != nil {
		t.Fatalf("dockettest: draining queue %s/%s: %v", q.Namespace(), q.Name(), err)
	}
	return n
}

// DrainHandler is Drain for any handler, a *worker.Mux say, run with the
// default worker.QueueOptions (see worker.Drain).
func DrainHandler(t testing.TB, h worker.Handler, q engine.Queue) int {
	t.Helper()
	n, err := worker.Drain(context.Background(), q, h, worker.Options{Owner: "dockettest"})
	if err != nil {
		t.Fatalf("dockettest: draining queue %s/%s: %v", q.Namespace(), q.Name(), err)
	}
	return n
}

// matcher is a Want made ready to compare.
type matcher struct {
	Want
	payload any // the decoded Payload, if set
}

func (w Want) matcher() (matcher, error) {
	m := matcher{Want: w}
	if w.Args != nil {
		task, err := worker.NewTask(w.Args, engine.Task{Kind: w.Kind})
		if err != nil {
			return m, err
		}
		if w.Payload != "" {
			return m, fmt.Errorf("%w: Want has both Args and Payload", engine.ErrInvalid)
		}
		m.Kind, m.Payload = task.Kind, string(task.Payload)
	}
	if m.Payload != "" {
		if err := json.Unmarshal([]byte(m.Payload), &m.payload); err != nil {
			return m, fmt.Errorf("%w: Want.Payload is not JSON: %w", engine.ErrInvalid, err)
		}
	}
	return m, nil
}

// find lists the tasks of q in the states m looks at and returns those
// that match, and all it saw.
func (m matcher) find(t testing.TB, q engine.Queue) (found, seen []engine.TaskInfo) {
	t.Helper()
	states := []engine.State{engine.Ready, engine.Scheduled}
	if m.State != 0 {
		states = []engine.State{m.State}
	}
	for _, st := range states {
		cursor := ""
		for {
			page, err := q.List(context.Background(), engine.ListOptions{State: st, Limit: engine.MaxBatch, Cursor: cursor})
			if err != nil {
				t.Fatalf("dockettest: listing queue %s/%s: %v", q.Namespace(), q.Name(), err)
			}
			for _, ti := range page.Tasks {
				seen = append(seen, ti)
				if m.match(ti) {
					found = append(found, ti)
				}
			}
			if cursor = page.Next; cursor == "" {
				break
			}
		}
	}
	return found, seen
}

func (m matcher) match(ti engine.TaskInfo) bool {
	if m.Kind != "" && ti.Kind != m.Kind {
		return false
	}
	if m.Priority != 0 && ti.Priority != m.Priority {
		return false
	}
	for k, v := range m.Headers {
		if got, ok := ti.Headers[k]; !ok || got != v {
			return false
		}
	}
	if m.Payload != "" {
		var got any
		if json.Unmarshal(ti.Payload, &got) != nil || !jsonEqual(got, m.payload) {
			return false
		}
	}
	return true
}

// jsonEqual compares decoded JSON values by their canonical encoding
// (encoding/json sorts object keys).
func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// String describes what m looks for, for failure messages.
func (m matcher) String() string {
	var parts []string
	if m.Kind != "" {
		parts = append(parts, fmt.Sprintf("kind %q", m.Kind))
	}
	if m.Payload != "" {
		parts = append(parts, "payload "+m.Payload)
	}
	if m.State != 0 {
		parts = append(parts, "state "+m.State.String())
	} else {
		parts = append(parts, "ready or scheduled")
	}
	if m.Priority != 0 {
		parts = append(parts, fmt.Sprintf("priority %d", m.Priority))
	}
	for _, k := range slices.Sorted(maps.Keys(m.Headers)) {
		parts = append(parts, fmt.Sprintf("header %s=%q", k, m.Headers[k]))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// describe lists tasks for a failure message, at most 20.
func describe(ts []engine.TaskInfo) string {
	if len(ts) == 0 {
		return " nothing"
	}
	var b strings.Builder
	for i, ti := range ts {
		if i == 20 {
			fmt.Fprintf(&b, "\n\t... and %d more", len(ts)-i)
			break
		}
		fmt.Fprintf(&b, "\n\ttask %d: kind %q, %v, priority %d, payload %s", ti.ID, ti.Kind, ti.State, ti.Priority, ti.Payload)
	}
	return b.String()
}
