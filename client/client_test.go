package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/enginetest"
	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/internal/vfs/errorfs"
	"github.com/docketdb/docket/server"
	"github.com/docketdb/docket/worker"
)

var quiet = slog.New(slog.DiscardHandler)

// served is a server on 127.0.0.1 over db.
type served struct {
	url  string
	addr string
	s    *server.Server
	stop func() // drains and waits for Serve to return
}

// serve serves db on addr ("127.0.0.1:0" for any port) until the test ends
// or stop is called. wrap, if set, wraps the server's routes.
func serve(t testing.TB, db engine.API, addr string, opts server.Options, wrap func(http.Handler) http.Handler) *served {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	s := server.New(db, opts)
	var h http.Handler = s.Mux()
	if wrap != nil {
		h = wrap(h)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Serve(ctx, s, server.NewHTTPServer(h, nil), ln, 5*time.Second) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return &served{url: "http://" + ln.Addr().String(), addr: ln.Addr().String(), s: s, stop: stop}
}

func memDB(t *testing.T, opts engine.Options) *engine.DB {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	db, err := engine.OpenInMemory(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func dial(t *testing.T, url string, opts Options) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// must returns v, failing the test if err is set: must(f())(t).
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func wantErr(t *testing.T, what string, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s: %v (%T); want errors.Is %v", what, err, err, sentinel)
	}
}

// exercise runs every method of engine.API on api and checks the answers;
// it runs on an in-process DB and on a client of a server over an
// identical DB, so both must behave alike. It returns a transcript of what
// it saw (ids, states, bytes, error messages) for the two to be compared.
func exercise(t *testing.T, api engine.API) []string {
	ctx := context.Background()
	var log []string
	note := func(format string, args ...any) { log = append(log, fmt.Sprintf(format, args...)) }
	ns := engine.NS("acme", "prod")
	q := api.Queue(ns, "emails")
	if q.Namespace() != ns || q.Name() != "emails" {
		t.Fatalf("handle names %v %q", q.Namespace(), q.Name())
	}
	kv := api.KV(ns)
	if kv.Namespace() != ns {
		t.Fatal("kv namespace")
	}

	// Enqueue: payload bytes kept exactly (a big integer, spacing), options,
	// idempotency, the outbox op.
	payload := []byte(`{"to": "a@b", "n": 123456789012345678901234567890}`)
	e1 := must(q.Enqueue(ctx, engine.Task{Payload: payload, Kind: "mail", Priority: 9, MaxAttempts: 2,
		IdempotencyKey: "welcome-1", Headers: map[string]string{"trace": "t1"}, BackoffBase: time.Millisecond},
		engine.Set("sent/1", []byte{0, 0xff, 'x'})))(t)
	again := must(q.Enqueue(ctx, engine.Task{Payload: []byte(`1`), IdempotencyKey: "welcome-1"}))(t)
	if !again.Deduplicated || again.ID != e1.ID {
		t.Fatalf("idempotent enqueue: %+v after %+v", again, e1)
	}
	batch := must(q.EnqueueBatch(ctx, []engine.Task{{Payload: []byte(`"b1"`)}, {Payload: []byte(`"b2"`), Delay: time.Hour}, {}}))(t)
	note("enqueued %v %v %v", e1, again, batch)
	counts := must(q.Counts(ctx))(t)
	if counts.Ready != 3 || counts.Scheduled != 1 {
		t.Fatalf("counts %+v", counts)
	}
	note("counts %+v", counts)

	// Claim: priority first, the payload byte for byte, headers.
	ls := must(q.Claim(ctx, "w1", time.Minute, 2))(t)
	if len(ls) != 2 || ls[0].ID != e1.ID || string(ls[0].Payload) != string(payload) || ls[0].Headers["trace"] != "t1" ||
		ls[0].Kind != "mail" || ls[0].Attempt != 1 || ls[0].MaxAttempts != 2 || ls[0].Owner != "w1" || ls[0].Namespace != ns ||
		ls[0].Queue != "emails" || ls[0].Secret == 0 || ls[0].Deadline.IsZero() || ls[0].Deadline.Location() != time.UTC {
		t.Fatalf("claimed %+v", ls)
	}
	note("claimed %d %d attempt %d payload %s", ls[0].ID, ls[1].ID, ls[0].Attempt, ls[0].Payload)

	// Heartbeat updates the lease held; a forged secret is refused.
	l := ls[0]
	before := l.Deadline
	if err := q.Heartbeat(ctx, &l, 2*time.Minute, []byte(`{"pct":50}`)); err != nil {
		t.Fatal(err)
	}
	if !l.Deadline.After(before) || string(l.Progress) != `{"pct":50}` {
		t.Fatalf("heartbeat left the lease at %v %q", l.Deadline, l.Progress)
	}
	forged := l
	forged.Secret++
	err := q.Heartbeat(ctx, &forged, time.Minute, nil)
	wantErr(t, "forged heartbeat", err, engine.ErrLeaseLost)
	note("forged: %v", err)
	wantErr(t, "nil lease", q.Heartbeat(ctx, nil, time.Minute, nil), engine.ErrInvalid)
	// Another queue's handle: invalid, naming both queues, on either side.
	err = second(api.Queue(q.Namespace(), "elsewhere").Complete(ctx, l, engine.Done{}))
	wantErr(t, "a lease on another queue's handle", err, engine.ErrInvalid)
	note("another queue: %v", err)
	info := must(q.Get(ctx, l.ID))(t)
	if info.State != engine.InFlight || string(info.Progress) != `{"pct":50}` || info.Owner != "w1" || info.IdempotencyKey != "welcome-1" {
		t.Fatalf("get %+v", info)
	}

	// Complete with a result, a KV write and a follow-up, in one commit.
	tx := must(q.Complete(ctx, l, engine.Done{Result: []byte(`{"ok":true}`), Ops: []engine.Op{engine.Set("done/1", []byte("y"))},
		FollowUps: []engine.FollowUp{{Queue: "audit", Task: engine.Task{Payload: []byte(`{"of":1}`)}}}}))(t)
	if tx.Version == 0 || len(tx.Enqueued) != 1 {
		t.Fatalf("complete: %+v", tx)
	}
	note("complete: %d follow-ups", len(tx.Enqueued))
	_, err = q.Complete(ctx, l, engine.Done{})
	wantErr(t, "second complete", err, engine.ErrLeaseLost)
	note("second complete: %v", err)
	audit := must(api.Queue(ns, "audit").Get(ctx, tx.Enqueued[0].ID))(t)
	if string(audit.Payload) != `{"of":1}` {
		t.Fatalf("follow-up %+v", audit)
	}

	// CompleteBatch: each lease on its own.
	errs := must(q.CompleteBatch(ctx, []engine.Lease{ls[1], l}))(t)
	if len(errs) != 2 || errs[0] != nil || !errors.Is(errs[1], engine.ErrLeaseLost) {
		t.Fatalf("complete batch: %v", errs)
	}
	note("batch: %v %v", errs[0], errs[1])

	// Fail (retry, then dead), List the dead letters, Redrive.
	ls = must(q.Claim(ctx, "w2", time.Minute, 1))(t)
	if len(ls) != 1 {
		t.Fatalf("claim: %v", ls)
	}
	// An error text of 120 KiB, over what a server takes in a string: the
	// task keeps its first 8 KiB, in process and over the network alike.
	boom := "boom " + strings.Repeat("€", 40_000)
	if err := q.Fail(ctx, ls[0], engine.Failure{Err: boom, RetryAfter: time.Hour}); err != nil {
		t.Fatal(err)
	}
	failed := must(q.Get(ctx, ls[0].ID))(t)
	if failed.State != engine.Scheduled || failed.LastError != engine.ErrorText(boom) || len(failed.LastError) < engine.MaxErrorBytes-3 {
		t.Fatalf("failed task %v, last error of %d bytes", failed.State, len(failed.LastError))
	}
	if err := q.RunNow(ctx, failed.ID); err != nil {
		t.Fatal(err)
	}
	ls = must(q.Claim(ctx, "w2", time.Minute, 1))(t)
	if len(ls) != 1 || ls[0].ID != failed.ID || ls[0].Attempt != 2 {
		t.Fatalf("claim after RunNow: %+v", ls)
	}
	if err := q.Fail(ctx, ls[0], engine.Failure{Err: "fatal", Permanent: true}); err != nil {
		t.Fatal(err)
	}
	dead := must(q.List(ctx, engine.ListOptions{State: engine.Dead}))(t)
	if len(dead.Tasks) != 1 || dead.Tasks[0].ID != failed.ID || dead.Next != "" {
		t.Fatalf("dead letters %+v", dead)
	}
	if err := q.Redrive(ctx, failed.ID); err != nil {
		t.Fatal(err)
	}
	if n := must(q.RedriveAll(ctx))(t); n != 0 {
		t.Fatalf("RedriveAll after Redrive: %d", n)
	}
	must(q.EnqueueBatch(ctx, []engine.Task{{Priority: 1}, {}}))(t)
	page := must(q.List(ctx, engine.ListOptions{State: engine.Ready, Limit: 1}))(t)
	if len(page.Tasks) != 1 || page.Next == "" {
		t.Fatalf("page 1: %+v", page)
	}
	page2 := must(q.List(ctx, engine.ListOptions{State: engine.Ready, Limit: 1, Cursor: page.Next}))(t)
	if len(page2.Tasks) != 1 || page2.Tasks[0].ID == page.Tasks[0].ID {
		t.Fatalf("page 2: %+v", page2)
	}
	note("pages %d %d", page.Tasks[0].ID, page2.Tasks[0].ID)

	// Snooze, Cancel, not found.
	ls = must(q.Claim(ctx, "w3", time.Minute, 1))(t)
	if err := q.Snooze(ctx, ls[0], time.Hour); err != nil {
		t.Fatal(err)
	}
	if s := must(q.Get(ctx, ls[0].ID))(t); s.State != engine.Scheduled || s.Attempts != ls[0].Attempt-1 {
		t.Fatalf("snoozed %+v", s)
	}
	if err := q.Cancel(ctx, ls[0].ID); err != nil {
		t.Fatal(err)
	}
	_, err = q.Get(ctx, ls[0].ID)
	wantErr(t, "get a cancelled task", err, engine.ErrNotFound)
	note("not found: %v", err)
	wantErr(t, "cancel twice", q.Cancel(ctx, ls[0].ID), engine.ErrNotFound)
	note("redrive a ready task: %v", q.Redrive(ctx, page2.Tasks[0].ID))

	// Bad input: the engine's ErrInvalid and message, unchanged.
	for _, c := range []struct {
		what string
		err  error
	}{
		{"payload", second(q.Enqueue(ctx, engine.Task{Payload: []byte("{")}))},
		{"lease", second(q.Claim(ctx, "w", 0, 1))},
		{"owner", second(q.ClaimWait(ctx, "", time.Minute, 1))},
		{"list limit", second(q.List(ctx, engine.ListOptions{State: engine.Ready, Limit: -1}))},
		{"list state", second(q.List(ctx, engine.ListOptions{}))},
		{"queue name", second(api.Queue(ns, "").Counts(ctx))},
		{"namespace", second(api.Queue(engine.NS("", "x"), "q").Counts(ctx))},
		{"kv key", second(kv.Get(ctx, ""))},
		{"zero op", second(kv.Commit(ctx, engine.Op{}))},
		{"max attempt", second(q.Enqueue(ctx, engine.Task{MaxAttempts: -1}))},
		{"batch size", second(q.EnqueueBatch(ctx, make([]engine.Task, engine.MaxBatch+1)))},
	} {
		what, err := c.what, c.err
		wantErr(t, what, err, engine.ErrInvalid)
		if what != "batch size" && what != "zero op" {
			note("%s: %v", what, err)
		}
	}

	// KV: versions, assertions, scans, deletes.
	e := must(kv.Get(ctx, "sent/1"))(t)
	if string(e.Value) != "\x00\xffx" || e.Version == 0 {
		t.Fatalf("kv entry %+v", e)
	}
	_, err = kv.Commit(ctx, engine.IfAbsent("sent/1"), engine.Set("x", nil))
	wantErr(t, "failed assertion", err, engine.ErrConflict)
	note("conflict: %v", err)
	res := must(kv.Commit(ctx, engine.IfVersion("sent/1", e.Version), engine.Delete("sent/1"), engine.Set("sent/2", []byte("2")),
		engine.Enqueue("emails", engine.Task{IdempotencyKey: "welcome-1"})))(t)
	if len(res.Enqueued) != 1 || !res.Enqueued[0].Deduplicated {
		t.Fatalf("commit %+v", res)
	}
	entries := must(kv.Scan(ctx, engine.ScanOptions{Prefix: "sent/"}))(t)
	if len(entries) != 1 || entries[0].Key != "sent/2" {
		t.Fatalf("scan %+v", entries)
	}
	_, err = kv.Get(ctx, "sent/1")
	wantErr(t, "deleted key", err, engine.ErrNotFound)
	note("kv: %d entries", len(entries))

	// EnqueueAsync, CompleteAndClaim and HeartbeatBatch, one commit each.
	pq := api.Queue(ns, "pipe")
	var pend []*engine.Pending
	for i := range 3 {
		pend = append(pend, pq.EnqueueAsync(ctx, engine.Task{Payload: []byte(fmt.Sprint(i))}))
	}
	for i, p := range pend {
		res, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		note("async %d: %+v", i, res)
	}
	_, err = pq.EnqueueAsync(ctx, engine.Task{Payload: []byte(`{`)}).Wait(ctx)
	wantErr(t, "async payload", err, engine.ErrInvalid)
	note("async payload: %v", err)
	pl := must(pq.Claim(ctx, "p1", time.Minute, 1))(t)
	ctx2, next, err := pq.CompleteAndClaim(ctx, pl[0], engine.Done{Result: []byte(`1`),
		FollowUps: []engine.FollowUp{{Queue: "pipe", Task: engine.Task{Kind: "next"}}}}, "p2", time.Minute, 5)
	if err != nil || len(next) != 2 || next[0].Owner != "p2" || next[0].Secret == 0 || len(ctx2.Enqueued) != 1 {
		t.Fatalf("complete and claim: %+v %+v %v", ctx2, next, err)
	}
	note("complete and claim: %d enqueued, claimed %d %d", len(ctx2.Enqueued), next[0].ID, next[1].ID)
	_, none, err := pq.CompleteAndClaim(ctx, pl[0], engine.Done{}, "p2", time.Minute, 5)
	wantErr(t, "complete and claim twice", err, engine.ErrLeaseLost)
	if len(none) != 0 {
		t.Fatalf("a refused complete and claim claimed %v", none)
	}
	note("complete and claim twice: %v", err)
	_, _, err = pq.CompleteAndClaim(ctx, next[0], engine.Done{}, "p2", time.Minute, 0)
	wantErr(t, "complete and claim max 0", err, engine.ErrInvalid)
	note("complete and claim max 0: %v", err)
	a, b, gone := next[0], next[1], pl[0]
	was := a.Deadline
	herrs := must(pq.HeartbeatBatch(ctx, []*engine.Lease{&a, &gone, &b}, time.Hour))(t)
	if len(herrs) != 3 || herrs[0] != nil || herrs[2] != nil || !errors.Is(herrs[1], engine.ErrLeaseLost) ||
		!a.Deadline.After(was) || !a.Deadline.Equal(b.Deadline) || !gone.Deadline.Equal(pl[0].Deadline) {
		t.Fatalf("heartbeat batch: %v, deadlines %v %v %v", herrs, a.Deadline, b.Deadline, gone.Deadline)
	}
	note("heartbeat batch: %v %v %v", herrs[0], herrs[1], herrs[2])
	_, err = pq.HeartbeatBatch(ctx, []*engine.Lease{&a, nil}, time.Hour)
	wantErr(t, "heartbeat batch nil", err, engine.ErrInvalid)
	_, err = pq.HeartbeatBatch(ctx, []*engine.Lease{&a}, 0)
	wantErr(t, "heartbeat batch extend", err, engine.ErrInvalid)
	note("heartbeat batch extend: %v", err)

	// ClaimWait: woken by an enqueue; bounded by the caller's deadline.
	wq := api.Queue(ns, "wait")
	got := make(chan []engine.Lease, 1)
	go func() {
		ls, err := wq.ClaimWait(ctx, "w4", time.Minute, 1)
		if err != nil {
			t.Error(err)
		}
		got <- ls
	}()
	woke := must(wq.Enqueue(ctx, engine.Task{Payload: []byte(`"wake"`)}))(t)
	if ls := <-got; len(ls) != 1 || ls[0].ID != woke.ID {
		t.Fatalf("ClaimWait woke with %+v", ls)
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	_, err = wq.ClaimWait(dctx, "w4", time.Minute, 1)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ClaimWait past its deadline: %v", err)
	}

	// Dependencies: a batch whose tasks wait on earlier ones and on an id,
	// what Get, List and Counts say of them, release by completion, the
	// refusals.
	dq := api.Queue(ns, "deps")
	root := must(dq.Enqueue(ctx, engine.Task{Payload: []byte(`"root"`)}))(t)
	fan := must(dq.EnqueueBatch(ctx, []engine.Task{
		{DependsOn: []uint64{root.ID}},
		{DependsOn: []uint64{root.ID}, OnParentFailure: engine.RunOnFailure},
		{DependsOnSibling: []int{0, 1}, OnParentFailure: engine.WaitOnFailure, Delay: time.Hour},
	}))(t)
	sink := must(dq.Get(ctx, fan[2].ID))(t)
	if sink.State != engine.Waiting || !slices.Equal(sink.WaitingOn, []uint64{fan[0].ID, fan[1].ID}) ||
		sink.OnParentFailure != engine.WaitOnFailure {
		t.Fatalf("waiting task %+v", sink)
	}
	if r := must(dq.Get(ctx, root.ID))(t); !slices.Equal(r.Dependents, []uint64{fan[0].ID, fan[1].ID}) {
		t.Fatalf("dependents %v", r.Dependents)
	}
	waiting := must(dq.List(ctx, engine.ListOptions{State: engine.Waiting}))(t)
	if dc := must(dq.Counts(ctx))(t); dc.Waiting != 3 || len(waiting.Tasks) != 3 || len(waiting.Tasks[2].WaitingOn) != 2 {
		t.Fatalf("waiting: %+v %+v", dc, waiting)
	}
	rl := must(dq.Claim(ctx, "w5", time.Minute, 5))(t)
	if len(rl) != 1 || rl[0].ID != root.ID {
		t.Fatalf("claimed past a dependency: %+v", rl)
	}
	must(dq.Complete(ctx, rl[0], engine.Done{FollowUps: []engine.FollowUp{{Queue: "deps",
		Task: engine.Task{DependsOn: []uint64{fan[2].ID, root.ID}}}}}))(t)
	note("after the root: %+v", must(dq.Counts(ctx))(t))
	_, err = dq.Enqueue(ctx, engine.Task{DependsOn: []uint64{1 << 40}})
	wantErr(t, "unknown dependency", err, engine.ErrInvalid)
	note("unknown dependency: %v", err)
	_, err = dq.EnqueueBatch(ctx, []engine.Task{{DependsOnSibling: []int{0}}})
	wantErr(t, "sibling after", err, engine.ErrInvalid)
	note("sibling: %v", err)
	exerciseControls(t, api, note)
	exercisePartitions(t, api, note)

	qs := must(api.Queues(ctx))(t)
	var names []string
	for _, qi := range qs {
		names = append(names, fmt.Sprintf("%s/%s ready=%d inflight=%d", qi.Namespace, qi.Name, qi.Counts.Ready, qi.Counts.InFlight))
	}
	note("queues %v", names)
	return log
}

func second[T any](_ T, err error) error { return err }

// TestClientBehavesLikeTheDB runs the same calls on a DB in process and
// through a client on a server over another DB: the transcripts match,
// error messages included, so the client has the DB's methods, options
// and errors.
func TestClientBehavesLikeTheDB(t *testing.T) {
	t.Parallel()
	local := exercise(t, memDB(t, engine.Options{}))
	srv := serve(t, memDB(t, engine.Options{}), "127.0.0.1:0", server.Options{}, nil)
	remote := exercise(t, dial(t, srv.url, Options{}))
	if !slices.Equal(local, remote) {
		t.Fatalf("in process:\n%s\nover the network:\n%s", strings.Join(local, "\n"), strings.Join(remote, "\n"))
	}
	// And in JSON, through the server's JSON codec.
	srvJSON := serve(t, memDB(t, engine.Options{}), "127.0.0.1:0", server.Options{}, nil)
	if js := exercise(t, dial(t, srvJSON.url, Options{JSON: true})); !slices.Equal(local, js) {
		t.Fatalf("in process:\n%s\nover JSON:\n%s", strings.Join(local, "\n"), strings.Join(js, "\n"))
	}
}

// tokens returns a tokens table with callers root (*/*:all), worker
// (acme/prod:enqueue+work+read) and reader (acme/prod:read), and their
// tokens.
func tokens(t *testing.T) (*server.Tokens, map[string]string) {
	t.Helper()
	tok := map[string]string{}
	var lines []string
	for name, grants := range map[string][]string{"root": {"*/*:all"}, "worker": {"acme/prod:enqueue+work+read"}, "reader": {"acme/prod:read"}} {
		tk, line, err := server.NewToken(name, grants...)
		if err != nil {
			t.Fatal(err)
		}
		tok[name], lines = tk, append(lines, line)
	}
	tab, err := server.ParseTokens(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return tab, tok
}

func TestSentinelsAcrossTheNetwork(t *testing.T) {
	t.Parallel()
	tab, tok := tokens(t)
	db := memDB(t, engine.Options{Secure: true, Authorizer: tab})
	srv := serve(t, db, "127.0.0.1:0", server.Options{Tokens: tab}, nil)
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	reader := dial(t, srv.url, Options{Token: tok["reader"]})
	worker := dial(t, srv.url, Options{Token: tok["worker"]})
	root := dial(t, srv.url, Options{Token: tok["root"]})

	// Permission: the engine's message, naming what is missing.
	_, err := reader.Queue(ns, "q").Enqueue(ctx, engine.Task{})
	local := second(db.As(engine.Caller{ID: "reader"}).Queue(ns, "q").Enqueue(ctx, engine.Task{}))
	wantErr(t, "reader enqueues", err, engine.ErrPermission)
	if err.Error() != local.Error() || !strings.Contains(err.Error(), "enqueue") {
		t.Fatalf("remote %q, in process %q", err, local)
	}
	wantErr(t, "worker cancels", worker.Queue(ns, "q").Cancel(ctx, 1), engine.ErrPermission)
	wantErr(t, "worker's Stats", second(worker.Stats(ctx)), engine.ErrPermission)

	// Not found, lease lost, conflict, invalid.
	wantErr(t, "get", second(root.Queue(ns, "q").Get(ctx, 99)), engine.ErrNotFound)
	wantErr(t, "complete a forged lease", second(worker.Queue(ns, "q").Complete(ctx, engine.Lease{ID: 1, Token: 1}, engine.Done{})), engine.ErrLeaseLost)
	wantErr(t, "conflict", second(root.KV(ns).Commit(ctx, engine.IfExists("nope"))), engine.ErrConflict)
	wantErr(t, "invalid", second(worker.Queue(ns, "q").Claim(ctx, "w", -time.Second, 1)), engine.ErrInvalid)

	// Unauthenticated: at Dial already.
	_, err = Dial(ctx, srv.url, Options{Token: "dk_nope", MaxRetries: 1})
	wantErr(t, "a wrong token", err, ErrUnauthenticated)

	// Admin calls for a caller with admin on */*.
	must(root.Queue(ns, "q").Enqueue(ctx, engine.Task{}))(t)
	if st := must(root.Stats(ctx))(t); st.Tasks != 1 || st.Denied == 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := root.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if err := root.Verify(ctx); err != nil {
		t.Fatal(err)
	}

	// Closed: the client's own.
	if err := reader.Close(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "a call after Close", second(reader.Queue(ns, "q").Counts(ctx)), engine.ErrClosed)
	wantErr(t, "Close twice", reader.Close(), engine.ErrClosed)
}

func TestFailedAndReadOnlyServers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	dir := filepath.Join(t.TempDir(), "data")
	var failing atomic.Bool
	opts := engine.Options{Logger: quiet}
	enginetest.FS(&opts, errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failing.Load() && op.Kind == errorfs.OpSync && strings.Contains(op.Path, "wal") {
			return errors.New("disk on fire")
		}
		return nil
	})))
	db, err := engine.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, db, "127.0.0.1:0", server.Options{Ready: func(context.Context) error { return db.Err() }}, nil)
	c := dial(t, srv.url, Options{MaxRetries: 1})
	q := c.Queue(ns, "q")
	must(q.Enqueue(ctx, engine.Task{}))(t)
	failing.Store(true)
	_, err = q.Enqueue(ctx, engine.Task{})
	wantErr(t, "an enqueue whose fsync fails", err, engine.ErrFailed)
	wantErr(t, "a read after the failure", second(q.Counts(ctx)), engine.ErrFailed)
	if h := must(c.Health(ctx))(t); h.Ready || !strings.Contains(h.Reason, "failed") {
		t.Fatalf("health of a failed engine: %+v", h)
	}
	srv.stop()
	db.Close()

	ro, err := engine.OpenReadOnly(dir, engine.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	srv = serve(t, ro, "127.0.0.1:0", server.Options{}, nil)
	c = dial(t, srv.url, Options{})
	wantErr(t, "an enqueue on a read-only DB", second(c.Queue(ns, "q").Enqueue(ctx, engine.Task{})), engine.ErrReadOnly)
	// The enqueue whose fsync failed may or may not be on disk (it was
	// written): at least the acknowledged one is.
	if n := must(c.Queue(ns, "q").Counts(ctx))(t); n.Ready < 1 {
		t.Fatalf("read-only counts %+v", n)
	}
}

