package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"testing"
	"time"

	"github.com/docketdb/docket/cluster"
	"github.com/docketdb/docket/cluster/clustertest"
	"github.com/docketdb/docket/engine"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

var (
	ns    = engine.NS("acme", "prod")
	t0    = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	quiet = slog.New(slog.NewTextHandler(io.Discard, nil))
)

// within returns a context that ends after d, cancelled with the test.
func within(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// singleNode starts a one-node cluster on raft's in-memory transport in
// dir and waits until it leads.
func singleNode(t *testing.T, dir string, clock engine.Clock) *cluster.Node {
	t.Helper()
	_, tr := raft.NewInmemTransport("")
	n, err := cluster.Start(cluster.Config{
		ID: "solo", Dir: dir, Transport: tr, Bootstrap: true, Logger: hclog.NewNullLogger(),
		Engine: engine.Options{Clock: clock, Logger: quiet},
		Raft: func(c *raft.Config) {
			c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if _, _, err := n.WaitLeader(within(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSingleNodeCluster: a cluster of one takes every call as a standalone
// DB does, and a restart rebuilds its state from the raft log and
// snapshots, to the same state hash.
func TestSingleNodeCluster(t *testing.T) {
	dir := t.TempDir()
	clock := engine.NewManualClock(t0)
	n := singleNode(t, dir, clock)
	api := n.API()
	q := api.Queue(ns, "q")
	ctx := within(t, 30*time.Second)
	res, err := q.Enqueue(ctx, engine.Task{Payload: []byte(`{"n":1}`), IdempotencyKey: "k"}, engine.Set("outbox", []byte("1")))
	if err != nil || res.ID != 1 {
		t.Fatalf("enqueue: %+v %v", res, err)
	}
	if dup, err := q.Enqueue(ctx, engine.Task{IdempotencyKey: "k"}); err != nil || !dup.Deduplicated || dup.ID != 1 {
		t.Fatalf("dedup: %+v %v", dup, err)
	}
	ls, err := q.Claim(ctx, "w", time.Minute, 5)
	if err != nil || len(ls) != 1 || ls[0].Token != 1 || ls[0].Secret == 0 {
		t.Fatalf("claim: %+v %v", ls, err)
	}
	forged := ls[0]
	forged.Secret++
	if _, err := q.Complete(ctx, forged, engine.Done{}); !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("forged complete: %v", err)
	}
	if err := q.Heartbeat(ctx, &ls[0], 2*time.Minute, []byte(`{"p":1}`)); err != nil || !ls[0].Deadline.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("heartbeat: %v %v", ls[0].Deadline, err)
	}
	tx, err := q.Complete(ctx, ls[0], engine.Done{FollowUps: []engine.FollowUp{{Queue: "next", Task: engine.Task{Delay: time.Second}}}})
	if err != nil || len(tx.Enqueued) != 1 || tx.Version == 0 {
		t.Fatalf("complete: %+v %v", tx, err)
	}
	// A ClaimWait parks (before its claim reaches the log), then an enqueue
	// wakes it.
	next := api.Queue(ns, "next")
	applied, _ := n.FSM().Applied()
	woke := make(chan []engine.Lease, 1)
	go func() {
		ls, err := next.ClaimWait(ctx, "w", time.Minute, 1)
		if err != nil {
			t.Error(err)
		}
		woke <- ls
	}()
	if err := clustertest.WaitApplied(n.FSM(), applied+1, time.Now().Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case ls := <-woke:
		t.Fatalf("ClaimWait returned %v with nothing due", ls)
	default:
	}
	now, err := next.Enqueue(ctx, engine.Task{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ls := <-woke:
		if len(ls) != 1 || ls[0].ID != now.ID {
			t.Fatalf("ClaimWait woke with %v, want task %d", ls, now.ID)
		}
	case <-ctx.Done():
		t.Fatal("ClaimWait did not wake on the enqueue")
	}
	clock.Advance(time.Second)
	if ls, err := next.Claim(ctx, "w", time.Minute, 1); err != nil || len(ls) != 1 || ls[0].ID != tx.Enqueued[0].ID {
		t.Fatalf("claim of the due follow-up: %v %v", ls, err)
	}
	if e, err := api.KV(ns).Get(ctx, "outbox"); err != nil || string(e.Value) != "1" {
		t.Fatalf("outbox key: %+v %v", e, err)
	}
	counts, err := next.Counts(ctx)
	if err != nil || counts.InFlight != 2 {
		t.Fatalf("counts: %+v %v", counts, err)
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if _, err := api.KV(ns).Commit(ctx, engine.Set("after", []byte("snapshot"))); err != nil {
		t.Fatal(err)
	}
	before, err := n.DB().StateHash()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = singleNode(t, dir, clock)
	// The log after the snapshot is applied once the node leads again and
	// commits in its term; a linearizable read waits for exactly that.
	if _, err := n.API().KV(ns).Get(ctx, "after"); err != nil {
		t.Fatalf("read after restart: %v", err)
	}
	if after, err := n.DB().StateHash(); err != nil || after != before {
		t.Fatalf("state after restart differs (%v)", err)
	}
}

// TestThreeNodesConverge: every node applies the same entries, and after a
// run over every write their state hashes and snapshot bytes are equal.
func TestThreeNodesConverge(t *testing.T) {
	clock := engine.NewManualClock(t0)
	m := clustertest.NewMesh(t, clustertest.MeshOptions{Engine: func(int) engine.Options { return engine.Options{Clock: clock} }})
	runWorkload(t, m, clock, 20)
	if err := m.Converge(20 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// leaderAPI returns the API of the mesh's current leader.
func leaderAPI(t *testing.T, m *clustertest.Mesh) engine.API {
	t.Helper()
	l, err := m.WaitLeader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return l.API()
}

// unavailable reports an error a caller of a cluster meets when leadership
// moves: the call did nothing (ErrNotLeader) or may have (ErrOutcomeUnknown).
func unavailable(err error) bool {
	return errors.Is(err, engine.ErrNotLeader) || errors.Is(err, engine.ErrOutcomeUnknown)
}

// runWorkload makes calls of every kind on the mesh's leader, n rounds of
// enqueues and four of claims. A call that meets a leadership change is
// skipped; anything else failing fails the test.
func runWorkload(t *testing.T, m *clustertest.Mesh, clock *engine.ManualClock, n int) {
	t.Helper()
	ctx := within(t, 60*time.Second)
	must := func(err error) {
		t.Helper()
		if err != nil && !unavailable(err) {
			t.Fatal(err)
		}
	}
	q := func() engine.Queue { return leaderAPI(t, m).Queue(ns, "work") }
	for i := range n {
		_, err := q().EnqueueBatch(ctx, []engine.Task{{Priority: i % 3, Headers: map[string]string{"b": "2", "a": "1"}},
			{Delay: time.Duration(i) * time.Second, IdempotencyKey: "k" + string(rune('a'+i))}}, engine.Set("batch", []byte{byte(i)}))
		must(err)
	}
	_, err := leaderAPI(t, m).KV(ns).Commit(ctx, engine.IfAbsent("nope"), engine.Set("x", []byte("1")))
	must(err)
	for round := range 4 {
		ls, err := q().Claim(ctx, "w", time.Minute, 8)
		must(err)
		for i, l := range ls {
			switch (i + round) % 4 {
			case 0:
				_, err = q().Complete(ctx, l, engine.Done{Ops: []engine.Op{engine.Set("done", []byte("y"))},
					FollowUps: []engine.FollowUp{{Queue: "follow", Task: engine.Task{}}}})
			case 1:
				err = q().Fail(ctx, l, engine.Failure{Err: "retry"})
			case 2:
				err = q().Snooze(ctx, l, time.Second)
			case 3:
				err = q().Heartbeat(ctx, &l, time.Minute, []byte(`{}`))
			}
			must(err)
		}
		clock.Advance(10 * time.Second)
	}
	ls, err := q().Claim(ctx, "w", time.Minute, 4)
	must(err)
	if len(ls) > 0 {
		errs, err := q().CompleteBatch(ctx, ls)
		must(err)
		for _, e := range errs {
			must(e)
		}
	}
	clock.Advance(2 * time.Minute) // expire the leases still held
	_, err = q().Claim(ctx, "w", time.Minute, 100)
	must(err)
}

// TestNodesOverTCP: three nodes on raft's TCP transport, as Start builds it
// from Bind on loopback, join and replicate; the API is a lease watcher,
// and closing it closes the node.
func TestNodesOverTCP(t *testing.T) {
	start := func(id string, bootstrap bool) *cluster.Node {
		n, err := cluster.Start(cluster.Config{ID: id, Dir: t.TempDir(), Bind: "127.0.0.1:0", Bootstrap: bootstrap,
			Logger: hclog.NewNullLogger(), Engine: engine.Options{Logger: quiet}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	ctx := within(t, 60*time.Second)
	first := start("a", true)
	if _, _, err := first.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	nodes := []*cluster.Node{first, start("b", false), start("c", false)}
	for _, n := range nodes[1:] {
		if err := first.Join(ctx, n.ID(), n.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	res, err := first.API().Queue(ns, "q").Enqueue(ctx, engine.Task{Payload: []byte(`"over tcp"`)})
	if err != nil {
		t.Fatal(err)
	}
	// A barrier on the leader, then every node has applied the enqueue.
	if err := first.Raft().Barrier(10 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	want := first.DB().Stats().Seq
	for _, n := range nodes {
		if err := clustertest.WaitSeq(n, want, time.Now().Add(10*time.Second)); err != nil {
			t.Fatal(err)
		}
		info, err := n.API().Queue(ns, "q").Get(engine.WithStaleReads(ctx), res.ID)
		if err != nil || string(info.Payload) != `"over tcp"` {
			t.Fatalf("%s: %+v %v", n.ID(), info, err)
		}
		if _, ok := n.API().(engine.LeaseWatcher); !ok {
			t.Fatal("the node's API is no LeaseWatcher")
		}
	}
	c := nodes[2]
	if err := c.API().Close(); err != nil {
		t.Fatal(err)
	}
	// Raft is shut down: its transport listens no more (closed once its
	// goroutines ended), and the node's DB is closed. (raft.State is no
	// witness: an RPC raft was handling as it shut down can set it back
	// to Follower after Shutdown set it.)
	if conn, err := net.DialTimeout("tcp", c.Addr(), 5*time.Second); err == nil {
		conn.Close()
		t.Fatalf("closing the API left raft listening on %s", c.Addr())
	}
	if _, err := c.API().Queue(ns, "q").Get(engine.WithStaleReads(ctx), res.ID); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("a read after closing the API: %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

// TestSnapshotIsTheStateWhenTaken: a snapshot persisted while commands go
// on applying (as raft persists it) holds the state as of Snapshot, and
// restoring it gives that state's hash.
func TestSnapshotIsTheStateWhenTaken(t *testing.T) {
	n := singleNode(t, t.TempDir(), engine.NewManualClock(t0))
	ctx := within(t, 60*time.Second)
	q := n.API().Queue(ns, "q")
	for i := range 50 {
		if _, err := q.Enqueue(ctx, engine.Task{Priority: i}); err != nil {
			t.Fatal(err)
		}
	}
	want, err := n.DB().StateHash()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := n.FSM().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	done := make(chan error, 1)
	go func() {
		for range 50 {
			if _, err := q.Enqueue(ctx, engine.Task{}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	first, err := clustertest.SnapshotBytes(n.FSM()) // a second snapshot, racing the writes
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	restore := func(data []byte) ([32]byte, uint64) {
		t.Helper()
		db, err := engine.OpenReplicated(engine.Options{Logger: quiet}, nopLog{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.Restore(bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		h, _ := db.StateHash()
		return h, db.Stats().Seq
	}
	if h, _ := restore(sink.Bytes()); h != want {
		t.Fatal("the persisted snapshot is not the state when Snapshot was called")
	}
	if _, seq := restore(first); seq < 50 || seq > 100 {
		t.Fatalf("the snapshot taken while writing is at batch %d", seq)
	}
	if after, _ := n.DB().StateHash(); after == want {
		t.Fatal("the writes after the snapshot changed nothing")
	}
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct{ bytes.Buffer }

func (*memSink) Close() error  { return nil }
func (*memSink) ID() string    { return "mem" }
func (*memSink) Cancel() error { return nil }

// nopLog is a Replicator for a DB that only restores.
type nopLog struct{}

func (nopLog) Submit(context.Context, []byte) (*engine.Applied, error) {
	return nil, engine.ErrNotLeader
}
func (nopLog) ReadBarrier(context.Context) error { return nil }

// TestSingleNodeMatchesStandalone: the same calls on a standalone DB and on
// a cluster of one get the same answers (lease secrets aside: each engine
// draws its own) and leave the same tasks, keys and counts.
func TestSingleNodeMatchesStandalone(t *testing.T) {
	sclock, rclock := engine.NewManualClock(t0), engine.NewManualClock(t0)
	solo, err := engine.OpenInMemory(engine.Options{Clock: sclock, Logger: quiet, RetainCompleted: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer solo.Close()
	_, tr := raft.NewInmemTransport("")
	n, err := cluster.Start(cluster.Config{ID: "solo", Dir: t.TempDir(), Transport: tr, Bootstrap: true, Logger: hclog.NewNullLogger(),
		Engine: engine.Options{Clock: rclock, Logger: quiet, RetainCompleted: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx := within(t, 60*time.Second)
	if _, _, err := n.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	secret := regexp.MustCompile(`Secret:\d+`)
	run := func(api engine.API, clock *engine.ManualClock) []string {
		var out []string
		say := func(v any, err error) {
			out = append(out, secret.ReplaceAllString(fmt.Sprintf("%+v %v", v, err), "Secret:_"))
		}
		q, kv := api.Queue(ns, "q"), api.KV(ns)
		say(q.EnqueueBatch(ctx, []engine.Task{{Priority: 2}, {Delay: time.Minute}, {IdempotencyKey: "k"}, {IdempotencyKey: "k"}}))
		say(q.Enqueue(ctx, engine.Task{}, engine.IfExists("missing")))
		say(kv.Commit(ctx, engine.Set("a", []byte("1")), engine.IfAbsent("a")))
		ls, err := q.Claim(ctx, "w", time.Minute, 2)
		say(ls, err)
		if len(ls) == 2 {
			say(q.Complete(ctx, ls[0], engine.Done{Result: []byte(`1`), FollowUps: []engine.FollowUp{{Queue: "f", Task: engine.Task{}}}}))
			say(q.Complete(ctx, ls[0], engine.Done{}))
			say(nil, q.Fail(ctx, ls[1], engine.Failure{Err: "x"}))
		}
		clock.Advance(2 * time.Minute)
		ls, err = q.Claim(ctx, "w", time.Minute, 5)
		say(ls, err)
		say(q.CompleteBatch(ctx, ls))
		say(q.Counts(ctx))
		say(q.List(ctx, engine.ListOptions{State: engine.Completed}))
		say(api.Queue(ns, "f").Counts(ctx))
		say(kv.Scan(ctx, engine.ScanOptions{}))
		say(api.Queues(ctx))
		return out
	}
	want, got := run(solo, sclock), run(n.API(), rclock)
	for i := range max(len(want), len(got)) {
		if i >= len(want) || i >= len(got) || want[i] != got[i] {
			t.Fatalf("answer %d differs:\nstandalone %v\ncluster    %v", i, want[min(i, len(want)-1)], got[min(i, len(got)-1)])
		}
	}
}
