package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/client"
	"github.com/docketdb/docket/cluster"
	"github.com/docketdb/docket/cluster/clustertest"
	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/server"
)

// front puts a docket server on 127.0.0.1 in front of each node of a
// mesh, serving whatever node runs at that index now, so that a client
// sees the cluster as it sees nodes of docket serve -raft: a node that is
// down answers every call as a closed server does (Unavailable, not
// taken).
type front struct {
	m    *clustertest.Mesh
	urls []string

	mu    sync.Mutex
	muxes map[*cluster.Node]http.Handler
}

var quietLog = slog.New(slog.DiscardHandler)

func newFront(t *testing.T, m *clustertest.Mesh) *front {
	t.Helper()
	f := &front{m: m, muxes: map[*cluster.Node]http.Handler{}}
	errw := connect.NewErrorWriter()
	for _, n := range m.Nodes {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		id := n.ID
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if h := f.handler(id); h != nil {
				h.ServeHTTP(w, r)
				return
			}
			ce := connect.NewError(connect.CodeUnavailable, errors.New("node "+id+" is down"))
			ce.Meta().Set("Docket-Unavailable", "closed")
			errw.Write(w, r, ce)
		})}
		go hs.Serve(ln)
		t.Cleanup(func() { hs.Close() }) // before the mesh closes
		f.urls = append(f.urls, "http://"+ln.Addr().String())
	}
	return f
}

// handler returns the routes of a server over the node id runs now, nil
// when it is down.
func (f *front) handler(id string) http.Handler {
	for _, n := range f.m.Running() {
		if n.ID() != id {
			continue
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		h := f.muxes[n]
		if h == nil {
			h = server.New(n.API(), server.Options{Logger: quietLog}).Mux()
			f.muxes[n] = h
		}
		return h
	}
	return nil
}

// deadlineCall is a call made through the client with a deadline, and
// what it was answered.
type deadlineCall struct {
	kind  string // "enqueue" or "complete"
	key   string // of an enqueue
	id    uint64 // of a complete: the task and its lease's token
	token uint64
	err   error
}

// nothingDone reports an error by which the client says that the call
// was not done: no server took it (ErrUnavailable), or its context ended
// before it was sent (the context's error alone).
func nothingDone(err error) bool {
	if err == nil || errors.Is(err, client.ErrOutcomeUnknown) {
		return false
	}
	return errors.Is(err, client.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// deadlineCaller makes, until stop is closed, keyed enqueues to queue dq
// and completions of tasks it claims there, through a client of every
// node, each call with a deadline of 150 to 500 ms, and records them.
func deadlineCaller(ctx context.Context, t *testing.T, c *client.Client, g int, stop <-chan struct{}, record func(deadlineCall)) {
	rng := rand.New(rand.NewPCG(uint64(g), 13))
	q := c.Queue(ns, "dq")
	deadline := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, 150*time.Millisecond+time.Duration(rng.IntN(350))*time.Millisecond)
	}
	for j := 0; ; j++ {
		select {
		case <-stop:
			return
		default:
		}
		if j%2 == 0 {
			key := fmt.Sprintf("d%d-%d", g, j)
			cctx, cancel := deadline()
			_, err := q.Enqueue(cctx, engine.Task{Payload: []byte(`{"key":"` + key + `"}`), IdempotencyKey: key})
			cancel()
			record(deadlineCall{kind: "enqueue", key: key, err: err})
			continue
		}
		cctx, cancel := deadline()
		ls, err := q.Claim(cctx, fmt.Sprintf("d%d", g), time.Minute, 1)
		cancel()
		if err != nil || len(ls) == 0 {
			continue
		}
		cctx, cancel = deadline()
		_, err = q.Complete(cctx, ls[0], engine.Done{})
		cancel()
		record(deadlineCall{kind: "complete", id: ls[0].ID, token: ls[0].Token, err: err})
	}
}

// checkDeadlineCalls checks, on the leader's API once the nodes
// converged, that no call the client reported as not done was done.
func checkDeadlineCalls(ctx context.Context, t *testing.T, api engine.API, calls []deadlineCall) {
	q := api.Queue(ns, "dq")
	outcomes := map[string]int{}
	for _, dc := range calls {
		what := "done"
		switch {
		case dc.err == nil:
		case nothingDone(dc.err):
			what = "not done"
		case errors.Is(dc.err, client.ErrOutcomeUnknown):
			what = "unknown"
		case errors.Is(dc.err, engine.ErrLeaseLost):
			what = "lease lost"
		default:
			t.Errorf("%s %s%d: %v", dc.kind, dc.key, dc.id, dc.err)
		}
		outcomes[dc.kind+" "+what]++
		if what != "not done" {
			continue
		}
		switch dc.kind {
		case "enqueue":
			res, err := q.Enqueue(ctx, engine.Task{IdempotencyKey: dc.key})
			if err != nil {
				t.Errorf("enqueue %s again: %v", dc.key, err)
			} else if res.Deduplicated {
				t.Errorf("enqueue %s was done, yet reported as not: %v", dc.key, dc.err)
			}
		case "complete":
			ti, err := q.Get(ctx, dc.id)
			if err != nil {
				t.Errorf("get %d: %v", dc.id, err)
			} else if ti.State == engine.Completed && ti.Token == dc.token {
				t.Errorf("complete of task %d (token %d) was done, yet reported as not: %v", dc.id, dc.token, dc.err)
			}
		}
	}
	t.Logf("calls with deadlines through the client: %v", outcomes)
}