// cutAnswers wraps a handler: for a procedure in cut, the call runs (it
// takes effect) but its connection is closed before the answer, up to n
// times.
func cutAnswers(n *atomic.Int32, procs ...string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !slices.Contains(procs, r.URL.Path) || n.Add(-1) < 0 {
				next.ServeHTTP(w, r)
				return
			}
			next.ServeHTTP(discard{header: http.Header{}}, r)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		})
	}
}

type discard struct{ header http.Header }

func (d discard) Header() http.Header         { return d.header }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}

func TestLostAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	db := memDB(t, engine.Options{})
	var cuts atomic.Int32
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, cutAnswers(&cuts,
		"/docket.v1.Queues/Enqueue", "/docket.v1.Queues/Complete", "/docket.v1.Queues/Cancel", "/docket.v1.Queues/Get"))
	c := dial(t, srv.url, Options{Transport: TransportUnary, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
	q := c.Queue(ns, "q")
	local := db.Queue(ns, "q")

	// An enqueue without a key is not repeated: its outcome is unknown
	// (it did take effect).
	cuts.Store(1)
	_, err := q.Enqueue(ctx, engine.Task{Payload: []byte(`"a"`)})
	wantErr(t, "an enqueue whose answer is lost", err, ErrOutcomeUnknown)
	if n := must(local.Counts(ctx))(t); n.Ready != 1 {
		t.Fatalf("the enqueue did not take effect: %+v", n)
	}
	// With a key it is repeated, and the repeat finds the first try's task.
	cuts.Store(1)
	e := must(q.Enqueue(ctx, engine.Task{Payload: []byte(`"b"`), IdempotencyKey: "k"}))(t)
	if !e.Deduplicated {
		t.Fatalf("the repeat did not find the first try's task: %+v", e)
	}
	if n := must(local.Counts(ctx))(t); n.Ready != 2 {
		t.Fatalf("a repeated enqueue enqueued twice: %+v", n)
	}
	// A read is repeated.
	cuts.Store(1)
	if got := must(q.Get(ctx, e.ID))(t); string(got.Payload) != `"b"` {
		t.Fatalf("get %+v", got)
	}
	// A fenced call is repeated; the repeat of a completion that took
	// effect answers ErrLeaseLost, saying the first try may have.
	ls := must(q.Claim(ctx, "w", time.Minute, 2))(t)
	cuts.Store(1)
	_, err = q.Complete(ctx, ls[0], engine.Done{})
	wantErr(t, "a completion whose answer is lost", err, engine.ErrLeaseLost)
	if !strings.Contains(err.Error(), "may have taken effect") || !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("the error does not say the first try may have taken effect: %v", err)
	}
	if _, err := local.Get(ctx, ls[0].ID); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the completion did not take effect: %v", err)
	}
	// Cancel is not repeated.
	cuts.Store(1)
	wantErr(t, "a cancel whose answer is lost", q.Cancel(ctx, ls[1].ID), ErrOutcomeUnknown)
}

