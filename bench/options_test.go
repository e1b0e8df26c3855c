package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

// TestValueOptions: Config's ValueThreshold and MaxMemory reach the DB a
// workload opens: a payload over the threshold goes to the value log, one
// under it (or with the threshold negative) stays out of it, and the
// budget is the one asked for.
func TestValueOptions(t *testing.T) {
	payload := makePayload(2048, 0)
	for _, tc := range []struct {
		name      string
		threshold int
		maxMemory int64
		inLog     bool
		budget    int64
	}{
		{"defaults", 0, 64 << 20, true, 64 << 20},
		{"in memory", -1, 32 << 20, false, 32 << 20},
		{"over the payload", 4096, -1, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{Durability: engine.SyncNever, ValueThreshold: tc.threshold, MaxMemory: tc.maxMemory}
			d, err := openDocket(cfg, dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Enqueue(context.Background(), payload); err != nil {
				t.Fatal(err)
			}
			if got := d.db.Stats().MemoryBudget; got != tc.budget {
				t.Errorf("memory budget %d, want %d", got, tc.budget)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			if n := dirBytes(filepath.Join(dir, "vlog")); (n >= int64(len(payload))) != tc.inLog {
				t.Errorf("value log of %d bytes after a payload of %d; want it there: %v", n, len(payload), tc.inLog)
			}
		})
	}
}

// TestBacklogHeapProfile: W10 writes the heap's profile once the backlog
// is full when asked, and fails with the error when it cannot.
func TestBacklogHeapProfile(t *testing.T) {
	cfg := syncNever.config(t, "W10", 500)
	cfg.Duration = 20 * time.Millisecond
	cfg.HeapProfile = filepath.Join(t.TempDir(), "heap.pprof")
	run(t, cfg)
	b, err := os.ReadFile(cfg.HeapProfile)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b { // a profile is gzipped
		t.Fatalf("heap profile of %d bytes: %v", len(b), err)
	}
	cfg.HeapProfile = filepath.Join(t.TempDir(), "no such dir", "heap.pprof")
	if _, err := Run(ctx, cfg); err == nil || !strings.Contains(err.Error(), "heap profile") {
		t.Fatalf("a profile to a missing directory: %v", err)
	}
}
