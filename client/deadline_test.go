package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
	"github.com/docketdb/docket/server"
)

// Modes of a faultProxy.
const (
	passAnswers    = iota
	swallowAnswers // the request goes through; the answer is dropped and the connection closed
	pauseAnswers   // the request goes through; the answer is dropped and the connection kept open, as by a paused server
)

// faultProxy is a TCP proxy on 127.0.0.1 in front of a server that passes,
// swallows or holds the answers, as mode says at the time they come.
type faultProxy struct {
	url  string
	mode atomic.Int32

	mu    sync.Mutex
	conns []net.Conn
}

func newFaultProxy(t *testing.T, target string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{url: "http://" + ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			wg.Add(2)
			go func() {
				defer wg.Done()
				io.Copy(out, in)
				out.Close()
			}()
			go func() {
				defer wg.Done()
				defer in.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := out.Read(buf)
					if n > 0 {
						switch p.mode.Load() {
						case swallowAnswers:
							out.Close()
							return
						case pauseAnswers:
							io.Copy(io.Discard, out) // until the test ends
							return
						}
						if _, werr := in.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

// refusedURL is an address where nothing listens.
func refusedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String()
	ln.Close()
	return u
}

// TestALostAnswerIsNeverUnavailable: repeatable calls with deadlines of
// 150 to 500 ms, sent to a server whose answers are all lost, with a second
// address that refuses connections. Each call's first try goes to the
// server (each has a client of its own), so each may have taken effect:
// none may report ErrUnavailable (nothing was done), whether the deadline
// ends during a try or during a wait between tries; each reports
// ErrOutcomeUnknown, which also matches the context's error. With one
// client for all (coalesced), a call may find only the refusing address,
// or end while it waits to be sent: then it must say it was not done
// (ErrUnavailable, or the context's error alone), and not have been.
func TestALostAnswerIsNeverUnavailable(t *testing.T) {
	t.Parallel()
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			t.Parallel() // a DB, server and proxy of its own: the deadlines run out side by side
			ctx := context.Background()
			ns := engine.NS("acme", "prod")
			db := memDB(t, engine.Options{})
			srv := serve(t, db, "127.0.0.1:0", server.Options{}, nil)
			p := newFaultProxy(t, srv.addr)
			refused := refusedURL(t)
			local := db.Queue(ns, "q")
			const n = 12
			for i := range 2 * n {
				must(local.Enqueue(ctx, engine.Task{IdempotencyKey: fmt.Sprintf("lease-%d", i)}))(t)
			}
			leases := must(local.Claim(ctx, "w", time.Hour, 2*n))(t)
			if len(leases) != 2*n {
				t.Fatalf("claimed %d", len(leases))
			}
			var one *Client
			client := func() *Client {
				if shared {
					if one == nil {
						one = dial(t, p.url+","+refused, Options{})
					}
					return one
				}
				return dial(t, p.url+","+refused, Options{Transport: TransportUnary})
			}

			type call struct {
				what    string
				err     error
				applied func() bool
			}
			calls := make([]*call, 0, 3*n)
			var runs []func()
			for i := range n {
				d := 150*time.Millisecond + time.Duration(i)*350*time.Millisecond/n
				add := func(cl *call, f func(context.Context) error) {
					calls = append(calls, cl)
					runs = append(runs, func() {
						cctx, cancel := context.WithTimeout(ctx, d)
						defer cancel()
						cl.err = f(cctx)
					})
				}
				key := fmt.Sprintf("key-%d", i)
				q := client().Queue(ns, "q")
				add(&call{what: "enqueue", applied: func() bool {
					e := must(local.Enqueue(ctx, engine.Task{IdempotencyKey: key}))(t)
					return e.Deduplicated
				}}, func(ctx context.Context) error {
					_, err := q.Enqueue(ctx, engine.Task{IdempotencyKey: key})
					return err
				})
				id := leases[i].ID
				cq := client().Queue(ns, "q")
				add(&call{what: "complete", applied: func() bool {
					_, err := local.Get(ctx, id)
					return errors.Is(err, engine.ErrNotFound)
				}}, func(ctx context.Context) error {
					_, err := cq.Complete(ctx, leases[i], engine.Done{})
					return err
				})
				l := leases[n+i]
				hq := client().Queue(ns, "q")
				add(&call{what: "heartbeat", applied: func() bool {
					ti, err := local.Get(ctx, l.ID)
					return err == nil && ti.LeaseUntil.After(l.Deadline.Add(time.Hour))
				}}, func(ctx context.Context) error {
					return hq.Heartbeat(ctx, &l, 3*time.Hour, nil)
				})
			}
			p.mode.Store(swallowAnswers)
			var wg sync.WaitGroup
			for _, run := range runs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					run()
				}()
			}
			wg.Wait()
			p.mode.Store(passAnswers)
			outcomes := map[string]int{}
			for _, cl := range calls {
				applied := cl.applied()
				// Not done: no server took the call, or its context
				// ended before a try was sent.
				notDone := errors.Is(cl.err, ErrUnavailable) ||
					(errors.Is(cl.err, context.DeadlineExceeded) && !errors.Is(cl.err, ErrOutcomeUnknown))
				switch {
				case notDone && applied:
					t.Errorf("%s taken and reported as not: %v", cl.what, cl.err)
				case notDone && !shared:
					t.Errorf("%s sent and its answer lost: %v; want ErrOutcomeUnknown", cl.what, cl.err)
				case notDone:
					outcomes["not done"]++
				case !errors.Is(cl.err, ErrOutcomeUnknown):
					t.Errorf("%s sent and its answer lost: %v (%T); want ErrOutcomeUnknown", cl.what, cl.err, cl.err)
				case !errors.Is(cl.err, context.DeadlineExceeded) && !errors.Is(cl.err, engine.ErrLeaseLost):
					t.Errorf("%s: %v does not say the deadline passed", cl.what, cl.err)
				default:
					outcomes[fmt.Sprintf("unknown, applied=%v", applied)]++
				}
			}
			t.Logf("outcomes: %v", outcomes)
		})
	}
}