func TestReconnectsWithBackoff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := memDB(t, engine.Options{})
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, nil)
	c := dial(t, srv.url, Options{BackoffBase: time.Millisecond, BackoffMax: 10 * time.Millisecond})
	q := c.Queue(engine.NS("acme", "prod"), "q")
	must(q.Enqueue(ctx, engine.Task{}))(t)
	srv.stop()

	// Nothing listens: the client backs off and tries again; the server
	// comes back during the first wait.
	var slept []time.Duration
	var once sync.Once
	c.r.sleep = func(ctx context.Context, d time.Duration) error {
		slept = append(slept, d)
		once.Do(func() { serve(t, db, srv.addr, server.Options{}, nil) })
		return sleepCtx(ctx, d)
	}
	if n := must(q.Counts(ctx))(t); n.Ready != 1 {
		t.Fatalf("counts after the restart %+v", n)
	}
	if len(slept) == 0 {
		t.Fatal("the call did not back off while the server was away")
	}
	// Not even an enqueue without a key fails: a refused connection means
	// the call was never sent.
	c.r.sleep = sleepCtx
	must(q.Enqueue(ctx, engine.Task{}))(t)

	// With no server at all, the retries run out with ErrUnavailable, and
	// a context ends them sooner.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + dead.Addr().String()
	dead.Close()
	_, err = Dial(ctx, deadURL, Options{MaxRetries: 2, BackoffBase: time.Millisecond})
	wantErr(t, "dial with nothing listening", err, ErrUnavailable)
	sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = Dial(sctx, deadURL, Options{MaxRetries: 1000, BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond})
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("dial within a 50 ms context: %v after %v", err, time.Since(start))
	}
}

func TestClaimWaitAcrossDrainAndClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	db := memDB(t, engine.Options{})
	polls := make(chan struct{}, 100)
	srv := serve(t, db, "127.0.0.1:0", server.Options{MaxWait: time.Hour}, arrivals(polls))
	c := dial(t, srv.url, Options{Transport: TransportUnary, MaxRetries: 2, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
	q := c.Queue(ns, "q")

	// Short polls: an empty answer is followed by another poll, so the
	// wait goes on until work comes.
	short := dial(t, srv.url, Options{Transport: TransportUnary, PollWait: 5 * time.Millisecond})
	got := make(chan error, 1)
	go func() {
		ls, err := short.Queue(ns, "q").ClaimWait(ctx, "w", time.Minute, 1)
		if err == nil && len(ls) != 1 {
			err = fmt.Errorf("%d leases", len(ls))
		}
		got <- err
	}()
	for range 3 { // two polls have come and gone empty
		<-polls
	}
	must(db.Queue(ns, "q").Enqueue(ctx, engine.Task{}))(t)
	if err := <-got; err != nil {
		t.Fatal(err)
	}

	// Close ends a waiting claim with ErrClosed.
	go func() { _, err := q.ClaimWait(ctx, "w", time.Minute, 1); got <- err }()
	c.Close()
	wantErr(t, "a wait when the client closes", <-got, engine.ErrClosed)

	// A drain ends a waiting claim; the client asks again, finds no server
	// that takes it, and says so.
	c2 := dial(t, srv.url, Options{Transport: TransportUnary, MaxRetries: 2, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
	go func() { _, err := c2.Queue(ns, "q").ClaimWait(ctx, "w", time.Minute, 1); got <- err }()
	<-polls
	srv.stop()
	err := <-got
	if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("a wait whose server drained and stopped: %v", err)
	}
	if errors.Is(err, engine.ErrClosed) {
		t.Fatalf("a server going away looks like a closed client: %v", err)
	}
}

// arrivals counts the ClaimWait polls that reach a server.
func arrivals(ch chan<- struct{}) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/docket.v1.Queues/ClaimWait" {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// TestWorkerRunsOverTheClient runs the worker runtime, unchanged, on a
// client: batches of claims, heartbeats extending a running task's lease,
// progress, a retried failure, follow-ups and batch completions all go over
// the network, and every task completes once.
func TestWorkerRunsOverTheClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	db := memDB(t, engine.Options{})
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, nil)
	c := dial(t, srv.url, Options{})

	const n = 60
	const lease = time.Second
	var mu sync.Mutex
	done := map[uint64]int{}
	failed := map[uint64]bool{}
	audits := 0
	finished := make(chan struct{})
	check := func() {
		if len(done) == n && audits == n/3 {
			close(finished)
		}
	}
	w := worker.New(c, worker.Options{Logger: quiet, ShutdownGrace: 5 * time.Second})
	w.HandleFunc(ns, "jobs", func(ctx context.Context, t *worker.Task) error {
		var p struct{ N int }
		if err := t.Unmarshal(&p); err != nil {
			return worker.Permanent(err)
		}
		if p.N == 1 {
			// Work on until heartbeats over the network have extended the
			// lease three times.
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			last, moved := t.Deadline(), 0
			for moved < 3 {
				select {
				case <-tick.C:
				case <-ctx.Done():
					return ctx.Err()
				}
				if dl := t.Deadline(); dl.After(last) {
					last, moved = dl, moved+1
				}
			}
		}
		if p.N%5 == 0 && t.Attempt == 1 {
			mu.Lock()
			failed[t.ID] = true
			mu.Unlock()
			return errors.New("the first attempt fails")
		}
		if p.N%3 == 0 {
			if err := t.Progress(ctx, []byte(`{"half":true}`)); err != nil {
				return err
			}
			t.FollowUp("audit", engine.Task{Payload: []byte(fmt.Sprintf(`{"of":%d}`, p.N))})
		}
		mu.Lock()
		done[t.ID]++
		check()
		mu.Unlock()
		return nil
	}, worker.QueueOptions{Concurrency: 3, ClaimBatch: 4, Lease: lease, HeartbeatEvery: lease / 20})
	w.HandleFunc(ns, "audit", func(ctx context.Context, t *worker.Task) error {
		mu.Lock()
		audits++
		check()
		mu.Unlock()
		return nil
	}, worker.QueueOptions{})
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	tasks := make([]engine.Task, n)
	for i := range tasks {
		tasks[i] = engine.Task{Payload: []byte(fmt.Sprintf(`{"n":%d}`, i+1)), BackoffBase: time.Millisecond}
	}
	ids := must(c.Queue(ns, "jobs").EnqueueBatch(ctx, tasks))(t)
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		mu.Lock()
		t.Fatalf("after 30 s: %d of %d done, %d audits", len(done), n, audits)
	}
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range ids {
		if done[e.ID] != 1 {
			t.Errorf("task %d ran to success %d times", e.ID, done[e.ID])
		}
	}
	if len(failed) != n/5 {
		t.Errorf("%d first attempts failed; want %d", len(failed), n/5)
	}
	for _, q := range []string{"jobs", "audit"} {
		if cnt := must(db.Queue(ns, q).Counts(ctx))(t); cnt != (engine.Counts{}) {
			t.Errorf("%s after the run: %+v", q, cnt)
		}
	}
	if st := db.Stats(); st.Reclaimed != 0 || st.LeaseLost != 0 {
		t.Errorf("leases expired or were lost over the network: %+v", st)
	}
}

