package client

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/server"
)

// TestAFullBudgetCrossesTheNetwork: a server whose DB's memory budget is
// full answers an enqueue with ResourceExhausted and the engine's ErrFull;
// the client returns ErrFull (not ErrOverLimit) after one try, with the
// server's message, and a completion still frees the budget.
func TestAFullBudgetCrossesTheNetwork(t *testing.T) {
	t.Parallel()
	db := &countingDB{DB: memDB(t, engine.Options{MaxMemory: 32 << 10})}
	calls := &db.enqueues
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, nil)
	c := dial(t, srv.url, Options{})
	q := c.Queue(engine.NS("acme", "prod"), "q")
	ctx := context.Background()
	payload := []byte(`"` + strings.Repeat("x", 1022) + `"`)
	var err error
	n := 0
	for ; n < 1000; n++ {
		if _, err = q.Enqueue(ctx, engine.Task{Payload: payload}); err != nil {
			break
		}
	}
	wantErr(t, "an enqueue past the budget", err, engine.ErrFull)
	if errors.Is(err, ErrOverLimit) || !strings.Contains(err.Error(), "32.0 KiB") || connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("the refusal: %v (%s)", err, connect.CodeOf(err))
	}
	before := calls.Load()
	_, err = q.Enqueue(ctx, engine.Task{Payload: payload})
	wantErr(t, "another enqueue past the budget", err, engine.ErrFull)
	if got := calls.Load() - before; got != 1 {
		t.Fatalf("a refusal for a full budget was tried %d times", got)
	}
	ls := must(q.Claim(ctx, "w", 30e9, 1))(t)
	must(q.Complete(ctx, ls[0], engine.Done{}))(t)
	must(q.Enqueue(ctx, engine.Task{Payload: payload}))(t)
}

// countingDB counts the enqueues the server makes on its queues.
type countingDB struct {
	*engine.DB
	enqueues atomic.Int32
}

func (d *countingDB) Queue(ns engine.Namespace, name string) engine.Queue {
	return countingQueue{d.DB.Queue(ns, name), &d.enqueues}
}

type countingQueue struct {
	engine.Queue
	n *atomic.Int32
}

func (q countingQueue) Enqueue(ctx context.Context, t engine.Task, ops ...engine.Op) (engine.Enqueued, error) {
	q.n.Add(1)
	return q.Queue.Enqueue(ctx, t, ops...)
}
