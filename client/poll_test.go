package client

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/server"
)

// connPolls is how many of the waits for an answer on c's session with
// url asked in a loop (Options.BusyPoll).
func connPolls(c *Client, url string) int64 {
	h := c.sessionHost(url)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn == nil {
		return 0
	}
	return h.conn.poll.Polls()
}

// TestLoneCallsPollForTheirAnswers: a call alone on its session asks for
// its answer in a loop before it waits, with the default budget or one
// set, never with BusyPoll negative. (The default's calls are only
// checked to have it: under the race detector an answer can take longer
// than three of its 50 µs budgets, and then is rightly not polled for.)
func TestLoneCallsPollForTheirAnswers(t *testing.T) {
	needPolling(t)
	t.Parallel()
	srv := serve(t, memDB(t, engine.Options{}), "127.0.0.1:0", server.Options{}, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		poll   time.Duration
		budget time.Duration
		polls  bool
	}{{"default", 0, DefaultBusyPoll, false}, {"longer", 5 * time.Millisecond, 5 * time.Millisecond, true}, {"never", -1, 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, srv.url, Options{BusyPoll: tc.poll})
			q := c.Queue(engine.NS("acme", "prod"), "q")
			for i := range 20 {
				if _, err := q.Enqueue(ctx, engine.Task{}); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			h := c.sessionHost(srv.url)
			h.mu.Lock()
			budget := h.conn.poll.Budget()
			h.mu.Unlock()
			if budget != tc.budget {
				t.Fatalf("the session polls for up to %v, want %v", budget, tc.budget)
			}
			if polls := connPolls(c, srv.url); tc.polls && polls == 0 || tc.budget == 0 && polls != 0 {
				t.Fatalf("20 lone calls polled %d times (BusyPoll %v)", polls, tc.poll)
			}
		})
	}

	// Answers slower than a few budgets (a 20 µs budget, a server that
	// answers each call a millisecond after it came) are not polled for.
	f := newFakeSession(t, func(sc *fakeConn, c *v1.Call) {
		time.AfterFunc(time.Millisecond, func() { sc.reply(enqueued(c.GetId(), 5, false)) })
	})
	c := dial(t, f.url, Options{BusyPoll: 20 * time.Microsecond})
	q := c.Queue(engine.NS("acme", "prod"), "q")
	for i := range 20 {
		if _, err := q.Enqueue(ctx, engine.Task{}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if polls := connPolls(c, f.url); polls != 0 {
		t.Fatalf("20 calls answered after a millisecond each polled %d times", polls)
	}
}

// TestCallsWithOthersInFlightDoNotPoll: calls that are not alone on the
// session (two asynchronous enqueues in flight, then a lone one, over and
// over) never poll: the lone ones never come in a row.
func TestCallsWithOthersInFlightDoNotPoll(t *testing.T) {
	needPolling(t)
	t.Parallel()
	srv := serve(t, memDB(t, engine.Options{}), "127.0.0.1:0", server.Options{}, nil)
	ctx := context.Background()
	c := dial(t, srv.url, Options{})
	q := c.Queue(engine.NS("acme", "prod"), "q")
	for i := range 20 {
		a, b := q.EnqueueAsync(ctx, engine.Task{}), q.EnqueueAsync(ctx, engine.Task{})
		if _, err := a.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Enqueue(ctx, engine.Task{}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if polls := connPolls(c, srv.url); polls != 0 {
		t.Fatalf("calls with others in flight polled %d times", polls)
	}
}

// needPolling skips a test of polling where a Poller never polls (one
// processor).
func needPolling(t *testing.T) {
	t.Helper()
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("a call polls only with two processors or more")
	}
}