// TestCancelReachesARemoteHandlerAtItsNextHeartbeat: the client has no
// engine.LeaseWatcher (the server has no way to tell it of a cancellation
// as it happens), so a worker on it learns that its task was cancelled
// from the next heartbeat, which the server refuses: the handler's context
// is then cancelled with a cause wrapping engine.ErrLeaseLost, and nothing
// it did is committed.
func TestCancelReachesARemoteHandlerAtItsNextHeartbeat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	db := memDB(t, engine.Options{})
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, nil)
	c := dial(t, srv.url, Options{})
	if _, ok := any(c).(engine.LeaseWatcher); ok {
		t.Fatal("the client claims to be a LeaseWatcher; update the worker's and the package's documentation")
	}
	started, cause := make(chan uint64, 1), make(chan error, 1)
	w := worker.New(c, worker.Options{Logger: quiet, ShutdownGrace: 5 * time.Second})
	w.HandleFunc(ns, "q", func(ctx context.Context, t *worker.Task) error {
		started <- t.ID
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil
	}, worker.QueueOptions{Lease: 10 * time.Second, HeartbeatEvery: 50 * time.Millisecond})
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx)
	id := must(c.Queue(ns, "q").Enqueue(ctx, engine.Task{}))(t).ID
	select {
	case got := <-started:
		if got != id {
			t.Fatalf("ran task %d, want %d", got, id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the task did not start")
	}
	if err := c.Queue(ns, "q").Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-cause:
		wantErr(t, "the cause of the cancelled handler's context", err, engine.ErrLeaseLost)
	case <-time.After(10 * time.Second):
		t.Fatal("the handler of a cancelled task was not stopped")
	}
	if _, err := db.Queue(ns, "q").Get(ctx, id); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the cancelled task: %v", err)
	}
}

