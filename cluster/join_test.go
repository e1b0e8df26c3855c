package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/docketdb/docket/cluster"
	"github.com/docketdb/docket/cluster/clustertest"
	"github.com/docketdb/docket/engine"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// joinTrio starts n1 (the leader of a cluster it founded) and n2 (joined),
// and n3, running but not a member, on in-memory transports under one
// Network; n1 waits joinWait for a Join without a deadline.
func joinTrio(t *testing.T, joinWait time.Duration) (*clustertest.Network, [3]*cluster.Node) {
	t.Helper()
	net := clustertest.NewNetwork(1)
	var inmem [3]*raft.InmemTransport
	var nodes [3]*cluster.Node
	for i := range inmem {
		_, inmem[i] = raft.NewInmemTransport(raft.ServerAddress("n" + string(rune('1'+i))))
	}
	for i := range inmem {
		for j := range inmem {
			if i != j {
				inmem[i].Connect(inmem[j].LocalAddr(), inmem[j])
			}
		}
	}
	for i := range nodes {
		n, err := cluster.Start(cluster.Config{
			ID: string(inmem[i].LocalAddr()), Dir: t.TempDir(), Transport: net.Wrap(inmem[i]), Bootstrap: i == 0,
			Engine: engine.Options{Logger: quiet}, Logger: hclog.NewNullLogger(), JoinWait: joinWait,
			Raft: func(c *raft.Config) {
				c.HeartbeatTimeout, c.ElectionTimeout = 200*time.Millisecond, 200*time.Millisecond
				c.LeaderLeaseTimeout, c.CommitTimeout = 100*time.Millisecond, 5*time.Millisecond
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Kill() })
		nodes[i] = n
	}
	ctx := within(t, 30*time.Second)
	if id, _, err := nodes[0].WaitLeader(ctx); err != nil || id != "n1" {
		t.Fatalf("leader %q, %v", id, err)
	}
	if err := nodes[0].Join(ctx, "n2", "n2"); err != nil {
		t.Fatal(err)
	}
	return net, nodes
}

// knows returns how many servers n's latest configuration holds.
func knows(t *testing.T, n *cluster.Node) int {
	t.Helper()
	f := n.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	return len(f.Configuration().Servers)
}

// committedWithout waits until leader's change adding a third member has
// committed and been answered, with that member cut off: f holds the
// configuration of three, and a barrier after it has applied on the
// leader. Raft signals no change of a follower's configuration, so this
// looks every few milliseconds until a deadline.
func committedWithout(t *testing.T, leader, f *cluster.Node) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for knows(t, f) != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%s never learnt the configuration of three", f.ID())
		}
		tick := time.NewTimer(5 * time.Millisecond)
		<-tick.C
	}
	if err := leader.Raft().Barrier(30 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
}

// TestJoinWaitsForTheNewNode: Join returns only once the new node holds
// the configuration that adds it, not once the leader and one follower
// do; so when the leader dies right after, the two others elect a new one.
func TestJoinWaitsForTheNewNode(t *testing.T) {
	net, nodes := joinTrio(t, time.Minute)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	net.Cut("n1", "n3")
	ctx := within(t, 60*time.Second)
	done := make(chan error, 1)
	go func() { done <- n1.Join(ctx, "n3", "n3") }()
	committedWithout(t, n1, n2)
	// Join would have returned by now (it did before it waited for the
	// new node): the check of what must not happen is bounded.
	select {
	case err := <-done:
		t.Fatalf("Join returned (%v) while n3 held no configuration (it knows %d servers)", err, knows(t, n3))
	case <-time.After(500 * time.Millisecond):
	}
	net.Heal()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("Join did not return once n3 was reachable")
	}
	if k := knows(t, n3); k != 3 {
		t.Fatalf("Join returned while n3 knows %d servers", k)
	}
	// The leader dies at once: n2 and n3 elect one of theirs.
	if err := n1.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n2.IsLeader() || n3.IsLeader() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no leader among n2 and n3 after n1 died")
		}
		tick := time.NewTimer(10 * time.Millisecond)
		<-tick.C
	}
}

// TestJoinEndsBeforeCatchUp: a Join whose context ends (or, without a
// deadline, whose Config.JoinWait passes) after the change committed but
// before the new node holds it returns ErrNotCaughtUp with the cause, and
// the node is a member; a Join of the member again waits anew, and
// returns once it has caught up.
func TestJoinEndsBeforeCatchUp(t *testing.T) {
	net, nodes := joinTrio(t, 300*time.Millisecond)
	n1, n3 := nodes[0], nodes[2]
	net.Cut("n1", "n3")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := n1.Join(ctx, "n3", "n3")
	if !errors.Is(err, cluster.ErrNotCaughtUp) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Join of a node cut off: %v, want ErrNotCaughtUp and the deadline", err)
	}
	members, err := n1.Members()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range members {
		found = found || m.ID == "n3" && m.Voter
	}
	if !found {
		t.Fatalf("n3 is no voter after its Join committed: %+v", members)
	}
	// No deadline: JoinWait bounds the wait.
	if err := n1.Join(context.Background(), "n3", "n3"); !errors.Is(err, cluster.ErrNotCaughtUp) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Join again of a member cut off, without a deadline: %v", err)
	}
	if k := knows(t, n3); k != 0 {
		t.Fatalf("n3, cut off, knows %d servers", k)
	}
	net.Heal()
	if err := n1.Join(within(t, 60*time.Second), "n3", "n3"); err != nil {
		t.Fatalf("Join again once n3 is reachable: %v", err)
	}
	if k := knows(t, n3); k != 3 {
		t.Fatalf("Join returned while n3 knows %d servers", k)
	}
	if err := n1.Join(within(t, 60*time.Second), "n1", "n1"); err != nil {
		t.Fatalf("Join of the leader itself: %v", err)
	}
}

// TestJoinLeaderLostBeforeCatchUp: a leader that loses its leadership
// while it waits for the new node returns ErrNotCaughtUp with ErrNotLeader
// (another leader's followers answer that one); the node is a member.
func TestJoinLeaderLostBeforeCatchUp(t *testing.T) {
	net, nodes := joinTrio(t, time.Minute)
	n1, n2 := nodes[0], nodes[1]
	net.Cut("n1", "n3")
	net.Cut("n2", "n3")
	ctx := within(t, 60*time.Second)
	done := make(chan error, 1)
	go func() { done <- n1.Join(ctx, "n3", "n3") }()
	committedWithout(t, n1, n2)
	if err := n1.Raft().LeadershipTransferToServer("n2", "n2").Error(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, cluster.ErrNotCaughtUp) || !errors.Is(err, engine.ErrNotLeader) {
		t.Fatalf("Join on a leader that lost its leadership: %v", err)
	}
	members, err := n2.Members()
	if err != nil || len(members) != 3 {
		t.Fatalf("members on the new leader: %+v %v", members, err)
	}
}
