package cluster_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/docketdb/docket/cluster"
	"github.com/docketdb/docket/cluster/clustertest"
	"github.com/docketdb/docket/engine"
	"github.com/hashicorp/raft"
)

// follower returns a running node of m that is not l.
func follower(m *clustertest.Mesh, l *clustertest.Node) *clustertest.Node {
	for _, n := range m.Nodes {
		if n.Up() && n != l {
			return n
		}
	}
	return nil
}

// newLeader waits for a leader other than old.
func newLeader(t *testing.T, m *clustertest.Mesh, old *clustertest.Node) *clustertest.Node {
	t.Helper()
	l, err := m.WaitLeaderNot(old, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestFollowerCatchesUpBySnapshot: a follower that was down while the
// leader compacted its log past what the follower holds is brought back by
// a snapshot install, and ends with the same state and snapshot bytes.
func TestFollowerCatchesUpBySnapshot(t *testing.T) {
	m := clustertest.NewMesh(t, clustertest.MeshOptions{SegmentSize: 4096, Config: func(c *raft.Config) {
		c.TrailingLogs = 8
		c.SnapshotThreshold = 1 << 30 // only the explicit snapshot below
	}})
	l, err := m.WaitLeader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lag := follower(m, l)
	lagHeld := lag.Raft().LastIndex()
	if err := m.Kill(lag.I); err != nil {
		t.Fatal(err)
	}
	ctx := within(t, 30*time.Second)
	for i := range 200 {
		api := leaderAPI(t, m)
		if _, err := api.Queue(ns, "q").Enqueue(ctx, engine.Task{IdempotencyKey: strconv.Itoa(i), Payload: []byte(`{"i":` + strconv.Itoa(i) + `}`)}); err != nil && !unavailable(err) {
			t.Fatal(err)
		}
	}
	// Every node up compacts its log, not the leader alone: on a loaded
	// machine the leadership may move before the follower is back, and a
	// leader that kept its log would send it entries, not a snapshot.
	for _, n := range m.Nodes {
		if !n.Up() {
			continue
		}
		if err := n.Snapshot(); err != nil {
			t.Fatal(err)
		}
		at := n.Raft().Stats()["last_snapshot_index"]
		if snapAt, _ := strconv.ParseUint(at, 10, 64); snapAt <= lagHeld+8 {
			t.Fatalf("node %d's snapshot at %d does not cover past the follower's log (%d)", n.I, snapAt, lagHeld)
		}
	}
	if err := m.Restart(lag.I); err != nil {
		t.Fatal(err)
	}
	if err := m.Converge(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := lag.Raft().Stats()["last_snapshot_index"]; got == "0" {
		t.Fatal("the follower caught up without installing a snapshot")
	}
	n, err := lag.API().Queue(ns, "q").Counts(engine.WithStaleReads(ctx))
	if err != nil || n.Ready != 200 {
		t.Fatalf("the follower holds %+v (%v), want 200 ready", n, err)
	}
}

// TestMinorityLeaderWritesNeverAcknowledged: a leader cut off from the
// majority acknowledges no write and serves no linearizable read; the
// majority elects a leader that takes writes; once healed, the old leader
// follows, and what it appended alone is gone from every node.
func TestMinorityLeaderWritesNeverAcknowledged(t *testing.T) {
	m := clustertest.NewMesh(t, clustertest.MeshOptions{})
	ctx := within(t, 60*time.Second)
	// A leader that loses its lease (a loaded machine) is replaced: the
	// write goes to the new one, under one idempotency key.
	var old *clustertest.Node
	var q engine.Queue
	for try := 0; ; try++ {
		var err error
		if old, err = m.WaitLeader(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		q = old.API().Queue(ns, "q")
		_, err = q.Enqueue(ctx, engine.Task{IdempotencyKey: "before", Payload: []byte(`"before"`)})
		if err == nil {
			break
		}
		if !unavailable(err) || try == 20 {
			t.Fatal(err)
		}
	}
	m.Net.Isolate(old.Addr)
	if _, err := q.Enqueue(ctx, engine.Task{Payload: []byte(`"minority"`)}); err == nil || !unavailable(err) {
		t.Fatalf("a minority leader's enqueue returned %v, want ErrOutcomeUnknown or ErrNotLeader", err)
	}
	if _, err := q.Counts(ctx); !errors.Is(err, engine.ErrNotLeader) {
		t.Fatalf("a linearizable read on the cut-off node: %v", err)
	}
	if n, err := q.Counts(engine.WithStaleReads(ctx)); err != nil || n.Ready < 1 {
		t.Fatalf("a stale read on the cut-off node: %+v %v", n, err)
	}
	// The majority's leader may lose its leadership while it commits (a
	// loaded machine misses a lease): the write is sent again, under one
	// idempotency key, until it is acknowledged.
	for try := 0; ; try++ {
		l := newLeader(t, m, old)
		_, err := l.API().Queue(ns, "q").Enqueue(ctx, engine.Task{IdempotencyKey: "majority", Payload: []byte(`"majority"`)})
		if err == nil {
			break
		}
		if !unavailable(err) || try == 20 {
			t.Fatal(err)
		}
	}
	var nle *cluster.NotLeaderError
	if _, err := q.Enqueue(ctx, engine.Task{Payload: []byte(`"late"`)}); !errors.As(err, &nle) {
		t.Fatalf("the deposed leader's enqueue: %v, want a NotLeaderError", err)
	}
	m.Net.Heal()
	if err := m.Converge(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, n := range m.Nodes {
		page, err := n.API().Queue(ns, "q").List(engine.WithStaleReads(ctx), engine.ListOptions{State: engine.Ready})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ti := range page.Tasks {
			got = append(got, string(ti.Payload))
		}
		if fmt.Sprint(got) != `["before" "majority"]` {
			t.Fatalf("%s holds %v, want only the acknowledged tasks", n.ID, got)
		}
	}
}

// TestNewLeaderWithSlowerClock: leadership moves to a node whose clock is
// an hour behind; it plans at the applied time, so the lease granted by the
// old leader does not expire early, a new timer is not due before the old
// leader's now, and a heartbeat extends from the applied time.
func TestNewLeaderWithSlowerClock(t *testing.T) {
	fast, slow := engine.NewManualClock(t0.Add(time.Hour)), engine.NewManualClock(t0)
	m := clustertest.NewMesh(t, clustertest.MeshOptions{Engine: func(i int) engine.Options {
		if i == 0 {
			return engine.Options{Clock: fast}
		}
		return engine.Options{Clock: slow}
	}})
	l, err := m.WaitLeader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.I != 0 {
		t.Skipf("leadership already moved to %s before the test began", l.ID)
	}
	ctx := within(t, 60*time.Second)
	q := l.API().Queue(ns, "q")
	if _, err := q.Enqueue(ctx, engine.Task{}); err != nil {
		t.Fatal(err)
	}
	ls, err := q.Claim(ctx, "w", 30*time.Second, 1)
	if err != nil || len(ls) != 1 || !ls[0].Deadline.Equal(t0.Add(time.Hour+30*time.Second)) {
		t.Fatalf("claim on the fast leader: %+v %v", ls, err)
	}
	lease := ls[0]
	to := m.Nodes[1]
	if err := l.Raft().LeadershipTransferToServer(raft.ServerID(to.ID), to.Addr).Error(); err != nil {
		t.Fatal(err)
	}
	nl := newLeader(t, m, l)
	if nl.I == 0 {
		t.Fatal("leadership came back to the fast node")
	}
	sq := nl.API().Queue(ns, "q")
	if ls, err := sq.Claim(ctx, "thief", time.Minute, 5); err != nil || len(ls) != 0 {
		t.Fatalf("the slow leader claimed %+v (%v): the lease expired early", ls, err)
	}
	res, err := sq.Enqueue(ctx, engine.Task{Delay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	info, err := sq.Get(ctx, res.ID)
	if err != nil || !info.NotBefore.Equal(t0.Add(time.Hour+time.Second)) {
		t.Fatalf("a timer set on the slow leader is due %v (%v)", info.NotBefore, err)
	}
	if err := sq.Heartbeat(ctx, &lease, time.Minute, nil); err != nil || !lease.Deadline.Equal(t0.Add(time.Hour+time.Minute)) {
		t.Fatalf("heartbeat on the slow leader: deadline %v (%v)", lease.Deadline, err)
	}
	slow.Advance(time.Hour + 2*time.Minute)
	ls, err = sq.Claim(ctx, "next", time.Minute, 1)
	if err != nil || len(ls) != 1 || ls[0].ID != lease.ID || ls[0].Token != lease.Token+1 {
		t.Fatalf("claim after the lease ran out: %+v %v", ls, err)
	}
	if err := m.Converge(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestMembership: Join adds voters (the mesh is built that way), is refused
// on a follower with the leader's name, for a taken address and a bad id,
// and repeats harmlessly; Remove drops a member; a leader's Close hands its
// leadership over, so a new leader is there long before any follower would
// have called an election.
func TestMembership(t *testing.T) {
	m := clustertest.NewMesh(t, clustertest.MeshOptions{})
	l, err := m.WaitLeader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := within(t, 60*time.Second)
	members, err := l.Members()
	if err != nil || len(members) != 3 {
		t.Fatalf("members: %+v %v", members, err)
	}
	for _, mb := range members {
		if !mb.Voter || mb.Leader != (mb.ID == l.ID) {
			t.Fatalf("member %+v (leader %s)", mb, l.ID)
		}
	}
	f := follower(m, l)
	var nle *cluster.NotLeaderError
	if err := f.Join(ctx, "n9", "n9"); !errors.As(err, &nle) || nle.LeaderID != l.ID || nle.LeaderAddr != string(l.Addr) {
		t.Fatalf("join on a follower: %v", err)
	}
	if err := l.Join(ctx, "n9", string(f.Addr)); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("join at a member's address: %v", err)
	}
	if err := l.Join(ctx, "", "x"); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("join with an empty id: %v", err)
	}
	if err := l.Join(ctx, f.ID, string(f.Addr)); err != nil {
		t.Fatalf("join of a member again: %v", err)
	}
	// Followers that would wait 30 s before an election: only a handover
	// gives a leader within seconds.
	for _, n := range m.Nodes {
		if n != l {
			rc := n.Raft().ReloadableConfig()
			rc.HeartbeatTimeout, rc.ElectionTimeout = 30*time.Second, 30*time.Second
			if err := n.Raft().ReloadConfig(rc); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := m.Stop(l.I); err != nil {
		t.Fatal(err)
	}
	nl, err := m.WaitLeader(5 * time.Second)
	if err != nil {
		t.Fatalf("after the leader's Close: %v", err)
	}
	if _, err := nl.API().KV(ns).Commit(ctx, engine.Set("k", nil)); err != nil {
		t.Fatal(err)
	}
	if s := nl.Stats(); s.State != "Leader" || s.LeaderID != nl.ID || s.CommitIndex == 0 || s.Seq != 1 || s.AppliedIndex > s.CommitIndex || s.LeaderChanges < 2 {
		t.Fatalf("stats of the new leader: %+v", s)
	}
	if err := m.Restart(l.I); err != nil {
		t.Fatal(err)
	}

	f = follower(m, nl)
	if err := f.Remove(ctx, nl.ID); !errors.Is(err, engine.ErrNotLeader) {
		t.Fatalf("remove on a follower: %v", err)
	}
	if err := nl.Remove(ctx, f.ID); err != nil {
		t.Fatal(err)
	}
	if members, err := nl.Members(); err != nil || len(members) != 2 {
		t.Fatalf("members after remove: %+v %v", members, err)
	}
	if err := nl.Remove(ctx, f.ID); err != nil {
		t.Fatalf("remove of a node no longer a member: %v", err)
	}
	m.Kill(f.I) // removed, it has shut raft down itself
	if _, err := nl.API().KV(ns).Commit(ctx, engine.Set("k", nil)); err != nil {
		t.Fatalf("a write on the cluster of two: %v", err)
	}
}

// TestStartRefuses: bad configurations and a directory in use are refused
// before raft starts.
func TestStartRefuses(t *testing.T) {
	dir := t.TempDir()
	n := singleNode(t, dir, nil)
	_, tr := raft.NewInmemTransport("")
	cases := map[string]cluster.Config{
		"no id":          {Dir: t.TempDir(), Transport: tr},
		"comma in id":    {ID: "a,b", Dir: t.TempDir(), Transport: tr},
		"no dir":         {ID: "a", Transport: tr},
		"no address":     {ID: "a", Dir: t.TempDir()},
		"bad advertise":  {ID: "a", Dir: t.TempDir(), Bind: "127.0.0.1:0", Advertise: "0.0.0.0:1"},
		"bad raft timer": {ID: "a", Dir: t.TempDir(), Transport: tr, Raft: func(c *raft.Config) { c.LeaderLeaseTimeout = time.Hour }},
	}
	for name, cfg := range cases {
		if _, err := cluster.Start(cfg); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := cluster.Start(cluster.Config{ID: "again", Dir: dir, Transport: tr}); !errors.Is(err, engine.ErrLocked) {
		t.Errorf("a second node on a directory: %v, want ErrLocked", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Start(cluster.Config{ID: "a", Dir: filepath.Join(file, "node"), Transport: tr}); err == nil {
		t.Error("a node in a directory under a file started")
	}
	if _, err := cluster.NewFSM(nil); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("NewFSM(nil): %v", err)
	}
	_ = n
}

// TestOutboxAndFollowUpsStayAtomic: on a cluster, an enqueue with KV writes
// and a completion with follow-ups and writes commit together or not at
// all, the same on every node.
func TestOutboxAndFollowUpsStayAtomic(t *testing.T) {
	m := clustertest.NewMesh(t, clustertest.MeshOptions{})
	l, err := m.WaitLeader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := within(t, 60*time.Second)
	api := l.API()
	q, kv := api.Queue(ns, "q"), api.KV(ns)
	if _, err := kv.Commit(ctx, engine.Set("guard", []byte("1"))); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, engine.Task{}, engine.Set("out", []byte("x")), engine.IfAbsent("guard")); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("enqueue with a failing assertion: %v", err)
	}
	if _, err := q.Enqueue(ctx, engine.Task{Payload: []byte(`1`)}, engine.Set("out", []byte("y")), engine.IfExists("guard")); err != nil {
		t.Fatal(err)
	}
	ls, err := q.Claim(ctx, "w", time.Minute, 1)
	if err != nil || len(ls) != 1 {
		t.Fatalf("claim: %v %v", ls, err)
	}
	done := engine.Done{Ops: []engine.Op{engine.Set("result", []byte("r")), engine.IfVersion("guard", 999)},
		FollowUps: []engine.FollowUp{{Queue: "next", Task: engine.Task{}}, {Queue: "next", Task: engine.Task{}}}}
	if _, err := q.Complete(ctx, ls[0], done); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("complete with a failing assertion: %v", err)
	}
	check := func(step string, inFlight, next int, result bool) {
		t.Helper()
		if err := m.Converge(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		for _, n := range m.Nodes {
			stale := engine.WithStaleReads(ctx)
			c1, err1 := n.API().Queue(ns, "q").Counts(stale)
			c2, err2 := n.API().Queue(ns, "next").Counts(stale)
			_, err3 := n.API().KV(ns).Get(stale, "result")
			out, err4 := n.API().KV(ns).Get(stale, "out")
			if err1 != nil || err2 != nil || err4 != nil || c1.InFlight != inFlight || c2.Ready != next ||
				(err3 == nil) != result || !bytes.Equal(out.Value, []byte("y")) {
				t.Fatalf("%s: %s holds %+v %+v result=%v out=%q (%v %v %v %v)", step, n.ID, c1, c2, err3 == nil, out.Value, err1, err2, err3, err4)
			}
		}
	}
	check("refused completion", 1, 0, false)
	done.Ops = done.Ops[:1]
	tx, err := q.Complete(ctx, ls[0], done)
	if err != nil || len(tx.Enqueued) != 2 {
		t.Fatalf("complete: %+v %v", tx, err)
	}
	check("completion", 0, 2, true)
}
