package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

// TestCatchUpWaitEndsWhenTheNodeStops: a leader stopped while Join waits
// for a member to catch up answers ErrNotCaughtUp with ErrClosed.
func TestCatchUpWaitEndsWhenTheNodeStops(t *testing.T) {
	n := startAlone(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.awaitCaughtUp(ctx, "n2", n.raft.LastIndex()) }()
	// The wait registers before it blocks: look for it until a deadline.
	deadline := time.Now().Add(30 * time.Second)
	for {
		n.acks.mu.Lock()
		waiting := len(n.acks.waiters["n2"])
		n.acks.mu.Unlock()
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the wait never began")
		}
		tick := time.NewTimer(time.Millisecond)
		<-tick.C
	}
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrNotCaughtUp) || !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("the wait of a node stopped: %v", err)
	}
	n.acks.mu.Lock()
	left := len(n.acks.waiters)
	n.acks.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d waits left behind", left)
	}
}
