package engine

import (
	"context"
	"testing"
)

// TestDeferredSyncs: a Deferred has an fsync to wait for once a commit
// was deferred to it at SyncAlways, and none before, after its Wait, at
// SyncNever or in memory.
func TestDeferredSyncs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		mem  bool
		d    Durability
		want bool
	}{
		{"always", false, SyncAlways, true},
		{"never", false, SyncNever, false},
		{"memory", true, SyncAlways, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.mem, func(o *Options) { o.Durability = c.d })
			ctx, d := DeferDurable(context.Background())
			if d.Syncs() {
				t.Fatal("Syncs before any commit")
			}
			q := e.db.Queue(NS("p", "s"), "q")
			if _, err := q.Enqueue(ctx, Task{Payload: []byte(`1`)}); err != nil {
				t.Fatal(err)
			}
			if got := d.Syncs(); got != c.want {
				t.Fatalf("Syncs after an enqueue = %v, want %v", got, c.want)
			}
			if err := d.Wait(); err != nil {
				t.Fatal(err)
			}
			if d.Syncs() {
				t.Fatal("Syncs after Wait")
			}
		})
	}
}