// TestAPausedNodeCostsOneTry: a node that takes calls and never answers
// (a paused leader) in front of one that answers. A call with a deadline
// tries the paused node for at most CallTimeout, then moves on and
// succeeds within its deadline; a call whose deadline ends on the paused
// node moves the client on too, so the next call goes to the live one.
func TestAPausedNodeCostsOneTry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	db := memDB(t, engine.Options{})
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, nil)

	t.Run("CallTimeout bounds a try with a deadline", func(t *testing.T) {
		t.Parallel() // a proxy, a client and keys of its own
		p := newFaultProxy(t, srv.addr)
		c := dial(t, p.url+","+srv.url, Options{CallTimeout: 200 * time.Millisecond})
		q := c.Queue(ns, "q")
		p.mode.Store(pauseAnswers)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := q.Enqueue(cctx, engine.Task{IdempotencyKey: "paused-1"}); err != nil {
			t.Fatalf("a keyed enqueue with a deadline, paused node first: %v", err)
		}
		if c.r.eps.current() != srv.url {
			t.Fatalf("the client stays on %s", c.r.eps.current())
		}
	})
	t.Run("a try cut by the deadline moves on", func(t *testing.T) {
		t.Parallel() // a proxy, a client and keys of its own
		p := newFaultProxy(t, srv.addr)
		c := dial(t, p.url+","+srv.url, Options{Transport: TransportUnary}) // the unary path: the session's is in session_test.go
		q := c.Queue(ns, "q")
		p.mode.Store(pauseAnswers)
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, err := q.Enqueue(cctx, engine.Task{IdempotencyKey: "paused-2"})
		wantErr(t, "a keyed enqueue whose deadline ends on a paused node", err, ErrOutcomeUnknown)
		wantErr(t, "a keyed enqueue whose deadline ends on a paused node", err, context.DeadlineExceeded)
		cctx, cancel = context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if _, err := q.Enqueue(cctx, engine.Task{IdempotencyKey: "paused-2"}); err != nil {
			t.Fatalf("the next call: %v", err)
		}
	})
}

// TestAPausedNodeCostsConcurrentCallsOneTry: calls in flight together to
// a paused node are each bounded by CallTimeout, not by their deadlines.
func TestAPausedNodeCostsConcurrentCallsOneTry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	db := memDB(t, engine.Options{})
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, nil)
	p := newFaultProxy(t, srv.addr)
	c := dial(t, p.url+","+srv.url, Options{CallTimeout: 300 * time.Millisecond})
	q := c.Queue(ns, "q")
	p.mode.Store(pauseAnswers)
	cctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	const n = 5
	errs := make(chan error, n)
	enqueue := func(i int) {
		_, err := q.Enqueue(cctx, engine.Task{IdempotencyKey: fmt.Sprintf("concurrent-%d", i)})
		errs <- err
	}
	for i := range n {
		go enqueue(i)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("a concurrent keyed enqueue with a deadline, paused node first: %v", err)
		}
	}
}

// TestALongPollCutByItsDeadlineStays: a ClaimWait that the server holds
// until the caller's deadline is no sign of a server that stopped
// answering: the client stays on it.
func TestALongPollCutByItsDeadlineStays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := memDB(t, engine.Options{})
	// The server holds the poll until the client gives up on it (or the
	// test ends).
	ended := make(chan struct{})
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == docketv1connect.QueuesClaimWaitProcedure {
				select {
				case <-r.Context().Done():
				case <-ended:
				}
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	t.Cleanup(func() { close(ended) }) // before the server stops
	other := serve(t, memDB(t, engine.Options{}), "127.0.0.1:0", server.Options{}, nil)
	c := dial(t, srv.url+","+other.url, Options{Transport: TransportUnary})
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := c.Queue(engine.NS("acme", "prod"), "q").ClaimWait(cctx, "w", time.Minute, 1)
	wantErr(t, "a wait past its deadline", err, context.DeadlineExceeded)
	if c.r.eps.current() != srv.url {
		t.Fatalf("the client moved to %s after a long poll ended with its deadline", c.r.eps.current())
	}
}
