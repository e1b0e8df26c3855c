package engine

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"
)

// recordsTo is a slog handler that sends every record it handles.
type recordsTo chan slog.Record

func (h recordsTo) Enabled(context.Context, slog.Level) bool { return true }
func (h recordsTo) Handle(_ context.Context, r slog.Record) error {
	h <- r
	return nil
}
func (h recordsTo) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordsTo) WithGroup(string) slog.Handler      { return h }

func attr(r slog.Record, key string) slog.Value {
	var v slog.Value
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value
			return false
		}
		return true
	})
	return v
}

// TestDeadLetteredLoggedPerQueueAndInterval: a queue whose tasks all fail
// writes one line at once and one line with the count of the rest when the
// interval ends, not a line per task; another queue gets its own first line.
func TestDeadLetteredLoggedPerQueueAndInterval(t *testing.T) {
	t.Parallel()
	lines := make(recordsTo, 4096)
	e := newEnv(t, true, func(o *Options) { o.Logger = slog.New(lines) })
	kill := func(q Queue, n int) {
		for range n {
			e.enqueue(q, Task{})
		}
		for _, l := range e.claim(q, n) {
			if err := q.Fail(ctx, l, Failure{Err: "boom", Permanent: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	next := func() slog.Record {
		t.Helper()
		select {
		case r := <-lines:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("no log line")
		}
		return slog.Record{}
	}
	none := func() {
		t.Helper()
		select {
		case r := <-lines:
			t.Fatalf("unexpected log line %q", r.Message)
		default:
		}
	}

	kill(e.q("a"), 1000)
	if r := next(); r.Message != "docket: task moved to the dead-letter queue" || attr(r, "queue").String() != "a" {
		t.Fatalf("first line: %q queue %v", r.Message, attr(r, "queue"))
	}
	kill(e.q("b"), 3)
	if r := next(); attr(r, "queue").String() != "b" {
		t.Fatalf("queue b's first line names %v", attr(r, "queue"))
	}
	none() // 999 of a and 2 of b counted, not logged

	e.clock.Advance(deadLogEvery)
	got := map[string]int64{}
	for range 2 {
		r := next()
		if r.Message != "docket: tasks moved to the dead-letter queue" || attr(r, "last_error").String() != "boom" {
			t.Fatalf("summary line %q, last error %v", r.Message, attr(r, "last_error"))
		}
		got[attr(r, "queue").String()] = attr(r, "count").Int64()
	}
	if got["a"] != 999 || got["b"] != 2 {
		t.Fatalf("counts %v, want a:999 b:2", got)
	}

	// A new interval starts with a line at once again; what it counts is
	// logged when the DB closes.
	kill(e.q("a"), 5)
	if r := next(); r.Message != "docket: task moved to the dead-letter queue" {
		t.Fatalf("new interval's first line: %q", r.Message)
	}
	none()
	if err := e.db.Close(); err != nil {
		t.Fatal(err)
	}
	e.db = nil
	if r := next(); attr(r, "count").Int64() != 4 {
		t.Fatalf("line at close counts %v, want 4", attr(r, "count"))
	}
	none()
}

// TestDeadLogForgetsQuietQueues: the queues the dead-letter log remembers
// are bounded: those whose interval ended with nothing counted are
// forgotten once deadLogSweep queues are remembered.
func TestDeadLogForgetsQuietQueues(t *testing.T) {
	t.Parallel()
	clock := NewManualClock(t0)
	stop := make(chan struct{})
	lines := make(recordsTo, 4*deadLogSweep)
	l := newDeadLog(slog.New(lines), clock, stop)
	for i := range 3 * deadLogSweep {
		l.add([]deadTask{{id: uint64(i), ns: ns, queue: "q" + strconv.Itoa(i)}})
		if i%deadLogSweep == deadLogSweep-1 {
			clock.Advance(deadLogEvery)
		}
	}
	if n := l.Remembered(); n > deadLogSweep {
		t.Fatalf("remembers %d queues, want at most %d", n, deadLogSweep)
	}
	if len(lines) != 3*deadLogSweep {
		t.Fatalf("%d lines for %d tasks of as many queues", len(lines), 3*deadLogSweep)
	}
	close(stop)
	l.close()
}
