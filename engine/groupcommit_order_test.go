package engine

import (
	"strings"
	"sync"
	"testing"

	"github.com/docketdb/docket/internal/vfs/errorfs"
)

// TestValuesGroupCommitOrder: a batch the log's group commit makes durable
// must not refer to a value the value log has not made durable. Commit A
// parks in the value log's fsync; commit B appends its value and batch and
// waits for the value log; A's log sync then takes B's batch along. A power
// loss once A is acknowledged must not bring B back without its payload.
func TestValuesGroupCommitOrder(t *testing.T) {
	t.Parallel()
	mem := newMemFS(t)
	var mu sync.Mutex
	syncs, writes := 0, 0
	parkSync, releaseSync := make(chan struct{}), make(chan struct{})
	parkWrite, releaseWrite := make(chan struct{}), make(chan struct{})
	armed := false
	fsys := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !strings.Contains(op.Path, "/vlog/") {
			return nil
		}
		mu.Lock()
		if !armed {
			mu.Unlock()
			return nil
		}
		var park, release chan struct{}
		switch op.Kind {
		case errorfs.OpSync:
			syncs++
			if syncs == 1 {
				park, release = parkSync, releaseSync
			}
		case errorfs.OpWrite:
			writes++
			if writes == 2 {
				park, release = parkWrite, releaseWrite
			}
		}
		mu.Unlock()
		if park != nil {
			close(park)
			<-release
		}
		return nil
	}))
	appended := make(chan struct{})
	const dir = "/data/db"
	opts := Options{Durability: SyncAlways, ValueThreshold: 64, SnapshotBytes: -1, Logger: quietLogger(), fs: fsys}
	opts.tap = func(seq uint64, _ []byte) {
		if seq == 2 {
			close(appended)
		}
	}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		close(releaseWrite)
		db.Close()
	}()
	q := db.Queue(ns, "q")
	mu.Lock()
	armed = true
	mu.Unlock()
	a := make(chan error, 1)
	go func() { _, err := q.Enqueue(ctx, Task{Payload: bigJSON(1, 200)}); a <- err }()
	<-parkSync // A's value is written, its fsync parked
	b := make(chan error, 1)
	go func() { _, err := q.Enqueue(ctx, Task{Payload: bigJSON(2, 200)}); b <- err }()
	<-appended // B's value and batch are appended; B waits for the value log
	close(releaseSync)
	if err := <-a; err != nil {
		t.Fatal(err)
	}
	<-parkWrite // B's value is not written yet
	crashed := opts
	crashed.fs = mem.CrashClone()
	crashed.tap = nil
	after, err := Open(dir, crashed)
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if err := after.Verify(); err != nil {
		t.Fatalf("after a power loss once A was acknowledged: %v", err)
	}
}
