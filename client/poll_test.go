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
// its answer in a loop before it waits (by default, and with a budget
// set), never with BusyPoll negative; and not once the answers take
// longer than a few budgets (a server that syncs each commit to a slow
// disk).
func TestLoneCallsPollForTheirAnswers(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("a call polls only with two processors or more")
	}
	t.Parallel()
	srv := serve(t, memDB(t, engine.Options{}), "127.0.0.1:0", server.Options{}, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		poll time.Duration
		want bool
	}{{"default", 0, true}, {"longer", time.Millisecond, true}, {"never", -1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, srv.url, Options{BusyPoll: tc.poll})
			q := c.Queue(engine.NS("acme", "prod"), "q")
			for i := range 20 {
				if _, err := q.Enqueue(ctx, engine.Task{}); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			if polls := connPolls(c, srv.url); (polls > 0) != tc.want {
				t.Fatalf("20 lone calls polled %d times (BusyPoll %v)", polls, tc.poll)
			}
		})
	}

	// Answers slower than a few budgets (a 20 µs budget, a server that
	// answers each call a millisecond after it came) are not polled for
	// after the first.
	f := newFakeSession(t, func(sc *fakeConn, c *v1.Call) {
		time.AfterFunc(time.Millisecond, func() { sc.reply(enqueued(c.GetId(), 5, false)) })
	})
	c := dial(t, f.url, Options{BusyPoll: 20 * time.Microsecond})
	q := c.Queue(engine.NS("acme", "prod"), "q")
	for i := range 5 {
		if _, err := q.Enqueue(ctx, engine.Task{}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if polls := connPolls(c, f.url); polls != 1 {
		t.Fatalf("5 calls answered after a millisecond each polled %d times, want 1 (the first)", polls)
	}
}