// logWatch is a slog handler that sends each record's message to msgs
// (dropping it when nobody takes it).
type logWatch struct{ msgs chan string }

func (l logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (l logWatch) Handle(_ context.Context, r slog.Record) error {
	select {
	case l.msgs <- r.Message:
	default:
	}
	return nil
}
func (l logWatch) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logWatch) WithGroup(string) slog.Handler      { return l }

// TestWorkerSurvivesAServerRestart: a worker on a client whose server
// stops while a handler runs keeps going: the completion, which finds no
// server (ErrUnavailable once the client's own retries run out), is made
// again with backoff until the server is back and takes it; claims go on
// after the restart, and the Worker never stops by itself.
func TestWorkerSurvivesAServerRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	db := memDB(t, engine.Options{})
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, nil)
	c := dial(t, srv.url, Options{MaxRetries: 2, BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond, PollWait: time.Second})
	logs := logWatch{make(chan string, 64)}
	started, finish := make(chan uint64, 2), make(chan struct{})
	w := worker.New(c, worker.Options{Logger: slog.New(logs), ShutdownGrace: 5 * time.Second})
	w.HandleFunc(ns, "q", func(ctx context.Context, t *worker.Task) error {
		started <- t.ID
		if t.Attempt == 1 && t.Kind == "slow" {
			<-finish
		}
		return nil
	}, worker.QueueOptions{Lease: time.Minute})
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx) // when the test fails early
	first := must(c.Queue(ns, "q").Enqueue(ctx, engine.Task{Kind: "slow"}))(t).ID
	if got := <-started; got != first {
		t.Fatalf("ran %d, want %d", got, first)
	}
	srv.stop()
	close(finish)
	waitLog := func(msg string) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case m := <-logs.msgs:
				if strings.Contains(m, msg) {
					return
				}
			case <-timeout:
				t.Fatalf("the worker never logged %q", msg)
			}
		}
	}
	waitLog("completing failed; retrying")
	serve(t, db, srv.addr, server.Options{}, nil)
	second := must(c.Queue(ns, "q").Enqueue(ctx, engine.Task{}))(t).ID
	select {
	case got := <-started:
		if got != second {
			t.Fatalf("after the restart ran %d, want %d", got, second)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the worker claimed nothing after the restart")
	}
	// One slot: it claimed the second task only once the first one's
	// outcome was committed.
	if _, err := db.Queue(ns, "q").Get(ctx, first); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the task completed across the restart: %v", err)
	}
	if err := w.Stop(ctx); err != nil {
		t.Fatalf("the worker: %v", err)
	}
	if _, err := db.Queue(ns, "q").Get(ctx, second); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the task after the restart: %v", err)
	}
	if st := db.Stats(); st.Retried != 0 || st.LeaseLost != 0 {
		t.Fatalf("the completion across the restart failed an attempt or lost its lease: %+v", st)
	}
}
