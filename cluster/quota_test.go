package cluster_test

import (
	"errors"
	"testing"
	"time"

	"github.com/docketdb/docket/cluster/clustertest"
	"github.com/docketdb/docket/engine"
)

// TestQuotaAcrossLeaders: a namespace's quota set through one leader is
// enforced by the next one, and every member holds the same state.
func TestQuotaAcrossLeaders(t *testing.T) {
	clock := engine.NewManualClock(t0)
	m := clustertest.NewMesh(t, clustertest.MeshOptions{Engine: func(int) engine.Options { return engine.Options{Clock: clock} }})
	ctx := within(t, 60*time.Second)
	first, err := m.WaitLeader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.API().(engine.Quotas).SetQuota(ctx, ns, engine.Quota{MaxTasks: 2}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := first.API().Queue(ns, "q").Enqueue(ctx, engine.Task{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Converge(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := m.Kill(first.I); err != nil {
		t.Fatal(err)
	}
	next := newLeader(t, m, first)
	if _, err := next.API().Queue(ns, "q").Enqueue(ctx, engine.Task{}); !errors.Is(err, engine.ErrFull) {
		t.Fatalf("enqueue past the quota on the next leader: %v", err)
	}
	if _, err := next.API().Queue(engine.NS("acme", "dev"), "q").Enqueue(ctx, engine.Task{}); err != nil {
		t.Fatalf("another namespace on the next leader: %v", err)
	}
	q, u, err := next.API().(engine.Quotas).Quota(ctx, ns)
	if err != nil || q.MaxTasks != 2 || u.Tasks != 2 {
		t.Fatalf("the next leader's quota %+v, usage %+v, %v", q, u, err)
	}
	if err := m.Restart(first.I); err != nil {
		t.Fatal(err)
	}
	if err := m.Converge(20 * time.Second); err != nil {
		t.Fatal(err)
	}
}
